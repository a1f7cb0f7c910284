/** The scheduling traits of one call of a batch. */
export interface BatchCallSpec {
  callId: string;
  name: string;
  /** Safe to run beside other calls. Missing traits must already be read as `false`. */
  concurrencySafe: boolean;
  cancellable: boolean;
  /** "sequential" on any call makes the whole batch run one at a time in call order. */
  executionMode: "parallel" | "sequential";
  /** Calls with the same key never overlap and start in call order. */
  resourceKey?: string;
}

/** Where a call is, as the scheduler sees it. */
export type CallPhase = "pending" | "running" | "settled";

/** What the scheduler reads: the calls and their phases. */
export interface ScheduleState {
  calls: readonly BatchCallSpec[];
  phases: readonly CallPhase[];
  maxParallel: number;
  /** True once any call is `executionMode: "sequential"` (precomputed by the batch). */
  sequential: boolean;
}

/** One scheduling decision: the call indexes to start now, in call order. */
export interface SchedulePlan {
  start: number[];
}

/** A scheduling policy: pure, deterministic, never mutates its argument. */
export type Scheduler = (state: ScheduleState) => SchedulePlan;

/**
 * Decides which pending calls start now. This is a pure function.
 *
 * Rules (invariant 5 of docs/architecture.md):
 * - a sequential batch runs one call at a time, in call order;
 * - never more than `maxParallel` running;
 * - an unsafe call starts only when nothing runs and every earlier call has settled, and
 *   nothing starts while it runs or while it waits (no later call overtakes it);
 * - a call never starts while an earlier unsettled call has its resource key;
 * - otherwise calls start in call order, as many as the rules allow.
 */
export const scheduleBatch: Scheduler = ({ calls, phases, maxParallel, sequential }) => {
  const phase = [...phases];
  const plan: SchedulePlan = { start: [] };
  let running = 0;
  let unsafeRunning = false;
  for (let i = 0; i < calls.length; i++) {
    if (phase[i] === "running") {
      running++;
      if (!calls[i].concurrencySafe) unsafeRunning = true;
    }
  }
  const busyKeys = new Set<string>();
  for (let i = 0; i < calls.length; i++) {
    const call = calls[i];
    if (phase[i] === "pending") {
      const keyFree = call.resourceKey === undefined || !busyKeys.has(call.resourceKey);
      // An unsafe call needs nothing running. That also means every earlier call has settled:
      // the first earlier unsettled call is running, or was started in this pass, or is a
      // pending barrier (the loop stopped there), or a safe call that could not start because
      // something runs (maxParallel ≥ 1). `test/batch.unit.test.ts` checks this against the
      // rules over any phases.
      const fits = sequential || !call.concurrencySafe ? running === 0 : running < maxParallel;
      if (keyFree && fits && !unsafeRunning) {
        plan.start.push(i);
        phase[i] = "running";
        running++;
        if (!call.concurrencySafe) unsafeRunning = true;
      }
    }
    if (phase[i] !== "settled") {
      if (call.resourceKey !== undefined) busyKeys.add(call.resourceKey);
      // Barriers: nothing after a pending unsafe call, or any call of a sequential batch.
      if (phase[i] === "pending" && (sequential || !call.concurrencySafe)) break;
    }
  }
  return plan;
};

/**
 * Problems with a batch's calls, as sentences; empty when the batch is valid.
 * Checks: at least one call, unique ids, `maxParallel` a positive integer.
 */
export function checkBatchCalls(calls: readonly BatchCallSpec[], maxParallel: number): string[] {
  const problems: string[] = [];
  if (calls.length === 0) problems.push("a batch needs at least one call");
  if (!Number.isInteger(maxParallel) || maxParallel < 1) {
    problems.push(`maxParallelToolCalls must be a positive integer, got ${maxParallel}`);
  }
  const seen = new Set<string>();
  for (const call of calls) {
    if (seen.has(call.callId)) problems.push(`call id "${call.callId}" appears twice`);
    seen.add(call.callId);
  }
  return problems;
}
