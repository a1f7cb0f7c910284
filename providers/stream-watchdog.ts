import type { Clock } from "../contracts/clock.ts";
import type { ModelErrorKind } from "../contracts/model.ts";

/** Which timer fired, and after how long. */
export interface TimedOut {
  kind: ModelErrorKind;
  ms: number;
}

/**
 * The timers and abort wiring every streaming adapter needs: `controller` aborts the request
 * when the caller's `signal` aborts (after `attach()`) or when an armed timer fires
 * (`first_chunk_timeout`, then `idle_timeout` between chunks; `Infinity` arms nothing).
 * `timedOut` says which fired. Call `release()` in the adapter's `finally`.
 */
export function streamWatchdog(clock: Clock, signal: AbortSignal) {
  const controller = new AbortController();
  let timer: unknown;
  const onAbort = () => controller.abort(signal.reason);
  const dog = {
    controller,
    timedOut: undefined as TimedOut | undefined,
    disarm() {
      if (timer !== undefined) clock.clearTimeout(timer);
      timer = undefined;
    },
    arm(kind: "first_chunk_timeout" | "idle_timeout", ms: number) {
      dog.disarm();
      if (ms === Number.POSITIVE_INFINITY) return;
      timer = clock.setTimeout(() => {
        dog.timedOut = { kind, ms };
        controller.abort(new Error(`${kind} after ${ms} ms`));
      }, ms);
    },
    attach() {
      signal.addEventListener("abort", onAbort, { once: true });
    },
    release() {
      dog.disarm();
      signal.removeEventListener("abort", onAbort);
    },
  };
  return dog;
}
