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

/**
 * The longest delay a timer honours: 2^31 − 1 ms (about 24.8 days). Node fires a longer one
 * (or `Infinity`) after 1 ms, so every duration option is checked against it (see
 * {@link checkDuration}).
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Checks a duration option at the API: a number of milliseconds in [`min`, `MAX_TIMER_MS`],
 * or `Infinity`, which means "no timer" and is returned as `Infinity` for the caller to map to
 * its own "none". Throws a `RangeError` naming the option, what it got and what it takes.
 * This is a pure function.
 */
export function checkDuration(name: string, value: number, min = 0): number {
  if (value === Number.POSITIVE_INFINITY) return value;
  if (typeof value !== "number" || !Number.isFinite(value) || value < min || value > MAX_TIMER_MS) {
    throw new RangeError(
      `${name} must be a number of milliseconds from ${min} to ${MAX_TIMER_MS} (2^31 − 1, the longest timer Node honours: a longer one fires at once), or Infinity for no timer; got ${String(value)}`,
    );
  }
  return value;
}

/**
 * Reads a duration option (the one helper every `…Ms` option goes through): `undefined` is
 * `fallback`; a number of milliseconds over 0 is kept up to `MAX_TIMER_MS`; a longer one,
 * `Infinity` included, is clamped to `MAX_TIMER_MS` (Node would fire it after 1 ms: a timeout
 * of `Infinity` would time out at once, a poll of 1e10 would poll a thousand times a second),
 * and a finite one over the cap is said through `warn` (default `process.emitWarning`).
 * Anything else (not a number, `NaN`, under `min`, which is 1 unless given) throws a `RangeError` naming the option, what it got and what
 * it takes. Contract of `warn`: must not throw.
 */
export function durationOption(
  name: string,
  value: unknown,
  fallback: number,
  options: { min?: number; warn?: (message: string) => void } = {},
): number {
  if (value === undefined) return fallback;
  const min = options.min ?? 1;
  if (typeof value !== "number" || Number.isNaN(value) || value < min) {
    throw new RangeError(
      `${name} must be a number of milliseconds from ${min} to ${MAX_TIMER_MS} (2^31 − 1, the longest timer Node honours), got ${typeof value === "string" ? JSON.stringify(value) : String(value)}`,
    );
  }
  if (value <= MAX_TIMER_MS) return value;
  if (value !== Number.POSITIVE_INFINITY) {
    (options.warn ?? ((m: string) => process.emitWarning(m, "KeelWarning")))(
      `${name} of ${value} ms is over ${MAX_TIMER_MS} ms (2^31 − 1, the longest timer Node honours: a longer one fires at once); ${MAX_TIMER_MS} ms is used`,
    );
  }
  return MAX_TIMER_MS;
}

/**
 * The real clock: monotonic `performance.now()` anchored at the process's time origin. A delay
 * over `MAX_TIMER_MS` waits that long instead of firing at once, as Node's would.
 */
export const systemClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, Math.min(ms, MAX_TIMER_MS)),
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
