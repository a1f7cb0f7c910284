import { type AnyActorRef, createActor, type InspectionEvent, type SnapshotFrom } from "xstate";
import type {
  CoordinatorEffects,
  CoordinatorMachine,
  CoordinatorStateValue,
  PendingWake,
  RunOutcome,
} from "../machines/coordinator.machine.ts";
import { bindEffects, hostedCoordinatorMachine } from "./charts.ts";

/** A read-only view of the coordinator, for callers and the inspector. */
export interface CoordinatorState {
  value: CoordinatorStateValue;
  /** Id of the current (or last) execution; 0 before the first. */
  execution: number;
  pendingWake: PendingWake | null;
  lastOutcome: RunOutcome | null;
  lastError: string | null;
}

export interface CoordinatorOptions {
  /**
   * One execution: drain the session's work, then resolve.
   * Contract: should not throw or reject; a throw or rejection is recorded as `run.failed` and
   * still goes through cleanup and the handover. Must settle soon after `signal` aborts.
   */
  run: (signal: AbortSignal) => Promise<void>;
  /**
   * Runs after every execution, before the handover; may await.
   * Contract: should not reject; a rejection is recorded as `lastError` and the handover still
   * happens.
   */
  cleanup?: () => Promise<void>;
  /**
   * Re-checks queued work at the handover, synchronously (e.g. "is the inbox non-empty?").
   * `true` starts a successor even if no wake rang the doorbell, so a run that failed before
   * draining never strands its inputs. Contract: synchronous, must not throw.
   */
  pending?: () => boolean;
  /** Called after every state change. Contract: must not throw; must not await. */
  onStateChange?: (state: CoordinatorState) => void;
  /** Passed to `createActor(machine, { inspect })`. Contract: must return quickly, must not throw. */
  inspect?: (event: InspectionEvent) => void;
  /** The statechart to host; a variant of `coordinatorMachine` (tests use broken mutants). */
  machine?: CoordinatorMachine;
}

export interface Coordinator {
  /** Starts a runner, or rings the doorbell of the active one. Returns the wake's seq. */
  wake(): number;
  /**
   * Aborts the current run (if any) and clears the wakes submitted before this call; a wake
   * submitted after it is kept. Acknowledged synchronously. Returns the interrupt's seq.
   */
  interrupt(): number;
  /** Resolves when the CURRENT execution (run + cleanup) has finished; at once when idle. */
  awaitSettlement(): Promise<void>;
  /** Resolves when the coordinator is idle with nothing pending, successors included. */
  awaitIdle(): Promise<void>;
  state(): CoordinatorState;
  /** Aborts the current run and stops the coordinator; pending awaits reject. */
  stop(): void;
}

/** Rejection of `awaitSettlement`/`awaitIdle` when the coordinator was stopped first. */
export class CoordinatorStoppedError extends Error {
  override readonly name = "CoordinatorStoppedError";
  constructor() {
    super("coordinator stopped before the awaited state was reached");
  }
}

/** The reason passed to `AbortController.abort` on interrupt. */
export class RunInterruptedError extends Error {
  override readonly name = "RunInterruptedError";
  constructor() {
    super("run interrupted");
  }
}

interface Waiter {
  /** For settlement: the execution being awaited; for idle: -1. */
  execution: number;
  resolve: () => void;
  reject: (error: Error) => void;
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

function view(snapshot: SnapshotFrom<CoordinatorMachine>): CoordinatorState {
  const { execution, pendingWake, lastOutcome, lastError } = snapshot.context;
  const value = snapshot.value as CoordinatorStateValue;
  return { value, execution, pendingWake, lastOutcome, lastError };
}

/**
 * Hosts the coordinator statechart for one session key: runs `run` for each execution, aborts
 * it on interrupt, runs `cleanup` after it, and lets the machine decide the handover.
 *
 * The handover is synchronous: when cleanup settles, `pending()` is read and `cleanup.done` is
 * sent in the same tick, and the machine starts the successor (calling `run` synchronously) or
 * goes idle in one transition. A wake can therefore never land between "checked the doorbell"
 * and "became idle" (invariant 6 of docs/architecture.md).
 */
export function createCoordinator(options: CoordinatorOptions): Coordinator {
  const { run, cleanup, pending, onStateChange } = options;
  let seq = 0;
  let controller: AbortController | null = null;
  let stopped = false;
  let settleWaiters: Waiter[] = [];
  let idleWaiters: Waiter[] = [];

  const effects: CoordinatorEffects = {
    startRun(self: AnyActorRef, { execution }) {
      const ac = new AbortController();
      controller = ac;
      let promise: Promise<void>;
      try {
        promise = Promise.resolve(run(ac.signal));
      } catch (error) {
        promise = Promise.reject(error);
      }
      promise.then(
        () => self.send({ type: "run.done", execution }),
        (error: unknown) => self.send({ type: "run.failed", execution, error: describe(error) }),
      );
    },
    abortRun() {
      controller?.abort(new RunInterruptedError());
    },
    startCleanup(self: AnyActorRef, { execution }) {
      controller = null;
      const finish = (error?: string) =>
        self.send({ type: "cleanup.done", execution, work: pending?.() ?? false, error });
      if (!cleanup) {
        finish();
        return;
      }
      let promise: Promise<void>;
      try {
        promise = Promise.resolve(cleanup());
      } catch (error) {
        promise = Promise.reject(error);
      }
      promise.then(
        () => finish(),
        (error: unknown) => finish(describe(error)),
      );
    },
  };

  const actor = createActor(hostedCoordinatorMachine(options.machine), {
    inspect: options.inspect,
  });
  bindEffects(actor.system, effects);

  actor.subscribe((snapshot) => {
    const state = view(snapshot);
    onStateChange?.(state);
    const idle = state.value === "idle";
    const settled = settleWaiters.filter((w) => idle || state.execution > w.execution);
    if (settled.length > 0) settleWaiters = settleWaiters.filter((w) => !settled.includes(w));
    const ready = idle ? idleWaiters : [];
    if (idle) idleWaiters = [];
    for (const w of [...settled, ...ready]) w.resolve();
  });
  actor.start();

  const wait = (execution: number, into: "settle" | "idle"): Promise<void> => {
    if (stopped) return Promise.reject(new CoordinatorStoppedError());
    const current = view(actor.getSnapshot());
    if (current.value === "idle") return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const waiter = { execution, resolve, reject };
      if (into === "settle") settleWaiters.push(waiter);
      else idleWaiters.push(waiter);
    });
  };

  return {
    wake() {
      seq += 1;
      actor.send({ type: "wake", seq });
      return seq;
    },
    interrupt() {
      seq += 1;
      actor.send({ type: "interrupt", seq });
      return seq;
    },
    awaitSettlement: () => wait(actor.getSnapshot().context.execution, "settle"),
    awaitIdle: () => wait(-1, "idle"),
    state: () => view(actor.getSnapshot()),
    stop() {
      if (stopped) return;
      stopped = true;
      controller?.abort(new RunInterruptedError());
      actor.stop();
      for (const w of [...settleWaiters, ...idleWaiters]) w.reject(new CoordinatorStoppedError());
      settleWaiters = [];
      idleWaiters = [];
    },
  };
}
