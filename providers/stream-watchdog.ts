import type { Clock } from "../contracts/clock.ts";
import type { ModelErrorKind, ModelEvent } from "../contracts/model.ts";

/**
 * Whether an event carries content: text, reasoning or argument text, a call's start or end,
 * usage or the finish. Only such events re-arm the idle timer; a stream of empty chunks
 * (keep-alives, empty deltas, metadata) does not keep a request alive. This is a pure function.
 */
export function hasContent(event: ModelEvent): boolean {
  switch (event.type) {
    case "text.delta":
    case "reasoning.delta":
      return event.text !== "";
    case "call.delta":
      return event.argumentsDelta !== "";
    default:
      return true;
  }
}

/** Which timer fired, and after how long. */
export interface TimedOut {
  kind: ModelErrorKind;
  ms: number;
}

/**
 * The timers and abort wiring every streaming adapter needs: `controller` aborts the request
 * when the caller's `signal` aborts (after `attach()`) or when an armed timer fires
 * (`first_chunk_timeout`, then `idle_timeout` between chunks that carry content — see
 * {@link hasContent} — and `request_timeout`, the whole request's bound, armed once with
 * `deadline()`; `Infinity` arms nothing). `timedOut` says which fired. Call `release()` in the
 * adapter's `finally`.
 */
export function streamWatchdog(clock: Clock, signal: AbortSignal) {
  const controller = new AbortController();
  let timer: unknown;
  let whole: unknown;
  /** The request's bound: ms of waiting for the provider left (see `deadline`). */
  let budget = Number.POSITIVE_INFINITY;
  let bound = Number.POSITIVE_INFINITY;
  let waitingSince: number | undefined;
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
    /**
     * Sets the bound on the whole request: `ms` of waiting for the provider in all (chunks do
     * not re-arm it; time the consumer holds the stream does not count, as for the idle timer).
     * Runs from here until the first `pause()`.
     */
    deadline(ms: number) {
      budget = bound = ms;
      dog.resume();
    },
    /** The adapter waits for the provider again: the request's bound runs. */
    resume() {
      if (budget === Number.POSITIVE_INFINITY || waitingSince !== undefined) return;
      waitingSince = clock.now();
      whole = clock.setTimeout(
        () => {
          dog.timedOut = { kind: "request_timeout", ms: bound };
          controller.abort(new Error(`request_timeout after ${bound} ms`));
        },
        Math.max(0, budget),
      );
    },
    /** The consumer holds the stream: the request's bound stops. */
    pause() {
      if (waitingSince === undefined) return;
      budget -= clock.now() - waitingSince;
      waitingSince = undefined;
      if (whole !== undefined) clock.clearTimeout(whole);
      whole = undefined;
    },
    attach() {
      signal.addEventListener("abort", onAbort, { once: true });
    },
    release() {
      dog.disarm();
      dog.pause();
      signal.removeEventListener("abort", onAbort);
    },
  };
  return dog;
}
