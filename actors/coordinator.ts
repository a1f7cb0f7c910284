import { createActor, type InspectionEvent, type SnapshotFrom } from "xstate";
import {
  type CoordinatorMachine,
  type CoordinatorStateValue,
  coordinatorMachine,
  type PendingWake,
  type RunOutcome,
  type WakeScope,
} from "../machines/coordinator.machine.ts";

/** A read-only view of the coordinator, for callers and the inspector. */
export interface CoordinatorState {
  value: CoordinatorStateValue;
  /** Id of the current (or last) execution; 0 before the first. */
  execution: number;
  /** The scope the current execution was started for. */
  scope: WakeScope | null;
  pendingWake: PendingWake | null;
  lastOutcome: RunOutcome | null;
  lastError: string | null;
}

export interface CoordinatorOptions {
  /**
   * One execution: drain the session's work for `scope`, then resolve.
   * Contract: should not throw or reject; a throw or rejection is recorded as `run.failed` and
   * still goes through cleanup and the handover. Must settle soon after `signal` aborts.
   */
  run: (scope: WakeScope, signal: AbortSignal) => Promise<void>;
  /**
   * Runs after every execution, before the handover; may await.
   * Contract: should not reject; a rejection is recorded as `lastError` and the handover still
   * happens.
   */
  cleanup?: () => Promise<void>;
  /**
   * Re-checks queued work at the handover, synchronously (e.g. "is the inbox non-empty?").
   * A non-null result starts a successor even if no wake rang the doorbell, so a run that failed
   * before draining never strands its inputs. Contract: synchronous, must not throw.
   */
  pending?: () => WakeScope | null;
  /** Called after every state change. Contract: must not throw; must not await. */
  onStateChange?: (state: CoordinatorState) => void;
  /** Passed to `createActor(machine, { inspect })`. Contract: must return quickly, must not throw. */
  inspect?: (event: InspectionEvent) => void;
  /** The statechart to host; a variant of `coordinatorMachine` (tests use broken mutants). */
  machine?: CoordinatorMachine;
}

export interface Coordinator {
  /** Starts a runner, or rings the doorbell of the active one. Returns the wake's seq. */
  wake(scope: WakeScope): number;
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
  const { execution, scope, pendingWake, lastOutcome, lastError } = snapshot.context;
  const value = snapshot.value as CoordinatorStateValue;
  return { value, execution, scope, pendingWake, lastOutcome, lastError };
}

/** The effects one coordinator host performs, found through its actor's system. */
interface HostEffects {
  startRun(execution: number, scope: WakeScope): void;
  abortRun(): void;
  startCleanup(execution: number): void;
}
const hosts = new WeakMap<object, HostEffects>();
const providedMachines = new WeakMap<CoordinatorMachine, CoordinatorMachine>();

/** The machine with its effects bound, built once per variant: building one per session costs more than the session. */
function provided(variant: CoordinatorMachine): CoordinatorMachine {
  let machine = providedMachines.get(variant);
  if (!machine) {
    machine = variant.provide({
      actions: {
        startRun: ({ context, system }) =>
          hosts.get(system)!.startRun(context.execution, context.scope ?? "input"),
        abortRun: ({ system }) => hosts.get(system)!.abortRun(),
        startCleanup: ({ context, system }) => hosts.get(system)!.startCleanup(context.execution),
      },
    }) as CoordinatorMachine;
    providedMachines.set(variant, machine);
  }
  return machine;
}

/**
 * Hosts the coordinator statechart for one session key: runs `run` for each execution, aborts
 * it on interrupt, runs `cleanup` after it, and lets the machine decide the handover.
 *
 * The handover is synchronous: when cleanup settles, `pending()` is read and `cleanup.done` is
 * sent in the same tick, and the machine starts the successor (calling `run` synchronously) or
 * goes idle in one transition. A wake can therefore never land between "checked the doorbell"
 * and "became idle" (DESIGN §3.4, invariant §10.6).
 */
export function createCoordinator(options: CoordinatorOptions): Coordinator {
  const { run, cleanup, pending, onStateChange } = options;
  let seq = 0;
  let controller: AbortController | null = null;
  let stopped = false;
  let settleWaiters: Waiter[] = [];
  let idleWaiters: Waiter[] = [];

  const launchRun = (execution: number, scope: WakeScope) => {
    const ac = new AbortController();
    controller = ac;
    let promise: Promise<void>;
    try {
      promise = Promise.resolve(run(scope, ac.signal));
    } catch (error) {
      promise = Promise.reject(error);
    }
    promise.then(
      () => actor.send({ type: "run.done", execution }),
      (error: unknown) => actor.send({ type: "run.failed", execution, error: describe(error) }),
    );
  };

  const launchCleanup = (execution: number) => {
    controller = null;
    const finish = (error?: string) =>
      actor.send({ type: "cleanup.done", execution, work: pending?.() ?? null, error });
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
  };

  const actor = createActor(provided(options.machine ?? coordinatorMachine), {
    inspect: options.inspect,
  });
  hosts.set(actor.system, {
    startRun: (execution, scope) => launchRun(execution, scope),
    abortRun: () => controller?.abort(new RunInterruptedError()),
    startCleanup: (execution) => launchCleanup(execution),
  });

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
    wake(scope) {
      seq += 1;
      actor.send({ type: "wake", scope, seq });
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
