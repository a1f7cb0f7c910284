/**
 * Time as an input. Structurally compatible with XState's `SimulatedClock`, so one simulated
 * clock can drive both the statecharts (`createActor(m, { clock })`) and Keel's own waits.
 */
export interface Clock {
  /** Milliseconds, monotonic. */
  now(): number;
  /** Calls `fn` after `ms` on this clock; returns a handle for `clearTimeout`. */
  // biome-ignore lint/suspicious/noExplicitAny: handles differ by clock (Node timers, SimulatedClock ids)
  setTimeout(fn: (...args: any[]) => void, ms: number): any;
  /** Cancels a pending `setTimeout`. */
  // biome-ignore lint/suspicious/noExplicitAny: the handle `setTimeout` returned
  clearTimeout(handle: any): void;
}

/** The real clock: monotonic `performance.now()` anchored at the process's time origin. */
export const systemClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle),
};

/** Resolves after `ms` on `clock`, or rejects with the signal's reason when aborted first. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clock.clearTimeout(handle);
      reject(signal?.reason);
    };
    const handle = clock.setTimeout(
      () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
