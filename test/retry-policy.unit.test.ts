import { describe, expect, it, vi } from "vitest";
import { ModelError } from "../contracts/model.ts";
import {
  classifyModelError,
  type ErrorCategory,
  parseRetryAfter,
} from "../machines/policies/retry-classify.ts";
import {
  DEFAULT_RETRY_POLICY,
  decideRetry,
  initialRetryState,
  type RetryDecision,
  remainingWait,
  resolveRetryPolicy,
} from "../machines/policies/retry-policy.ts";

const http = (
  status: number,
  message: string,
  extra: { code?: string; type?: string; headers?: Record<string, string> } = {},
) =>
  new ModelError(`${status} ${message}`, {
    kind: "http",
    status,
    headers: extra.headers,
    code: extra.code,
    type: extra.type,
    body: { message, code: extra.code ?? null, type: extra.type ?? null },
  });

/** Real provider payloads (or their shape) → the category they must get. */
const SAMPLES: [string, unknown, ErrorCategory][] = [
  [
    "OpenAI context_length_exceeded 400",
    http(
      400,
      "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens.",
      { code: "context_length_exceeded", type: "invalid_request_error" },
    ),
    "context_overflow",
  ],
  [
    "Anthropic prompt is too long",
    http(400, "prompt is too long: 213462 tokens > 200000 maximum", {
      type: "invalid_request_error",
    }),
    "context_overflow",
  ],
  [
    "overflow reported with 429",
    http(429, "Request too large: too many tokens in the prompt"),
    "context_overflow",
  ],
  [
    "llama.cpp overflow as 500",
    http(500, "the request exceeds the available context size, try increasing it"),
    "context_overflow",
  ],
  [
    "Gemini input token count",
    http(
      400,
      "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
    ),
    "context_overflow",
  ],
  [
    "OpenAI Responses exceeds the context window",
    { message: "Your input exceeds the context window of this model." },
    "context_overflow",
  ],
  [
    "413 without body",
    new ModelError("413 status code (no body)", { kind: "http", status: 413 }),
    "context_overflow",
  ],
  [
    "OpenAI insufficient_quota 429",
    http(429, "You exceeded your current quota, please check your plan and billing details.", {
      code: "insufficient_quota",
      type: "insufficient_quota",
    }),
    "quota",
  ],
  [
    "Anthropic credit balance 400",
    http(400, "Your credit balance is too low to access the Anthropic API."),
    "quota",
  ],
  ["402 payment required", http(402, "Payment Required"), "quota"],
  [
    "billing_hard_limit_reached code",
    http(400, "Billing hard limit has been reached", { code: "billing_hard_limit_reached" }),
    "quota",
  ],
  [
    "401 invalid_api_key",
    http(401, "Incorrect API key provided: sk-...", { code: "invalid_api_key" }),
    "auth",
  ],
  [
    "403 permission",
    http(403, "You are not allowed to sample from this model", { type: "permission_error" }),
    "auth",
  ],
  [
    "400 invalid schema",
    http(400, "Invalid schema for function 'read': missing type", {
      type: "invalid_request_error",
    }),
    "bad_request",
  ],
  [
    "404 model not found",
    http(404, "The model `gpt-9` does not exist", { code: "model_not_found" }),
    "bad_request",
  ],
  ["422 unprocessable", http(422, "Unprocessable Entity"), "bad_request"],
  [
    "429 rate_limit_exceeded",
    http(429, "Rate limit reached for gpt-4o on requests per min (RPM)", {
      code: "rate_limit_exceeded",
    }),
    "rate_limit",
  ],
  [
    "429 with no body",
    new ModelError("429 status code (no body)", { kind: "http", status: 429 }),
    "rate_limit",
  ],
  [
    "Anthropic 529 overloaded_error",
    http(529, "Overloaded", { type: "overloaded_error" }),
    "overloaded",
  ],
  ["503", http(503, "The server is overloaded or not ready yet."), "overloaded"],
  [
    "in-stream overloaded_error, no status",
    new ModelError("Overloaded", { kind: "http", type: "overloaded_error" }),
    "overloaded",
  ],
  ["500", http(500, "The server had an error while processing your request."), "server"],
  ["502", http(502, "Bad gateway"), "server"],
  ["409 lock conflict", http(409, "Conflict"), "server"],
  ["unparsable chunk", new ModelError("unparsable stream chunk", { kind: "protocol" }), "server"],
  ["408", http(408, "Request Timeout"), "timeout"],
  [
    "first-chunk timeout",
    new ModelError("no first chunk within 60000 ms", { kind: "first_chunk_timeout" }),
    "timeout",
  ],
  ["idle timeout", new ModelError("no chunk within 60000 ms", { kind: "idle_timeout" }), "timeout"],
  ["plain 'Request timed out.'", new Error("Request timed out."), "timeout"],
  [
    "adapter network error",
    new ModelError("Connection error. (fetch failed: ECONNREFUSED)", { kind: "network" }),
    "network",
  ],
  [
    "stream cut",
    new ModelError("the stream was cut: terminated", { kind: "stream_cut" }),
    "network",
  ],
  [
    "raw ECONNRESET",
    Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" }),
    "network",
  ],
  ["raw ECONNREFUSED", new Error("connect ECONNREFUSED 127.0.0.1:1"), "network"],
  ["socket hang up", new Error("socket hang up"), "network"],
  ["undici fetch failed", new TypeError("fetch failed"), "network"],
  ["caller abort", new ModelError("aborted", { kind: "aborted" }), "aborted"],
  ["DOM AbortError", new DOMException("This operation was aborted", "AbortError"), "aborted"],
  ["unknown error", new Error("something odd"), "unknown"],
  ["a thrown string", "boom", "unknown"],
  ["undefined", undefined, "unknown"],
];

const RETRYABLE = new Set<ErrorCategory>([
  "rate_limit",
  "overloaded",
  "server",
  "network",
  "timeout",
]);

describe("classifyModelError", () => {
  for (const [label, error, category] of SAMPLES) {
    it(`${label} → ${category} (${RETRYABLE.has(category) ? "retried" : "not retried"})`, () => {
      const c = classifyModelError(error);
      expect(c.category).toBe(category);
      expect(c.retryable).toBe(RETRYABLE.has(category));
      expect(c.reason.length).toBeGreaterThan(20);
    });
  }

  it("context overflow and quota are never retried even with status 429 or 5xx", () => {
    for (const status of [429, 500, 503, 529]) {
      expect(
        classifyModelError(http(status, "maximum context length is 8192 tokens")).retryable,
      ).toBe(false);
      expect(classifyModelError(http(status, "x", { code: "insufficient_quota" })).retryable).toBe(
        false,
      );
    }
  });

  it("the reason says what to do and carries the status and the provider's message", () => {
    const { reason } = classifyModelError(
      http(429, "You exceeded your current quota", { code: "insufficient_quota" }),
    );
    expect(reason).toMatch(/billing/);
    expect(reason).toMatch(/HTTP 429/);
    expect(reason).toMatch(/You exceeded your current quota/);
  });
});

describe("parseRetryAfter", () => {
  const now = Date.parse("2025-01-01T00:00:00Z");
  it.each([
    [{ "retry-after": "2" }, 2000],
    [{ "retry-after": "0" }, 0],
    [{ "retry-after": "1.5" }, 1500],
    [{ "retry-after": " 3 " }, 3000],
    [{ "retry-after-ms": "250" }, 250],
    [{ "retry-after-ms": "250", "retry-after": "9" }, 250],
    [{ "retry-after-ms": "abc", "retry-after": "4" }, 4000],
    [{ "Retry-After": "5" }, 5000],
    [{ "retry-after": "Wed, 01 Jan 2025 00:00:30 GMT" }, 30_000],
    [{ "retry-after": "Wednesday, 01-Jan-25 00:00:10 GMT" }, 10_000],
    [{ "retry-after": "Tue, 31 Dec 2024 23:59:00 GMT" }, 0],
  ])("%o → delay %i ms", (headers, ms) => {
    expect(parseRetryAfter(headers, now)).toMatchObject({ kind: "delay", ms });
  });

  it.each([
    [{}],
    [{ "retry-after": "" }],
    [{ "retry-after": "soon" }],
    [{ "retry-after": "-5" }],
    [{ "retry-after": "1e3" }],
    [{ "retry-after": "foo 2" }],
    [{ "retry-after-ms": "-1" }],
  ])("%o is absent: local backoff applies", (headers) => {
    expect(parseRetryAfter(headers, now)).toEqual({ kind: "absent" });
  });

  it("a past HTTP-date is 'already due' (delay 0), which differs from absent", () => {
    const due = parseRetryAfter({ "retry-after": "Thu, 01 Jan 1970 00:00:00 GMT" }, now);
    expect(due).toMatchObject({ kind: "delay", ms: 0 });
    expect(parseRetryAfter(undefined, now)).toEqual({ kind: "absent" });
  });

  it("clamps to maxRetryAfterMs (default 15 min) and says so", () => {
    expect(parseRetryAfter({ "retry-after": "3600" }, now)).toEqual({
      kind: "delay",
      ms: 900_000,
      source: "retry-after",
      clamped: true,
    });
    expect(parseRetryAfter({ "retry-after-ms": "5000" }, now, 1000)).toMatchObject({
      ms: 1000,
      clamped: true,
    });
  });

  it("reads a fetch Headers object as well as a record", () => {
    expect(parseRetryAfter(new Headers({ "Retry-After": "7" }), now)).toMatchObject({ ms: 7000 });
  });
});

const err429 = (retryAfter?: string) =>
  http(429, "Rate limit reached", {
    code: "rate_limit_exceeded",
    headers: retryAfter === undefined ? {} : { "retry-after": retryAfter },
  });
const err503 = () => http(503, "overloaded");
const timeoutErr = () => new ModelError("no first chunk", { kind: "first_chunk_timeout" });
const half = () => 0.5;
const asGo = (d: RetryDecision) => {
  if (d.action === "stop") throw new Error(`expected a retry, got stop: ${d.reason}`);
  return d;
};

describe("decideRetry", () => {
  it("maxRetries 2 allows exactly two extra requests (3 in all), then fails with the last error", () => {
    let s = initialRetryState({}, 0);
    s = asGo(decideRetry(s, { error: err503(), now: 0, random: half, hasOutput: false })).state;
    s = asGo(decideRetry(s, { error: err503(), now: 5000, random: half, hasOutput: false })).state;
    const d = decideRetry(s, { error: err503(), now: 9000, random: half, hasOutput: false });
    expect(d).toMatchObject({ action: "stop", status: "failed", stoppedBy: "max_retries" });
    if (d.action === "stop") expect(d.reason).toMatch(/gave up after 3 request/);
  });

  it("backoff is min(cap, base·2^(k−1)·U(0.9, 1.1)) at the extremes of the random draw", () => {
    const policy = { maxRetries: 5, baseDelayMs: 1000, maxDelayMs: 5000 };
    for (const [r, factor] of [
      [0, 0.9],
      [0.5, 1],
      [0.999999, 1.1],
    ] as const) {
      let s = initialRetryState(policy, 0);
      const delays: number[] = [];
      for (let k = 1; k <= 4; k++) {
        const d = asGo(
          decideRetry(s, { error: err503(), now: 0, random: () => r, hasOutput: false }),
        );
        delays.push(d.delayMs);
        s = d.state;
      }
      expect(delays).toEqual(
        [1000, 2000, 4000, 8000].map((x) => Math.min(5000, Math.round(x * factor))),
      );
    }
  });

  it("a valid Retry-After becomes one absolute readyAt; later layers get only the remainder", () => {
    const s0 = initialRetryState({}, 100);
    const d = asGo(
      decideRetry(s0, { error: err429("10"), now: 1000, random: half, hasOutput: false }),
    );
    expect(d).toMatchObject({ readyAt: 11_000, delayMs: 10_000, waitSource: "retry-after" });
    expect(remainingWait(d.state, 9000)).toBe(2000);
    expect(remainingWait(d.state, 11_000)).toBe(0);
    expect(remainingWait(d.state, 20_000)).toBe(0);
  });

  it("Retry-After: 0 is waited as 0 but still counts against maxRetries", () => {
    let s = initialRetryState({ maxRetries: 1 }, 0);
    const d = asGo(decideRetry(s, { error: err429("0"), now: 50, random: half, hasOutput: false }));
    expect(d).toMatchObject({ delayMs: 0, readyAt: 50, waitSource: "retry-after" });
    s = d.state;
    expect(
      decideRetry(s, { error: err429("0"), now: 60, random: half, hasOutput: false }),
    ).toMatchObject({ action: "stop", stoppedBy: "max_retries" });
  });

  it("without Retry-After the local backoff applies and the random draw is used once", () => {
    const random = vi.fn(() => 0.5);
    const d = asGo(
      decideRetry(initialRetryState(), { error: err429(), now: 0, random, hasOutput: false }),
    );
    expect(d).toMatchObject({ delayMs: 1000, waitSource: "backoff" });
    expect(random).toHaveBeenCalledTimes(1);
    random.mockClear();
    decideRetry(initialRetryState(), { error: err429("3"), now: 0, random, hasOutput: false });
    expect(random).not.toHaveBeenCalled();
  });

  it("a ready time at or past the operation deadline stops with budget_exhausted, without sleeping", () => {
    const s = initialRetryState({ operationDeadlineMs: 60_000 }, 0);
    expect(
      decideRetry(s, { error: err429("120"), now: 1000, random: half, hasOutput: false }),
    ).toMatchObject({ action: "stop", status: "budget_exhausted", stoppedBy: "deadline" });
    expect(
      decideRetry(s, { error: err429("59"), now: 1000, random: half, hasOutput: false }),
    ).toMatchObject({ action: "stop", stoppedBy: "deadline" });
    expect(
      decideRetry(s, { error: err503(), now: 59_500, random: half, hasOutput: false }),
    ).toMatchObject({ action: "stop", stoppedBy: "deadline" });
    expect(
      decideRetry(s, { error: err429("58"), now: 1000, random: half, hasOutput: false }),
    ).toMatchObject({ action: "retry", readyAt: 59_000 });
  });

  it("an HTTP-date Retry-After is converted with wall time, then lives on the monotonic clock", () => {
    const wallNow = Date.parse("2025-01-01T00:00:00Z");
    const d = asGo(
      decideRetry(initialRetryState({}, 0), {
        error: err429("Wed, 01 Jan 2025 00:00:04 GMT"),
        now: 500,
        wallNow,
        random: half,
        hasOutput: false,
      }),
    );
    expect(d).toMatchObject({ delayMs: 4000, readyAt: 4500 });
  });

  it("timeouts have their own smaller budget inside the same operation budget", () => {
    let s = initialRetryState({ maxRetries: 3, maxTimeoutRetries: 1 }, 0);
    s = asGo(decideRetry(s, { error: timeoutErr(), now: 0, random: half, hasOutput: false })).state;
    expect(
      decideRetry(s, { error: timeoutErr(), now: 0, random: half, hasOutput: false }),
    ).toMatchObject({ action: "stop", status: "failed", stoppedBy: "max_timeout_retries" });
    s = asGo(decideRetry(s, { error: err503(), now: 0, random: half, hasOutput: false })).state;
    expect(s).toMatchObject({ retries: 2, timeoutRetries: 1 });
  });

  it("hasOutput chooses continue over retry, and both draw on one budget", () => {
    let s = initialRetryState({ maxRetries: 2 }, 0);
    const c = asGo(decideRetry(s, { error: err503(), now: 0, random: half, hasOutput: true }));
    expect(c.action).toBe("continue");
    s = c.state;
    const r = asGo(decideRetry(s, { error: err503(), now: 0, random: half, hasOutput: false }));
    expect(r).toMatchObject({ action: "retry", retry: 2 });
    expect(
      decideRetry(r.state, { error: err503(), now: 0, random: half, hasOutput: true }),
    ).toMatchObject({ action: "stop" });
  });

  it("non-retryable errors fail at once with the classification reason; caller aborts are cancelled", () => {
    const d = decideRetry(initialRetryState(), {
      error: http(400, "prompt is too long"),
      now: 0,
      random: half,
      hasOutput: false,
    });
    expect(d).toMatchObject({
      action: "stop",
      status: "failed",
      stoppedBy: "not_retryable",
      category: "context_overflow",
    });
    if (d.action === "stop") expect(d.reason).toMatch(/compact/);
    expect(
      decideRetry(initialRetryState(), {
        error: new ModelError("x", { kind: "aborted" }),
        now: 0,
        random: half,
        hasOutput: false,
      }),
    ).toMatchObject({ action: "stop", status: "cancelled" });
  });

  it("the shared budget is asked only when everything else allows a retry", () => {
    const no = vi.fn(() => false);
    expect(
      decideRetry(initialRetryState(), {
        error: err503(),
        now: 0,
        random: half,
        hasOutput: false,
        budgetAllows: no,
      }),
    ).toMatchObject({ action: "stop", status: "budget_exhausted", stoppedBy: "shared_budget" });
    expect(no).toHaveBeenCalledTimes(1);
    const spy = vi.fn(() => true);
    decideRetry(initialRetryState(), {
      error: http(401, "bad key"),
      now: 0,
      random: half,
      hasOutput: false,
      budgetAllows: spy,
    });
    decideRetry(initialRetryState({ maxRetries: 0 }), {
      error: err503(),
      now: 0,
      random: half,
      hasOutput: false,
      budgetAllows: spy,
    });
    decideRetry(initialRetryState({ operationDeadlineMs: 10 }), {
      error: err429("60"),
      now: 0,
      random: half,
      hasOutput: false,
      budgetAllows: spy,
    });
    expect(spy).not.toHaveBeenCalled();
    expect(
      decideRetry(initialRetryState(), {
        error: err503(),
        now: 0,
        random: half,
        hasOutput: false,
        budgetAllows: false,
      }),
    ).toMatchObject({ stoppedBy: "shared_budget" });
  });

  it("documents its defaults and rejects bad options with the option's name", () => {
    expect(DEFAULT_RETRY_POLICY).toEqual({
      maxRetries: 2,
      maxTimeoutRetries: 1,
      baseDelayMs: 1000,
      maxDelayMs: 30_000,
      jitter: 0.1,
      maxRetryAfterMs: 900_000,
    });
    expect(() => resolveRetryPolicy({ maxRetries: -1 })).toThrow(
      /maxRetries must be an integer ≥ 0/,
    );
    expect(() => resolveRetryPolicy({ jitter: 1.5 })).toThrow(/jitter/);
    expect(() => resolveRetryPolicy({ baseDelayMs: 5000, maxDelayMs: 100 })).toThrow(/maxDelayMs/);
    expect(() => initialRetryState({ operationDeadlineMs: 0 })).toThrow(/operationDeadlineMs/);
  });
});
