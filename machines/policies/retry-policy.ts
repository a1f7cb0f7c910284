/**
 * The retry policy (docs/providers.md): turn the provider's `Retry-After` into one absolute ready time
 * and decide Retry / Continue / stop within one budget per operation. Pure: the clock reading
 * (`now`), wall time (`wallNow`) and the random draw are inputs.
 */
import { checkDuration, MAX_TIMER_MS } from "../../contracts/clock.ts";
import {
  classifyModelError,
  type ErrorCategory,
  type ErrorClassification,
  type HeaderSource,
  parseRetryAfter,
} from "./retry-classify.ts";

/**
 * The embedder's own classification of a failed model request, asked before the built-in rules
 * (`classifyModelError`): `"retry"` retries it (within the same budgets and waits as any
 * retryable error), `"fail"` ends the turn `failed`, `undefined` leaves it to the built-in rules.
 * A caller's abort is not asked about: it always cancels.
 * Contract: synchronous and pure (it may be called once per failed attempt); should not throw.
 * A throw, or any other return value, is a failed classification: the request is not retried
 * and the turn's reason says what the hook did.
 */
export type RetryClassifier = (error: unknown) => "retry" | "fail" | undefined;

/**
 * Retry options. Defaults (DEFAULT_RETRY_POLICY): maxRetries 2 (≤ 3 requests), maxTimeoutRetries
 * 1, baseDelayMs 1 000, maxDelayMs 30 000, jitter 0.1 (factor U(0.9, 1.1)), maxRetryAfterMs
 * 900 000 (15 min), no operation deadline.
 */
export interface RetryPolicy {
  /** Extra requests per operation, Retry and Continue together: `2` means at most 3 requests. */
  maxRetries: number;
  /** Of those, how many may follow a timeout (a timeout already spent the whole wait). */
  maxTimeoutRetries: number;
  /** First local backoff; the k-th retry waits base·2^(k−1)·jitter, capped at maxDelayMs. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** Relative jitter: the backoff is multiplied by U(1 − jitter, 1 + jitter). */
  jitter: number;
  /** Cap on a provider's Retry-After. */
  maxRetryAfterMs: number;
  /** The whole operation (all requests and waits) must end within this many ms of its start. */
  operationDeadlineMs?: number;
  /** Asked before the built-in rules whether a failed request is retried (see {@link RetryClassifier}). */
  classify?: RetryClassifier;
}

export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  maxRetries: 2,
  maxTimeoutRetries: 1,
  baseDelayMs: 1000,
  maxDelayMs: 30_000,
  jitter: 0.1,
  maxRetryAfterMs: 900_000,
});

/**
 * Fills defaults and validates; throws a RangeError naming the bad option (a boundary). Every
 * duration is at most 2^31 − 1 ms (the longest timer; a longer one fires at once): an
 * `operationDeadlineMs` of `Infinity` means none, a delay cap of `Infinity` the longest wait.
 */
export function resolveRetryPolicy(options: Partial<RetryPolicy> = {}): RetryPolicy {
  const p: RetryPolicy = { ...DEFAULT_RETRY_POLICY, ...options };
  const check = (name: keyof RetryPolicy, ok: boolean, want: string) => {
    if (!ok) throw new RangeError(`retry policy: ${name} must be ${want}, got ${String(p[name])}`);
  };
  const count = (v: number) => Number.isInteger(v) && v >= 0;
  check("maxRetries", count(p.maxRetries), "an integer ≥ 0");
  check("maxTimeoutRetries", count(p.maxTimeoutRetries), "an integer ≥ 0");
  check("baseDelayMs", Number.isFinite(p.baseDelayMs) && p.baseDelayMs >= 0, "a finite number ≥ 0");
  check("maxDelayMs", p.maxDelayMs >= p.baseDelayMs, "≥ baseDelayMs");
  check("jitter", p.jitter >= 0 && p.jitter < 1, "in [0, 1)");
  check("maxRetryAfterMs", p.maxRetryAfterMs >= 0, "≥ 0");
  const d = p.operationDeadlineMs;
  check("operationDeadlineMs", d === undefined || d > 0, "> 0 or undefined");
  if (p.classify !== undefined && typeof p.classify !== "function") {
    throw new TypeError(
      `retry policy: classify must be a function (error) => "retry" | "fail" | undefined, got ${typeof p.classify}`,
    );
  }
  const duration = (name: "baseDelayMs" | "maxDelayMs" | "maxRetryAfterMs") => {
    if (options[name] === undefined) return;
    p[name] = Math.min(checkDuration(`retry policy: ${name}`, p[name]), MAX_TIMER_MS);
  };
  duration("baseDelayMs");
  duration("maxDelayMs");
  duration("maxRetryAfterMs");
  if (p.operationDeadlineMs !== undefined) {
    const ms = checkDuration("retry policy: operationDeadlineMs", p.operationDeadlineMs, 1);
    if (ms === Number.POSITIVE_INFINITY) delete p.operationDeadlineMs;
  }
  return p;
}

/** One operation's retry bookkeeping. Immutable; each decision returns the next state. */
export interface RetryState {
  readonly policy: RetryPolicy;
  readonly startedAt: number;
  /** Absolute clock ms by which the whole operation must end; undefined = no deadline. */
  readonly deadline?: number;
  /** Extra requests granted so far (Retry and Continue share this count). */
  readonly retries: number;
  readonly timeoutRetries: number;
  /** When the next request may start: fixed once per decision, never moved by later layers. */
  readonly readyAt?: number;
  readonly waitSource?: "retry-after" | "backoff";
}

/** A fresh state for an operation starting at `startedAt` (clock ms). */
export function initialRetryState(policy: Partial<RetryPolicy> = {}, startedAt = 0): RetryState {
  const p = resolveRetryPolicy(policy);
  const deadline =
    p.operationDeadlineMs === undefined ? undefined : startedAt + p.operationDeadlineMs;
  return { policy: p, startedAt, deadline, retries: 0, timeoutRetries: 0 };
}

export interface RetryInput {
  error: unknown;
  /** Injected clock ms (monotonic), the same clock the waits run on. */
  now: number;
  /** Wall-clock epoch ms, used only to convert an HTTP-date Retry-After. Default: `now`. */
  wallNow?: number;
  /** Contract: returns a number in [0, 1); called at most once, only for a local backoff. */
  random: () => number;
  /** Whether the failed attempt had started output (text or tool input): Continue, else Retry. */
  hasOutput: boolean;
  /**
   * The shared budget's answer (`RetryBudget.tryAcquire`). Contract (function form): called at
   * most once, and only when everything else allows a retry, so no token is spent on a stop.
   */
  budgetAllows?: boolean | (() => boolean);
}

export type StopReason =
  | "not_retryable"
  | "cancelled"
  | "max_retries"
  | "max_timeout_retries"
  | "deadline"
  | "shared_budget";

export type RetryDecision =
  | {
      action: "retry" | "continue";
      /** 1-based number of this extra request. */
      retry: number;
      delayMs: number;
      readyAt: number;
      waitSource: "retry-after" | "backoff";
      state: RetryState;
      category: ErrorCategory;
      reason: string;
    }
  | {
      action: "stop";
      status: "failed" | "budget_exhausted" | "cancelled";
      stoppedBy: StopReason;
      reason: string;
      category: ErrorCategory;
    };

/**
 * Decides what follows a failed attempt. Not retryable → `failed`; caller abort → `cancelled`;
 * retries (or timeout retries) used up → `failed`; ready time at or past the operation
 * deadline, or the shared budget says no → `budget_exhausted` (no sleep). Otherwise the ready
 * time is a valid Retry-After (converted once, here) or now + min(cap, base·2^(k−1)·U), and the
 * action is `continue` when output had started, else `retry`. This is a pure function.
 */
export function decideRetry(state: RetryState, input: RetryInput): RetryDecision {
  const { policy: p } = state;
  const c = classify(p.classify, input.error);
  const stop = (
    status: "failed" | "budget_exhausted" | "cancelled",
    stoppedBy: StopReason,
    why?: string,
  ): RetryDecision => ({
    action: "stop",
    status,
    stoppedBy,
    category: c.category,
    reason: why ? `${why}; last error: ${c.reason}` : c.reason,
  });
  if (c.category === "aborted") return stop("cancelled", "cancelled");
  if (!c.retryable) return stop("failed", "not_retryable");
  const requests = state.retries + 1;
  if (state.retries >= p.maxRetries)
    return stop(
      "failed",
      "max_retries",
      `gave up after ${requests} request(s) (maxRetries ${p.maxRetries})`,
    );
  const isTimeout = c.category === "timeout";
  if (isTimeout && state.timeoutRetries >= p.maxTimeoutRetries)
    return stop(
      "failed",
      "max_timeout_retries",
      `gave up after ${state.timeoutRetries + 1} timeout(s) (maxTimeoutRetries ${p.maxTimeoutRetries})`,
    );
  const k = state.retries + 1;
  const headers = (input.error as { headers?: HeaderSource } | null)?.headers;
  const after = parseRetryAfter(headers, input.wallNow ?? input.now, p.maxRetryAfterMs);
  let delayMs: number;
  if (after.kind === "delay") delayMs = after.ms;
  else {
    const r = Math.min(1, Math.max(0, input.random()));
    const factor = 1 - p.jitter + 2 * p.jitter * r;
    delayMs = Math.round(Math.min(p.maxDelayMs, p.baseDelayMs * 2 ** (k - 1) * factor));
  }
  const readyAt = input.now + delayMs;
  const waitSource = after.kind === "delay" ? "retry-after" : "backoff";
  if (state.deadline !== undefined && readyAt >= state.deadline)
    return stop(
      "budget_exhausted",
      "deadline",
      `the next request could start only in ${delayMs} ms (${waitSource === "retry-after" ? "provider's Retry-After" : "local backoff"}) but ${Math.max(0, state.deadline - input.now)} ms remain before the operation deadline (operationDeadlineMs ${p.operationDeadlineMs}); raise operationDeadlineMs or try later`,
    );
  const allowed =
    typeof input.budgetAllows === "function" ? input.budgetAllows() : input.budgetAllows;
  if (allowed === false)
    return stop(
      "budget_exhausted",
      "shared_budget",
      "the shared retry budget for this provider is exhausted (many requests are failing at once)",
    );
  const action = input.hasOutput ? "continue" : "retry";
  return {
    action,
    retry: k,
    delayMs,
    readyAt,
    waitSource,
    category: c.category,
    reason: `${c.reason}; ${action} ${k}/${p.maxRetries} in ${delayMs} ms (${waitSource === "retry-after" ? "provider's Retry-After" : "local backoff"})`,
    state: {
      ...state,
      retries: k,
      timeoutRetries: state.timeoutRetries + (isTimeout ? 1 : 0),
      readyAt,
      waitSource,
    },
  };
}

/**
 * The classification of `error`: the built-in one, overridden by the embedder's `hook` when it
 * answers "retry" or "fail". A caller's abort is never passed to the hook. A hook that throws or
 * returns anything else fails the request (not retried) with a reason naming what it did, so a
 * bug in the hook ends the turn with an explanation instead of a crash.
 * This is a pure function when `hook` is.
 */
export function classify(hook: RetryClassifier | undefined, error: unknown): ErrorClassification {
  const builtIn = classifyModelError(error);
  if (hook === undefined || builtIn.category === "aborted") return builtIn;
  let verdict: unknown;
  try {
    verdict = hook(error);
  } catch (err) {
    const why = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    return {
      ...builtIn,
      retryable: false,
      reason: `the retry.classify hook threw (${why}), so the request was not retried; fix the hook (it must return "retry", "fail" or undefined without throwing). The request failed with: ${builtIn.reason}`,
    };
  }
  if (verdict === undefined) return builtIn;
  if (verdict === "retry") {
    return {
      ...builtIn,
      retryable: true,
      reason: `retry.classify said "retry": ${builtIn.reason}`,
    };
  }
  if (verdict === "fail") {
    return {
      ...builtIn,
      retryable: false,
      reason: `retry.classify said "fail" (not retried): ${builtIn.reason}`,
    };
  }
  return {
    ...builtIn,
    retryable: false,
    reason: `the retry.classify hook returned ${JSON.stringify(verdict) ?? String(verdict)}, which is not "retry", "fail" or undefined, so the request was not retried; fix the hook. The request failed with: ${builtIn.reason}`,
  };
}

/**
 * What is left of the current wait at `now`: every layer sleeps only this, so a Retry-After is
 * waited once. The turn arms its retry timer with it (`actors/turn-runner.ts`), read when the
 * timer is armed, not when the decision was made. 0 when no wait is pending or it is already
 * due. This is a pure function.
 */
export function remainingWait(state: RetryState, now: number): number {
  return state.readyAt === undefined ? 0 : Math.max(0, state.readyAt - now);
}
