import { type AnyActorRef, assertEvent, assign, setup } from "xstate";
import { effect } from "./effect.ts";

/** The doorbell: a wake that arrived while a runner was active. `seq` is the latest wake's. */
export interface PendingWake {
  seq: number;
}

/** How the last execution ended. */
export type RunOutcome = "done" | "failed" | "interrupted";

export interface CoordinatorContext {
  /** Id of the current (or last) execution; 0 before the first. Each start, first or successor, adds 1. */
  execution: number;
  /** The doorbell. Set by a wake while running/stopping/cleaning; consumed by the handover. */
  pendingWake: PendingWake | null;
  lastOutcome: RunOutcome | null;
  lastError: string | null;
}

/**
 * The coordinator's events. `seq` is a host-assigned submission number, increasing in the order
 * callers submitted wakes and interrupts. `execution` names the execution a completion belongs
 * to; a completion of any other execution is ignored. `work` on `cleanup.done` is the host's
 * synchronous re-check of queued work at the handover (absent: nothing queued).
 */
export type CoordinatorEvent =
  | { type: "wake"; seq: number }
  | { type: "interrupt"; seq: number }
  | { type: "run.done"; execution: number }
  | { type: "run.failed"; execution: number; error: string }
  | { type: "cleanup.done"; execution: number; work?: boolean; error?: string };

/**
 * The effects the coordinator chart names, implemented by its host (`actors/coordinator.ts`)
 * and bound by `actors/charts.ts` like every other chart's. Contract for all: must not throw.
 */
export interface CoordinatorEffects {
  /** Start execution `execution`; answer `run.done` or `run.failed` with its number. */
  startRun(self: AnyActorRef, params: { execution: number }): void;
  /** Signal the current run's AbortSignal (it still answers `run.done` or `run.failed`). */
  abortRun(self: AnyActorRef): void;
  /** Run cleanup for `execution`, then answer `cleanup.done` with the host's re-check of work. */
  startCleanup(self: AnyActorRef, params: { execution: number }): void;
}

/**
 * The doorbell: one runner per session key (docs/architecture.md, "Inbox lanes").
 *
 * Lifecycle: `idle → running → cleaning → running (successor) | idle`; an interrupt while
 * running goes through `stopping` (abort signalled, run still ending). A wake while a runner is
 * active rings the doorbell (`pendingWake`) instead of starting a second runner. After the run
 * ends, cleanup runs (a state: the host may await there); `cleanup.done` then decides in ONE
 * transition, with nothing awaited in between, between a successor (doorbell set, or the host
 * still sees queued work) and `idle`. An interrupt clears the wakes submitted before it
 * (doorbell seq < interrupt seq), never one submitted after it.
 *
 * A wake carries no scope: what a run takes is the inbox's to say (`lanesToDrain`, read by the
 * run), so the doorbell records only that a wake came, and when.
 *
 * Invariant (no lost wake-up, 6): a wake accepted at any point leads to a run that starts after
 * it. Effects are declared with `effect()` ({@link CoordinatorEffects}) and bound by the runtime
 * (`actors/charts.ts`), as for the other charts.
 */
export const coordinatorMachine = setup({
  types: {
    context: {} as CoordinatorContext,
    events: {} as CoordinatorEvent,
  },
  guards: {
    isCurrentExecution: ({ context, event }) =>
      "execution" in event && event.execution === context.execution,
    successorNeeded: ({ context, event }) => {
      assertEvent(event, "cleanup.done");
      return (
        event.execution === context.execution &&
        (context.pendingWake !== null || event.work === true)
      );
    },
  },
  actions: {
    startRun: effect<{ execution: number }>(),
    abortRun: effect(),
    startCleanup: effect<{ execution: number }>(),
    begin: assign(({ context }) => ({ execution: context.execution + 1, pendingWake: null })),
    ringDoorbell: assign(({ context, event }) => {
      assertEvent(event, "wake");
      return { pendingWake: { seq: Math.max(context.pendingWake?.seq ?? -1, event.seq) } };
    }),
    recordInterrupt: assign(({ context, event }) => {
      assertEvent(event, "interrupt");
      const keep = context.pendingWake !== null && context.pendingWake.seq > event.seq;
      return { pendingWake: keep ? context.pendingWake : null };
    }),
    recordDone: assign({ lastOutcome: "done", lastError: null }),
    recordInterrupted: assign({ lastOutcome: "interrupted", lastError: null }),
    recordFailure: assign(({ event }) => {
      assertEvent(event, "run.failed");
      return { lastOutcome: "failed" as const, lastError: event.error };
    }),
    recordCleanupError: assign(({ context, event }) => {
      assertEvent(event, "cleanup.done");
      return { lastError: event.error ?? context.lastError };
    }),
    handOver: assign(({ context }) => ({ execution: context.execution + 1, pendingWake: null })),
  },
}).createMachine({
  id: "coordinator",
  initial: "idle",
  context: {
    execution: 0,
    pendingWake: null,
    lastOutcome: null,
    lastError: null,
  },
  states: {
    // No runner and nothing pending: the only state where a wake starts one.
    idle: {
      on: {
        wake: { target: "running", actions: "begin" },
        interrupt: { actions: "recordInterrupt" },
      },
    },
    // Exactly one run in flight; a wake here only rings the doorbell.
    running: {
      entry: { type: "startRun", params: ({ context }) => ({ execution: context.execution }) },
      on: {
        wake: { actions: "ringDoorbell" },
        interrupt: { target: "stopping", actions: ["recordInterrupt", "abortRun"] },
        "run.done": { guard: "isCurrentExecution", target: "cleaning", actions: "recordDone" },
        "run.failed": { guard: "isCurrentExecution", target: "cleaning", actions: "recordFailure" },
      },
    },
    // Interrupt acknowledged, abort signalled; the run has not ended yet.
    stopping: {
      on: {
        wake: { actions: "ringDoorbell" },
        interrupt: { actions: "recordInterrupt" },
        "run.done": {
          guard: "isCurrentExecution",
          target: "cleaning",
          actions: "recordInterrupted",
        },
        "run.failed": { guard: "isCurrentExecution", target: "cleaning", actions: "recordFailure" },
      },
    },
    // The run has ended; cleanup may await. The handover below is a single transition.
    cleaning: {
      entry: { type: "startCleanup", params: ({ context }) => ({ execution: context.execution }) },
      on: {
        wake: { actions: "ringDoorbell" },
        interrupt: { actions: "recordInterrupt" },
        "cleanup.done": [
          {
            guard: "successorNeeded",
            target: "running",
            actions: ["recordCleanupError", "handOver"],
          },
          { guard: "isCurrentExecution", target: "idle", actions: "recordCleanupError" },
        ],
      },
    },
  },
});

export type CoordinatorMachine = typeof coordinatorMachine;
/** The coordinator's state names. */
export type CoordinatorStateValue = "idle" | "running" | "stopping" | "cleaning";
