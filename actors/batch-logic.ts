import {
  type ActorLogic,
  type AnyActorLogic,
  type AnyActorRef,
  createActor,
  type EventObject,
  type Snapshot,
} from "xstate";
import {
  type BatchCallResult,
  type BatchContext,
  type BatchEvent,
  type BatchInput,
  type BatchOutput,
  type BatchPolicy,
  batchPolicy,
  checkedRound,
  planRound,
  roundContext,
  roundResults,
  runtimeFailed,
  type Settle,
  settleAll,
} from "../machines/batch.machine.ts";
import { cancelledBeforeStart, type ToolCallOutput } from "../machines/tool-call.machine.ts";
import { ChartSnapshot, endedSnapshot } from "./chart-snapshot.ts";

/** What a batch actor's snapshot shows: the chart's state, context and children, like a machine's. */
export type BatchSnapshot = Snapshot<undefined> &
  ChartSnapshot<BatchContext, undefined> & { value: "idle" | "running" };

type System = AnyActorRef["system"];

/**
 * The batch chart's two effects, the ones `batchMachine.provide({ actions })` names; each gets
 * the batch's actor and its system, as an action does.
 */
export interface BatchEffects {
  /** Contract: emit `call.settled` for the call; runs in completion order. Must not throw. */
  callSettled: (self: AnyActorRef, system: System, result: BatchCallResult) => void;
  /** Contract: the round is over, `results` in commit order; tell the owner. Must not throw. */
  roundDone: (self: AnyActorRef, system: System, output: BatchOutput) => void;
}

export interface BatchLogicOptions {
  /** The logic of each call's actor (the runtime's: `toolCallLogic`). */
  toolCall: AnyActorLogic;
  effects: BatchEffects;
  /** Broken policies for tests, exactly as `createBatchMachine(policy)` takes them. */
  policy?: Partial<BatchPolicy>;
}

type ChildEvent =
  | { type: `xstate.done.actor.${string}`; actorId: string; output: ToolCallOutput }
  | { type: `xstate.error.actor.${string}`; actorId: string; error: unknown };

/** XState's relay (not in its public types): delivers with the sender recorded for inspection. */
type Relay = { _relay: (source: AnyActorRef, target: AnyActorRef, event: EventObject) => void };

/** The working copy of a snapshot while one event is handled, and the actor handling it. */
interface Work {
  value: "idle" | "running";
  context: BatchContext;
  children: Record<string, AnyActorRef>;
  scope: Scope;
  /** Building the initial snapshot: effects wait for `start` (XState defers them likewise). */
  initial?: boolean;
}
type Scope = {
  self: AnyActorRef;
  system: System;
  defer: (fn: () => void) => void;
  stopChild: (child: AnyActorRef) => void;
};

/**
 * The batch statechart (`batchMachine`, machines/batch.machine.ts) as hand-compiled actor logic:
 * the runtime hosts each turn's batch with this; the model tests, mutants and the inspector's
 * chart use the machine. Same states (`idle ⇄ running`), events, context, children (slot ids,
 * created when a call starts, started after the event is handled, stopped when it settles),
 * effects in the same order (`callSettled` and `roundDone` while the event is handled; sends to
 * and starts of children afterwards, as XState defers them), and the same failures (an invalid
 * round or `batch.run` mid-round errors the actor). `test/batch-logic.model.test.ts` drives both
 * through the same random rounds, cancels and child reports and compares them after every step;
 * the batch race test checks the invariants on both and catches the same mutant policies.
 *
 * Why: XState's interpreter spends ≈ 20 µs per call in the batch (a macrostep per child report,
 * spawn and stop bookkeeping, snapshot copies), more than the rest of a call's cost in Keel;
 * this is the same chart in a switch (`npx tsx bench/extras/xstate-floor.ts`).
 */
export function batchLogic({ toolCall, effects, policy = {} }: BatchLogicOptions): ActorLogic<
  BatchSnapshot,
  BatchEvent | ChildEvent,
  BatchInput
> & {
  id: string;
} {
  const { schedule, commitOrder, childIds } = batchPolicy(policy);

  const snapshotOf = (w: Work): BatchSnapshot =>
    new ChartSnapshot(
      "active",
      undefined,
      undefined,
      w.value,
      w.context,
      w.children,
    ) as BatchSnapshot;

  /** Runs an effect now, or after start when the initial snapshot is being built. */
  const run = (w: Work, fn: () => void) => (w.initial ? w.scope.defer(fn) : fn());

  const settled = (w: Work, s: Settle) => {
    const { callId, name } = w.context.calls[s.index];
    const result = { callId, name, outcome: s.outcome, result: s.result };
    run(w, () => effects.callSettled(w.scope.self, w.scope.system, result));
  };

  /** The machine's `schedule` action. */
  const scheduleCalls = (w: Work) => {
    const plan = planRound(w.context, schedule, childIds);
    if (!plan) return;
    w.context = Object.assign({}, w.context, plan.next);
    for (const s of plan.skips) settled(w, s);
    if (plan.starts.length === 0) return;
    const children = Object.assign({}, w.children);
    for (const { slot, input } of plan.starts) {
      const child = createActor(toolCall, { id: slot, parent: w.scope.self, input });
      children[slot] = child;
      w.scope.defer(() => child.start());
    }
    w.children = children;
  };

  /** The machine's `always: allSettled` of `running`: end the round. */
  const endRoundIfSettled = (w: Work) => {
    if (w.value !== "running" || !w.context.phases.every((p) => p === "settled")) return;
    const committed = roundResults(w.context, commitOrder);
    w.context = Object.assign({}, w.context, { committed });
    w.value = "idle";
    const output = { results: roundResults(w.context, commitOrder) };
    run(w, () => effects.roundDone(w.scope.self, w.scope.system, output));
  };

  /** Removes a settled call's child (it is done or errored, so stopping it is immediate). */
  const dropChild = (w: Work, id: string) => {
    const child = w.children[id];
    if (!child) return;
    const children = Object.assign({}, w.children);
    delete children[id];
    w.children = children;
    w.scope.stopChild(child);
  };

  return {
    id: "batch",
    getInitialSnapshot: (scope, input) => {
      const maxParallel = input.maxParallelToolCalls ?? 8;
      const round =
        input.calls === undefined
          ? roundContext([], maxParallel)
          : checkedRound(input.calls, maxParallel);
      const context: BatchContext = Object.assign(round, {
        stopDeadlineMs: input.stopDeadlineMs,
        committed: undefined,
      });
      const w: Work = { value: "idle", context, children: {}, scope, initial: true };
      // A batch created with calls runs them as its first round (the machine's `starting`),
      // as the machine does: while the initial snapshot is built (children created now), its
      // effects and the children's starts deferred to `start`.
      if (context.calls.length > 0) {
        w.value = "running";
        scheduleCalls(w);
        endRoundIfSettled(w);
      }
      return snapshotOf(w);
    },
    transition: (s, event, scope) => {
      if ((event as EventObject).type === "xstate.stop") {
        return endedSnapshot(s, "stopped", undefined, scope);
      }
      if (s.status !== "active") return s;
      const w: Work = { value: s.value, context: s.context, children: s.children, scope };
      if (w.value === "idle") {
        // An error event no transition takes errors the actor with it and stops its children
        // (as XState does for a machine): `idle` takes none.
        if (event.type.startsWith("xstate.error.actor")) {
          const error = (event as unknown as { error: unknown }).error;
          return endedSnapshot(s, "error", error, scope);
        }
        if (event.type !== "batch.run") return s;
        w.context = Object.assign(
          {},
          w.context,
          checkedRound((event as { calls: BatchContext["calls"] }).calls, w.context.maxParallel),
        );
        w.value = "running";
        scheduleCalls(w);
        endRoundIfSettled(w);
        return snapshotOf(w);
      }
      const context = w.context;
      switch (event.type) {
        case "call.recorded":
        case "call.complete":
        case "call.fail":
        case "call.aborted": {
          // The machine's guard: the event names a running call.
          if (!("callId" in event)) return s;
          const index = context.index[(event as { callId: string }).callId];
          if (index === undefined || context.phases[index] !== "running") return s;
          const child = w.children[context.actorIds[index]!];
          if (child) {
            scope.defer(() => (scope.system as unknown as Relay)._relay(scope.self, child, event));
          }
          return s;
        }
        case "batch.cancel": {
          if (!context.cancelled) {
            const pending: Settle[] = [];
            context.phases.forEach((p, index) => {
              if (p === "pending") {
                pending.push({ index, outcome: "not_executed", result: cancelledBeforeStart });
              }
            });
            w.context = Object.assign({}, context, settleAll(context, pending), {
              cancelled: true,
            });
            for (const p of pending) settled(w, p);
            const cancel = { type: "call.cancel", reason: (event as { reason: string }).reason };
            context.phases.forEach((p, i) => {
              const child = p === "running" ? w.children[context.actorIds[i]!] : undefined;
              if (child) {
                scope.defer(() =>
                  (scope.system as unknown as Relay)._relay(scope.self, child, cancel),
                );
              }
            });
          }
          endRoundIfSettled(w);
          return snapshotOf(w);
        }
        case "batch.run":
          // A caller bug, never a race the turn can produce: fail loudly (the actor errors).
          throw new Error(
            `batch.run while a round of ${context.calls.length} call(s) is running; send it only after roundDone`,
          );
      }
      if (event.type.startsWith("xstate.done.actor.")) {
        const { actorId, output } = event as Extract<ChildEvent, { output: ToolCallOutput }>;
        const index = context.index[output?.callId];
        if (
          index === undefined ||
          context.phases[index] !== "running" ||
          context.actorIds[index] !== actorId
        ) {
          return s;
        }
        const settle: Settle = { index, outcome: output.outcome, result: output.result };
        w.context = Object.assign({}, context, settleAll(context, [settle]));
        dropChild(w, actorId);
        settled(w, settle);
        scheduleCalls(w);
        endRoundIfSettled(w);
        return snapshotOf(w);
      }
      if (event.type.startsWith("xstate.error.actor.")) {
        const { actorId, error } = event as Extract<ChildEvent, { error: unknown }>;
        const index = context.calls.findIndex(
          (_, i) => context.phases[i] === "running" && context.actorIds[i] === actorId,
        );
        if (index >= 0) {
          const settle: Settle = { index, outcome: "unknown", result: runtimeFailed(error) };
          w.context = Object.assign({}, context, settleAll(context, [settle]));
          dropChild(w, actorId);
          settled(w, settle);
        }
        scheduleCalls(w);
        endRoundIfSettled(w);
        return snapshotOf(w);
      }
      return s;
    },
    getPersistedSnapshot: (s) => s,
  };
}
