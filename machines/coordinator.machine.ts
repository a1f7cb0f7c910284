import { assertEvent, assign, setup } from "xstate";

/** Why a runner is woken. INPUT (a prompt or follow-up) outranks STEER (a next-step message). */
export type WakeScope = "input" | "steer";

/** The doorbell: a wake that arrived while a runner was active. `seq` is that of the latest wake merged in. */
export interface PendingWake {
  scope: WakeScope;
  seq: number;
}

/** How the last execution ended. */
export type RunOutcome = "done" | "failed" | "interrupted";

export interface CoordinatorContext {
  /** Id of the current (or last) execution; 0 before the first. Each start, first or successor, adds 1. */
  execution: number;
  /** The scope the current execution was started for. */
  scope: WakeScope | null;
  /** The doorbell. Set by a wake while running/stopping/cleaning; consumed by the handover. */
  pendingWake: PendingWake | null;
  /** Seq of the last interrupt; -1 if none. */
  interruptedAt: number;
  lastOutcome: RunOutcome | null;
  lastError: string | null;
}

/**
 * The coordinator's events. `seq` is a host-assigned submission number, increasing in the order
 * callers submitted wakes and interrupts. `execution` names the execution a completion belongs
 * to; a completion of any other execution is ignored. `work` on `cleanup.done` is the host's
 * synchronous re-check of queued work at the handover (null or absent: nothing queued).
 */
export type CoordinatorEvent =
  | { type: "wake"; scope: WakeScope; seq: number }
  | { type: "interrupt"; seq: number }
  | { type: "run.done"; execution: number }
  | { type: "run.failed"; execution: number; error: string }
  | { type: "cleanup.done"; execution: number; work?: WakeScope | null; error?: string };

/** INPUT outranks STEER; null means "no wake". */
export function mergeScope(a: WakeScope | null, b: WakeScope | null | undefined): WakeScope | null {
  if (a === "input" || b === "input") return "input";
  return a ?? b ?? null;
}

/**
 * The doorbell: one runner per session key (DESIGN §3.4).
 *
 * Lifecycle: `idle → running → cleaning → running (successor) | idle`; an interrupt while
 * running goes through `stopping` (abort signalled, run still ending). A wake while a runner is
 * active rings the doorbell (`pendingWake`, INPUT outranks STEER) instead of starting a second
 * runner. After the run ends, cleanup runs (a state: the host may await there); `cleanup.done`
 * then decides in ONE transition, with nothing awaited in between, between a successor (doorbell
 * set, or the host still sees queued work) and `idle`. An interrupt clears the wakes submitted
 * before it (doorbell seq < interrupt seq), never one submitted after it.
 *
 * Invariant (no lost wake-up, §10.6): a wake accepted at any point leads to a run that starts
 * after it. Effects are the named actions `startRun`, `abortRun` and `startCleanup`, no-ops
 * here, provided by the host (`actors/coordinator.ts`) with `machine.provide({ actions })`.
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
        mergeScope(context.pendingWake?.scope ?? null, event.work) !== null
      );
    },
  },
  actions: {
    /** Effect: start the run for `context.scope` as execution `context.execution`. */
    startRun: () => {},
    /** Effect: signal the current run's AbortSignal. */
    abortRun: () => {},
    /** Effect: run cleanup for `context.execution`, then send `cleanup.done`. */
    startCleanup: () => {},
    begin: assign(({ context, event }) => {
      assertEvent(event, "wake");
      return { execution: context.execution + 1, scope: event.scope, pendingWake: null };
    }),
    ringDoorbell: assign(({ context, event }) => {
      assertEvent(event, "wake");
      const scope = mergeScope(context.pendingWake?.scope ?? null, event.scope) ?? event.scope;
      const seq = Math.max(context.pendingWake?.seq ?? -1, event.seq);
      return { pendingWake: { scope, seq } };
    }),
    recordInterrupt: assign(({ context, event }) => {
      assertEvent(event, "interrupt");
      const keep = context.pendingWake !== null && context.pendingWake.seq > event.seq;
      return {
        interruptedAt: Math.max(context.interruptedAt, event.seq),
        pendingWake: keep ? context.pendingWake : null,
      };
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
    handOver: assign(({ context, event }) => {
      assertEvent(event, "cleanup.done");
      return {
        execution: context.execution + 1,
        scope: mergeScope(context.pendingWake?.scope ?? null, event.work),
        pendingWake: null,
      };
    }),
  },
}).createMachine({
  id: "coordinator",
  initial: "idle",
  context: {
    execution: 0,
    scope: null,
    pendingWake: null,
    interruptedAt: -1,
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
      entry: "startRun",
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
      entry: "startCleanup",
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
