import {
  type AnyActorRef,
  assertEvent,
  assign,
  type DoneActorEvent,
  type ErrorActorEvent,
  enqueueActions,
  setup,
  stopChild,
} from "xstate";
import type { CallOutcome } from "../contracts/status.ts";
import type { ToolFailure, ToolResult } from "../contracts/tool-result.ts";
import { effect } from "./effect.ts";
import {
  type BatchCallSpec,
  type CallPhase,
  checkBatchCalls,
  type Scheduler,
  scheduleBatch,
} from "./policies/batch-schedule.ts";
import {
  cancelledBeforeStart,
  type ToolCallInput,
  type ToolCallOutput,
  toolCallMachine,
} from "./tool-call.machine.ts";

/**
 * How a batch actor is created. One actor serves a whole turn: each assistant message's calls
 * are one round (`batch.run`). `calls` here starts the first round at once (tests, one-shot use).
 */
export interface BatchInput {
  calls?: BatchCallSpec[];
  /** At most this many calls run at once. Default 8. */
  maxParallelToolCalls?: number;
  /** Passed to every call: how long a cancelled call may keep running. */
  stopDeadlineMs: number;
}

/** One call's final record. */
export interface BatchCallResult {
  callId: string;
  name: string;
  outcome: CallOutcome;
  result: ToolResult;
}

/**
 * What `roundDone` reports: every call's result of the round, once each, in the order they
 * SETTLED (the order `callSettled` ran). The commit order is not the batch's to decide: results
 * are written to the log as they settle (durable at once), and the model's view pairs each with
 * its call in call order (invariant 4 lives there: session/projection.ts).
 */
export interface BatchOutput {
  results: BatchCallResult[];
}

/**
 * Events the batch accepts. A call's own events (`call.recorded`, `call.complete`, …) go to
 * that call's actor, not through the batch: the effect that asks for them runs in that actor.
 */
export type BatchEvent =
  | { type: "batch.run"; calls: BatchCallSpec[] }
  | { type: "batch.cancel"; reason: string };

type ChildEvent = DoneActorEvent<ToolCallOutput> | ErrorActorEvent;

/** Batch state; per-call arrays are indexed like `calls` and replaced, never mutated. */
export interface BatchContext {
  calls: BatchCallSpec[];
  index: Record<string, number>;
  phases: CallPhase[];
  /** The child actor id of each call that got an actor (a slot: see {@link freeSlots}). */
  actorIds: (string | undefined)[];
  outcomes: (CallOutcome | undefined)[];
  results: (ToolResult | undefined)[];
  /** Call indexes in the order they settled. */
  completionOrder: number[];
  maxParallel: number;
  sequential: boolean;
  stopDeadlineMs: number;
  cancelled: boolean;
}

/**
 * The effects the batch chart names, implemented by the runtime and bound by `actors/charts.ts`
 * (the batch's calls have their own, {@link import("./tool-call.machine.ts").ToolCallEffects}).
 */
export interface BatchEffects {
  /** Tell observers a call settled; runs in completion order. Contract: must not throw. */
  callSettled(self: AnyActorRef, result: BatchCallResult): void;
  /**
   * The round is over, every call has its one result (`results`, in settle order): tell the
   * owner (`self` is the batch; the turn answers with `batch.done`). Runs once per round.
   * Contract: must not throw.
   */
  roundDone(self: AnyActorRef, output: BatchOutput): void;
}

/** Pluggable pure policies; the defaults implement the batch rules of docs/tools.md. */
export interface BatchPolicy {
  schedule: Scheduler;
  /** Child actor ids for the calls about to start (default: {@link freeSlots}). */
  childIds: (context: BatchContext, start: readonly number[]) => string[];
}

/** Synthetic result of a call whose actor failed (a runtime bug): its outcome is unknown. */
export function runtimeFailed(error: unknown): ToolFailure {
  return {
    ok: false,
    code: "OUTCOME_UNKNOWN",
    message:
      `the runtime failed while running this call (${String(error)}); whether the tool ran ` +
      "is unknown. Check the current state before retrying.",
    retryable: false,
  };
}

/** One call to settle: its index in the round, outcome and result. */
export type Settle = { index: number; outcome: CallOutcome; result: ToolResult };

/** The `callSettled` action for one settle. */
function settledAction(context: BatchContext, { index, outcome, result }: Settle) {
  const { callId, name } = context.calls[index];
  return { type: "callSettled" as const, params: { callId, name, outcome, result } };
}

/** A copy of `context` with the given calls settled, in the order given. */
export function settleAll(
  context: BatchContext,
  settles: Settle[],
): Pick<BatchContext, "phases" | "outcomes" | "results" | "completionOrder"> {
  const phases = [...context.phases];
  const outcomes = [...context.outcomes];
  const results = [...context.results];
  const completionOrder = [...context.completionOrder];
  for (const s of settles) {
    phases[s.index] = "settled";
    outcomes[s.index] = s.outcome;
    results[s.index] = s.result;
    completionOrder.push(s.index);
  }
  return { phases, outcomes, results, completionOrder };
}

/**
 * Builds a batch machine with the given policies. Use `batchMachine` unless you are testing
 * that the invariant checks catch a broken policy.
 */
export function createBatchMachine(policy: Partial<BatchPolicy> = {}) {
  const { schedule, childIds } = batchPolicy(policy);
  return setup({
    types: {
      context: {} as BatchContext,
      events: {} as BatchEvent | ChildEvent,
      input: {} as BatchInput,
    },
    actors: { toolCall: toolCallMachine },
    actions: {
      /** Contract: emit `call.settled` for the call; runs in completion order. Must not throw. */
      callSettled: effect<BatchCallResult>(),
      /**
       * Contract: the round is over, every call has its one result (`results`, settle order);
       * tell the owner (the turn answers `batch.done`). Runs once per round. Must not throw.
       */
      roundDone: effect<BatchOutput>(),
      beginRound: assign(({ context, event }) => {
        assertEvent(event, "batch.run");
        return checkedRound(event.calls, context.maxParallel);
      }),
      /** Settles the call whose actor sent this done event (guarded by `isRunningChild`). */
      settleChild: assign(({ context, event }) => {
        assertEvent(event, "xstate.done.actor.*");
        const { callId, outcome, result } = event.output;
        return settleAll(context, [{ index: context.index[callId], outcome, result }]);
      }),
      stopSettledChild: stopChild(({ event }) => (event as DoneActorEvent).actorId),
      childErrored: enqueueActions(({ enqueue, context, event }) => {
        assertEvent(event, "xstate.error.actor.*");
        const index = runningIndexOf(context, event.actorId);
        if (index < 0) return;
        const settle: Settle = { index, outcome: "unknown", result: runtimeFailed(event.error) };
        enqueue.assign(settleAll(context, [settle]));
        enqueue.stopChild(event.actorId);
        enqueue(settledAction(context, settle));
      }),
      schedule: enqueueActions(({ enqueue, context }) => {
        const plan = planRound(context, schedule, childIds);
        if (!plan) return;
        enqueue.assign(plan.next);
        for (const { slot, input } of plan.starts) {
          enqueue.spawnChild("toolCall", { id: slot, input });
        }
      }),
      cancel: enqueueActions(({ enqueue, context, event }) => {
        assertEvent(event, "batch.cancel");
        if (context.cancelled) return;
        const pending: Settle[] = [];
        context.phases.forEach((p, index) => {
          if (p === "pending") {
            pending.push({ index, outcome: "not_executed", result: cancelledBeforeStart });
          }
        });
        enqueue.assign({ ...settleAll(context, pending), cancelled: true });
        for (const s of pending) enqueue(settledAction(context, s));
        context.phases.forEach((p, i) => {
          if (p === "running") {
            enqueue.sendTo(context.actorIds[i]!, { type: "call.cancel", reason: event.reason });
          }
        });
      }),
    },
    guards: {
      hasCalls: ({ context }) => context.calls.length > 0,
      allSettled: ({ context }) => context.phases.every((p) => p === "settled"),
      /** A done event from the actor of a call that is running (not late, not a stranger). */
      isRunningChild: ({ context, event }) => runningChildIndex(context, event) >= 0,
      /** ... and every other call of the round has settled: this one ends the round. */
      isLastRunningChild: ({ context, event }) => {
        const index = runningChildIndex(context, event);
        return index >= 0 && context.phases.every((p, i) => i === index || p === "settled");
      },
    },
  }).createMachine({
    id: "batch",
    context: ({ input }) => {
      const maxParallel = input.maxParallelToolCalls ?? 8;
      // No calls: an idle batch waiting for `batch.run` (an empty list is still an error).
      const round =
        input.calls === undefined
          ? roundContext([], maxParallel)
          : checkedRound(input.calls, maxParallel);
      return Object.assign(round, { stopDeadlineMs: input.stopDeadlineMs });
    },
    initial: "starting",
    states: {
      // Transient: a batch created with calls runs them as its first round.
      starting: {
        always: [{ guard: "hasCalls", target: "running" }, { target: "idle" }],
      },
      // Between rounds; call events (late, or for calls of an ended round) are dropped here.
      idle: {
        on: { "batch.run": { target: "running", actions: "beginRound" } },
      },
      running: {
        entry: "schedule",
        // Every call has exactly one result: report the round (in settle order) and rest.
        always: {
          guard: "allSettled",
          target: "idle",
          actions: {
            type: "roundDone",
            params: ({ context }) => ({ results: settledResults(context) }),
          },
        },
        on: {
          // A call's actor finished: settle it (plain actions, not enqueueActions, which builds
          // a dozen closures: this runs once per call). The last one ends the round in the same
          // microstep; any other starts what may start now.
          "xstate.done.actor.*": [
            {
              guard: "isLastRunningChild",
              target: "idle",
              actions: [
                "settleChild",
                "stopSettledChild",
                { type: "callSettled", params: settledParams },
                {
                  type: "roundDone",
                  params: ({ context }) => ({ results: settledResults(context) }),
                },
              ],
            },
            {
              guard: "isRunningChild",
              actions: [
                "settleChild",
                "stopSettledChild",
                { type: "callSettled", params: settledParams },
                "schedule",
              ],
            },
          ],
          "xstate.error.actor.*": { actions: ["childErrored", "schedule"] },
          "batch.cancel": { actions: "cancel" },
          // A caller bug, never a race the turn can produce: fail loudly (the actor errors),
          // rather than drop the calls and leave the caller waiting for a round that never ends.
          "batch.run": {
            actions: ({ context }) => {
              throw new Error(
                `batch.run while a round of ${context.calls.length} call(s) is running; send it only after roundDone`,
              );
            },
          },
        },
      },
    },
  });
}

/** What one `schedule` decides: the new phases and slots, and the calls that start. */
export interface RoundPlan {
  next: Pick<BatchContext, "phases" | "actorIds">;
  starts: { slot: string; input: ToolCallInput }[];
}

/**
 * The `schedule` action's decision, pure: which pending calls start now, with their slots and
 * actor inputs. Undefined when nothing starts.
 */
export function planRound(
  context: BatchContext,
  schedule: Scheduler,
  childIds: BatchPolicy["childIds"],
): RoundPlan | undefined {
  if (context.cancelled || !context.phases.includes("pending")) return undefined;
  const plan = schedule({
    calls: context.calls,
    phases: context.phases,
    maxParallel: context.maxParallel,
    sequential: context.sequential,
  });
  if (plan.start.length === 0) return undefined;
  const phases = [...context.phases];
  const actorIds = [...context.actorIds];
  const slots = childIds(context, plan.start);
  const starts = plan.start.map((i, k) => {
    phases[i] = "running";
    actorIds[i] = slots[k];
    const call = context.calls[i];
    const input: ToolCallInput = {
      callId: call.callId,
      name: call.name,
      cancellable: call.cancellable,
      stopDeadlineMs: context.stopDeadlineMs,
    };
    return { slot: slots[k], input };
  });
  return { next: { phases, actorIds }, starts };
}

/** `policy` with the defaults (docs/tools.md) filled in. */
export function batchPolicy(policy: Partial<BatchPolicy> = {}): BatchPolicy {
  return {
    schedule: policy.schedule ?? scheduleBatch,
    childIds: policy.childIds ?? ((c: BatchContext, start) => freeSlots(c, start.length)),
  };
}

/** The round's results in the order they settled (every call has one when this is called). */
export function settledResults(context: BatchContext): BatchCallResult[] {
  return context.completionOrder.map((i) => ({
    callId: context.calls[i].callId,
    name: context.calls[i].name,
    outcome: context.outcomes[i]!,
    result: context.results[i]!,
  }));
}

/** A fresh round over `calls`; throws (the actor errors) on calls that cannot form a batch. */
export function checkedRound(calls: BatchCallSpec[], maxParallel: number) {
  const problems = checkBatchCalls(calls, maxParallel);
  if (problems.length > 0) throw new Error(`invalid batch: ${problems.join("; ")}`);
  return roundContext(calls, maxParallel);
}

/** The per-round part of the context, nothing settled yet. */
export function roundContext(calls: BatchCallSpec[], maxParallel: number) {
  const n = calls.length;
  // No prototype: a call id is the model's text, and `index["__proto__"] = i` on a plain object
  // sets nothing (that call then never matched its own done event and the round never ended).
  const index: Record<string, number> = Object.create(null);
  for (let i = 0; i < n; i++) index[calls[i].callId] = i;
  return {
    calls,
    index,
    phases: new Array<CallPhase>(n).fill("pending"),
    actorIds: new Array<string | undefined>(n).fill(undefined),
    outcomes: new Array<CallOutcome | undefined>(n).fill(undefined),
    results: new Array<ToolResult | undefined>(n).fill(undefined),
    completionOrder: [] as number[],
    maxParallel,
    sequential: calls.some((c) => c.executionMode === "sequential"),
    cancelled: false,
  };
}

/**
 * Child actor ids are slots (`slot0`, `slot1`, …; the lowest ones no running call holds), not
 * call ids. XState memoises transition candidates per state node and event type for the life of
 * the machine definition, which every batch in the process shares: with one id per call, each
 * call's `xstate.done.actor.<id>` left a cache entry behind forever (≈ 300 B a call, measured in
 * `bench/extras/leak.ts`). Slots bound those event types by `maxParallelToolCalls`. A call's id
 * is in its actor's input (`callId`), its output and the batch context.
 */
export function freeSlots(context: BatchContext, count: number): string[] {
  const taken = new Set<string>();
  context.phases.forEach((p, i) => {
    if (p === "running") taken.add(context.actorIds[i]!);
  });
  const slots: string[] = [];
  for (let k = 0; slots.length < count; k++) {
    const id = `slot${k}`;
    if (!taken.has(id)) slots.push(id);
  }
  return slots;
}

/** The `callSettled` params of the call whose done event this is. */
function settledParams({ context, event }: { context: BatchContext; event: unknown }) {
  const { callId, outcome, result } = (event as DoneActorEvent<ToolCallOutput>).output;
  return { callId, name: context.calls[context.index[callId]].name, outcome, result };
}

/** The index of the running call that sent this done event from its own actor, or -1. */
function runningChildIndex(context: BatchContext, event: unknown): number {
  const { actorId, output } = event as DoneActorEvent<ToolCallOutput>;
  const index = context.index[output?.callId];
  return index !== undefined &&
    context.phases[index] === "running" &&
    context.actorIds[index] === actorId
    ? index
    : -1;
}

/** The index of the running call whose actor is `actorId`, or -1. */
function runningIndexOf(context: BatchContext, actorId: string): number {
  for (let i = 0; i < context.calls.length; i++) {
    if (context.phases[i] === "running" && context.actorIds[i] === actorId) return i;
  }
  return -1;
}

/**
 * The calls of each assistant message: parallel execution, ordered commit (docs/tools.md).
 *
 * This machine is what runs: the runtime hosts it through `actors/charts.ts` with its effects
 * bound ({@link BatchEffects}), and the model search, the race test, the mutants and the
 * inspector's chart use the same definition.
 *
 * Lifecycle: one actor per turn. `idle` ⇄ `running`: `batch.run {calls}` starts a round
 * (schedule, collect); when every call has its result the round ends with
 * `roundDone {results}` (in settle order) and the batch is `idle` again. One long-lived actor
 * instead of one per step: creating an actor costs more than a whole round of events. Each
 * started call is a spawned `toolCall` actor with a slot id (`slot0`, …; see
 * {@link freeSlots}; its input carries the callId); the runtime sends a call's events to its
 * actor (the effects that ask for them run there). `batch.cancel {reason}` cancels the round.
 *
 * Per-call phases (`pending → running → settled`) live in context and are the only thing the
 * scheduler reads; a call becomes `settled` when its actor reaches a final state (done event),
 * or directly from `pending` when the batch is cancelled — those calls
 * never get an actor.
 *
 * Invariants (numbered as in docs/architecture.md):
 * - 1: every call settles exactly once, also after `batch.cancel` at any point; a child
 *   that errors (a provided action threw) settles as `unknown`, never silently;
 * - 4 (the batch's half): `callSettled` fires in completion order, and `roundDone` lists each
 *   result once, in that order; the call order of the model's view is the projection's
 *   (session/projection.ts, searched in test/projection-order.model.test.ts);
 * - 5: the scheduling rules of `scheduleBatch`;
 * - after `batch.cancel` no call starts; every running call receives `call.cancel`.
 */
export const batchMachine = createBatchMachine();

/** The actor logic type of a batch. */
export type BatchMachine = typeof batchMachine;
