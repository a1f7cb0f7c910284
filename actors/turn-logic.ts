import {
  type ActorLogic,
  type AnyActorLogic,
  type AnyActorRef,
  createActor,
  type EventObject,
  type Snapshot,
  type StateValue,
} from "xstate";
import {
  initialTurnContext,
  type TurnCallSpec,
  type TurnContext,
  type TurnEvent,
  type TurnInput,
  type TurnOutput,
} from "../machines/turn.machine.ts";
import type { TurnStatus } from "../session/entries.ts";
import { ChartSnapshot, endedSnapshot } from "./chart-snapshot.ts";

type System = AnyActorRef["system"];

/**
 * The turn chart's effects: the actions `turnMachine` declares as no-ops, with the same params;
 * each also gets the turn's actor and its system, as an action does. Contracts are the
 * machine's (machines/turn.machine.ts); none may throw (a throw errors the turn's actor).
 */
export interface TurnChartEffects {
  prepare: (self: AnyActorRef, system: System) => void;
  startAttempt: (
    self: AnyActorRef,
    system: System,
    params: { attempt: number; step: number },
  ) => void;
  abortAttempt: (self: AnyActorRef, system: System, params: { attempt: number }) => void;
  pollAtEnd: (self: AnyActorRef, system: System) => void;
  refuseCalls: (self: AnyActorRef, system: System) => void;
  checkPermissions: (self: AnyActorRef, system: System) => void;
  rejectInvalid: (self: AnyActorRef, system: System) => void;
  commitBatch: (self: AnyActorRef, system: System) => void;
  retryScheduled: (
    self: AnyActorRef,
    system: System,
    params: { delayMs: number; attempt: number },
  ) => void;
  cancelAcknowledged: (self: AnyActorRef, system: System, params: { reason: string }) => void;
  executionStopped: (self: AnyActorRef, system: System) => void;
  finalize: (
    self: AnyActorRef,
    system: System,
    params: { status: TurnStatus; reason: string | undefined; cancelled: boolean },
  ) => void;
  ended: (
    self: AnyActorRef,
    system: System,
    params: { status: TurnStatus; reason: string | undefined },
  ) => void;
}

/** The chart's resting states (the transient preparing, refusing, committing never show). */
type Rest =
  | "sampling.streaming"
  | "sampling.stopping"
  | "ending"
  | "waiting"
  | "gating"
  | "executing.running"
  | "executing.stopping"
  | "finalizing"
  | "done";

/** Each resting state's snapshot `value`, as the machine shows it. */
const VALUES: Record<Rest, StateValue> = {
  "sampling.streaming": { running: { sampling: "streaming" } },
  "sampling.stopping": { running: { sampling: "stopping" } },
  ending: { running: "ending" },
  waiting: { running: "waiting" },
  gating: { running: "gating" },
  "executing.running": { running: { executing: "running" } },
  "executing.stopping": { running: { executing: "stopping" } },
  finalizing: "finalizing",
  done: "done",
};

/** The machine's delayed events, under the machine's names (`xstate.after.<delay>.<state id>`). */
const TURN_DEADLINE = "xstate.after.turnDeadline.turn.running";
const RETRY_DELAY = "xstate.after.retryDelay.turn.running.waiting";
const FINALIZE_DEADLINE = "xstate.after.finalizeDeadline.turn.finalizing";

/** A turn snapshot also keeps its resting state, flat (what the logic switches on). */
class TurnChartSnapshot extends ChartSnapshot<TurnContext, TurnOutput> {
  constructor(
    status: "active" | "done" | "error" | "stopped",
    output: TurnOutput | undefined,
    error: unknown,
    context: TurnContext,
    children: Record<string, AnyActorRef>,
    readonly rest: Rest,
  ) {
    super(status, output, error, VALUES[rest], context, children);
  }
}

/** What a turn actor's snapshot shows: the chart's state value and context, like a machine's. */
export type TurnSnapshot = Snapshot<TurnOutput> & TurnChartSnapshot;

/** XState's relay (not in its public types): delivers with the sender recorded for inspection. */
type Relay = { _relay: (source: AnyActorRef, target: AnyActorRef, event: EventObject) => void };

type Scope = {
  self: AnyActorRef;
  system: System;
  defer: (fn: () => void) => void;
  stopChild: (child: AnyActorRef) => void;
};

/** The working copy while one event is handled. */
interface Work {
  rest: Rest;
  context: TurnContext;
  children: Record<string, AnyActorRef>;
  scope: Scope;
}

const inRunning = (rest: Rest) => rest !== "finalizing" && rest !== "done";

/**
 * The turn statechart (`turnMachine`, machines/turn.machine.ts) as hand-compiled actor logic:
 * the runtime hosts every turn with this; the model tests, mutants and the inspector's chart
 * use the machine (a turn machine variant passed to the runtime is hosted as the machine).
 * Same states and snapshot values, context, guards in the same order, effects with the same
 * params in the same order (exit, transition, entry, as XState runs them), the same delayed
 * events on the actor system's clock, the batch invoked as child `batch` for the whole of
 * `running` (started after the event that created it, stopped on leaving `running`, its error
 * ends the turn through `finalizing`), and the same output. `test/turn-logic.model.test.ts`
 * drives both through the same random event sequences and compares them after every event.
 *
 * Why: with the batch and calls compiled, XState's interpreter spent ≈ 20 µs of a step on this
 * chart (two macrosteps a step over a nested chart, snapshot copies), a quarter of the step;
 * this is the same chart in a switch (`npx tsx bench/extras/xstate-floor.ts`).
 *
 * One difference, invisible to the chart: a turn with no deadline arms no deadline timer (the
 * machine arms a guarded timer of 2^31 − 1 ms that can never be taken).
 */
export function turnLogic({
  batch,
  effects,
}: {
  /** The logic of the turn's batch (the runtime's: `batchLogic`). */
  batch: AnyActorLogic;
  effects: TurnChartEffects;
}): ActorLogic<TurnSnapshot, TurnEvent, TurnInput> & { id: string } {
  const snapshotOf = (w: Work): TurnSnapshot =>
    (w.rest === "done"
      ? new TurnChartSnapshot(
          "done",
          { status: w.context.status, reason: w.context.reason },
          undefined,
          w.context,
          w.children,
          "done",
        )
      : new TurnChartSnapshot(
          "active",
          undefined,
          undefined,
          w.context,
          w.children,
          w.rest,
        )) as TurnSnapshot;

  const set = (w: Work, patch: Partial<TurnContext>) => {
    w.context = Object.assign({}, w.context, patch);
  };

  const schedule = (w: Work, id: string, delay: number) =>
    w.scope.system.scheduler.schedule(w.scope.self, w.scope.self, { type: id }, delay, id);
  const cancel = (w: Work, id: string) => w.scope.system.scheduler.cancel(w.scope.self, id);
  const sendBatch = (w: Work, event: EventObject) => {
    const child = w.children.batch;
    if (!child) return;
    const { self, system } = w.scope;
    w.scope.defer(() => (system as unknown as Relay)._relay(self, child, event));
  };

  /** Entering `running.sampling` (and its `streaming`): a new attempt. */
  const enterSampling = (w: Work) => {
    set(w, { attemptSeq: w.context.attemptSeq + 1 });
    const { self, system } = w.scope;
    effects.startAttempt(self, system, { attempt: w.context.attemptSeq, step: w.context.step });
    w.rest = "sampling.streaming";
  };

  /** Exits from the current state up to (not including) `running`; then maybe `running` too. */
  const exitTo = (w: Work, leaveRunning: boolean) => {
    if (w.rest === "waiting") cancel(w, RETRY_DELAY);
    if (leaveRunning && inRunning(w.rest)) {
      if (w.context.limits.deadlineMs > 0) cancel(w, TURN_DEADLINE);
      const child = w.children.batch;
      if (child) {
        const children = Object.assign({}, w.children);
        delete children.batch;
        w.children = children;
        w.scope.defer(() => w.scope.stopChild(child));
      }
    }
  };

  /** Leaves `running` (or the state) for `finalizing`, running `actions` between exit and entry. */
  const toFinalizing = (w: Work, actions: () => void) => {
    exitTo(w, true);
    actions();
    w.rest = "finalizing";
    const { self, system } = w.scope;
    const c = w.context;
    effects.finalize(self, system, {
      status: c.status,
      reason: c.reason,
      cancelled: c.cancelRequested,
    });
    schedule(w, FINALIZE_DEADLINE, c.finalizeDeadlineMs);
  };

  /** `finalizing` → `done`. */
  const toDone = (w: Work, actions: () => void) => {
    cancel(w, FINALIZE_DEADLINE);
    actions();
    w.rest = "done";
    const { self, system } = w.scope;
    effects.ended(self, system, { status: w.context.status, reason: w.context.reason });
  };

  /** The machine's `decideNext(before)`: stop on a spent budget, else sample again. */
  const decideNext = (w: Work, before: () => void) => {
    const c = w.context;
    const { self, system } = w.scope;
    if (c.step >= c.limits.maxSteps) {
      toFinalizing(w, () => {
        before();
        set(w, {
          status: "budget_exhausted",
          reason: `maxSteps (${w.context.limits.maxSteps}) reached`,
        });
      });
      return;
    }
    if (c.limits.maxTokens > 0 && c.tokens >= c.limits.maxTokens) {
      toFinalizing(w, () => {
        before();
        set(w, {
          status: "budget_exhausted",
          reason: `maxTokens (${w.context.limits.maxTokens}) reached: ${w.context.tokens} tokens used`,
        });
      });
      return;
    }
    exitTo(w, false);
    before();
    effects.prepare(self, system);
    enterSampling(w);
  };

  const commitBatch = (w: Work) => () => effects.commitBatch(w.scope.self, w.scope.system);

  /** The default interrupt (phases with nothing running): acknowledge and finalize at once. */
  const interrupt = (w: Work, event: { reason: string; status?: TurnStatus }) => {
    const { self, system } = w.scope;
    const acknowledge = () => {
      set(w, {
        cancelRequested: true,
        status: event.status ?? "cancelled",
        reason: event.reason,
        stopDeadlineMs: w.context.stopDeadlineMs,
      });
      effects.cancelAcknowledged(self, system, { reason: event.reason });
    };
    switch (w.rest) {
      case "sampling.streaming":
        acknowledge();
        effects.abortAttempt(self, system, { attempt: w.context.attemptSeq });
        w.rest = "sampling.stopping";
        return;
      case "executing.running":
        acknowledge();
        sendBatch(w, { type: "batch.cancel", reason: event.reason } as EventObject);
        w.rest = "executing.stopping";
        return;
      case "sampling.stopping":
      case "executing.stopping":
      case "finalizing":
      case "done":
        return;
      default:
        toFinalizing(w, () => {
          acknowledge();
          effects.executionStopped(self, system);
        });
    }
  };

  const handle = (w: Work, event: TurnEvent | EventObject) => {
    const { self, system } = w.scope;
    const c = w.context;
    switch (event.type) {
      case "turn.interrupt":
        interrupt(w, event as { reason: string; status?: TurnStatus });
        return;
      case TURN_DEADLINE:
        if (inRunning(w.rest) && c.limits.deadlineMs > 0) {
          interrupt(w, { reason: "turn deadline reached", status: "budget_exhausted" });
        }
        return;
      case RETRY_DELAY:
        if (w.rest === "waiting") {
          exitTo(w, false);
          enterSampling(w);
        }
        return;
      case FINALIZE_DEADLINE:
        if (w.rest === "finalizing") {
          toDone(w, () =>
            set(w, {
              reason: `${w.context.reason ? `${w.context.reason}; ` : ""}finalizer deadline passed before the log was flushed`,
            }),
          );
        }
        return;
      case "finalize.done":
        if (w.rest === "finalizing") toDone(w, () => {});
        return;
      case "xstate.error.actor.batch":
        if (inRunning(w.rest)) {
          const error = (event as unknown as { error: unknown }).error;
          toFinalizing(w, () => {
            set(w, {
              status: "failed",
              reason: `internal error in the tool batch: ${String(error)}`,
            });
            effects.executionStopped(self, system);
          });
        }
        return;
    }
    if (w.rest === "sampling.streaming" || w.rest === "sampling.stopping") {
      if (event.type === "attempt.done") {
        const e = event as Extract<TurnEvent, { type: "attempt.done" }>;
        if (e.attempt !== c.attemptSeq) return;
        const countStep = () =>
          set(w, { step: w.context.step + 1, tokens: w.context.tokens + e.tokens });
        const takeResponse = () =>
          set(w, { step: w.context.step + 1, tokens: w.context.tokens + e.tokens, calls: e.calls });
        if (c.cancelRequested) {
          toFinalizing(w, () => {
            countStep();
            effects.executionStopped(self, system);
          });
        } else if (e.finishReason === "length" && e.callCount > 0) {
          // refusing (entry refuseCalls) → committing → decideNext(commitBatch)
          countStep();
          effects.refuseCalls(self, system);
          decideNext(w, commitBatch(w));
        } else if (e.callCount === 0) {
          countStep();
          w.rest = "ending";
          effects.pollAtEnd(self, system);
        } else if (e.calls.length === 0) {
          takeResponse();
          effects.rejectInvalid(self, system);
          decideNext(w, commitBatch(w));
        } else if (e.needsPermission === true) {
          takeResponse();
          w.rest = "gating";
          effects.rejectInvalid(self, system);
          effects.checkPermissions(self, system);
        } else {
          takeResponse();
          enterExecuting(w);
        }
        return;
      }
      if (event.type === "attempt.failed") {
        const e = event as Extract<TurnEvent, { type: "attempt.failed" }>;
        if (e.attempt !== c.attemptSeq) return;
        if (c.cancelRequested) {
          toFinalizing(w, () => effects.executionStopped(self, system));
        } else if (e.retry !== undefined) {
          const delayMs = e.retry.delayMs;
          set(w, { retryDelayMs: delayMs });
          effects.retryScheduled(self, system, { delayMs, attempt: w.context.attemptSeq });
          w.rest = "waiting";
          schedule(w, RETRY_DELAY, w.context.retryDelayMs);
        } else {
          toFinalizing(w, () => set(w, { status: e.status, reason: e.reason }));
        }
      }
      return;
    }
    if (w.rest === "ending") {
      if (event.type === "end.steered") decideNext(w, () => {});
      else if (event.type === "end.none") {
        toFinalizing(w, () => set(w, { status: "completed", reason: undefined }));
      }
      return;
    }
    if (w.rest === "gating") {
      if (event.type === "gate.allowed") {
        const calls = (event as { calls: TurnCallSpec[] }).calls;
        if (calls.length === 0) decideNext(w, commitBatch(w));
        else {
          set(w, { calls });
          enterExecuting(w);
        }
      } else if (event.type === "gate.declined") {
        const reason = (event as { reason: string }).reason;
        toFinalizing(w, () => set(w, { status: "cancelled", reason }));
      }
      return;
    }
    if (w.rest === "executing.running" || w.rest === "executing.stopping") {
      if (event.type !== "batch.done") return;
      if (c.cancelRequested) toFinalizing(w, () => effects.executionStopped(self, system));
      else decideNext(w, commitBatch(w));
    }
  };

  /** Entering `executing`: invalid calls get their results, the valid ones go to the batch. */
  const enterExecuting = (w: Work) => {
    w.rest = "executing.running";
    effects.rejectInvalid(w.scope.self, w.scope.system);
    sendBatch(w, { type: "batch.run", calls: w.context.calls } as EventObject);
  };

  return {
    id: "turn",
    getInitialSnapshot: (scope, input) => {
      const context = initialTurnContext(input);
      // The first attempt starts on entry (as the machine's initial state resolves it).
      context.attemptSeq = 1;
      const child = createActor(batch, {
        id: "batch",
        parent: scope.self,
        input: {
          maxParallelToolCalls: context.maxParallelToolCalls,
          stopDeadlineMs: context.stopDeadlineMs,
        },
      });
      return new TurnChartSnapshot(
        "active",
        undefined,
        undefined,
        context,
        { batch: child },
        "sampling.streaming",
      ) as TurnSnapshot;
    },
    // The initial state's entry actions: arm the deadline, start the batch, prepare, sample.
    start: (s, scope) => {
      const w: Work = { rest: s.rest, context: s.context, children: s.children, scope };
      if (s.context.limits.deadlineMs > 0) {
        schedule(w, TURN_DEADLINE, s.context.limits.deadlineMs);
      }
      effects.prepare(scope.self, scope.system);
      const { attemptSeq, step } = s.context;
      effects.startAttempt(scope.self, scope.system, { attempt: attemptSeq, step });
      const child = s.children.batch;
      scope.defer(() => child.start());
    },
    transition: (s, event, scope) => {
      if ((event as EventObject).type === "xstate.stop") {
        return endedSnapshot(s, "stopped", undefined, scope);
      }
      if (s.status !== "active") return s;
      // An error event no transition takes errors the actor with it and stops its children (as
      // XState does for a machine): the turn takes only its batch's, and only while `running`.
      const type = (event as EventObject).type;
      if (
        type.startsWith("xstate.error.actor") &&
        !(type === "xstate.error.actor.batch" && inRunning(s.rest))
      ) {
        const error = (event as unknown as { error: unknown }).error;
        return endedSnapshot(s, "error", error, scope);
      }
      const w: Work = { rest: s.rest, context: s.context, children: s.children, scope };
      handle(w, event);
      if (w.rest === s.rest && w.context === s.context && w.children === s.children) return s;
      return snapshotOf(w);
    },
    getPersistedSnapshot: (s) => s,
  };
}
