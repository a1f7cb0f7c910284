import { describe, expect, it } from "vitest";
import { ModelError } from "../contracts/model.ts";
import { classifyModelError, parseRetryAfter } from "../machines/policies/retry-classify.ts";
import { resolveRetryPolicy } from "../machines/policies/retry-policy.ts";

/** An error with nothing but what the test gives it: no status, no transport kind. */
const bare = (fields: Record<string, unknown>) => Object.assign(new Error(""), fields);

describe("classification by a provider's code or type alone", () => {
  it("an in-stream { code: 'server_error' } with an opaque message is a retried server error", () => {
    const c = classifyModelError(bare({ message: "oops", code: "server_error" }));
    expect(c).toMatchObject({ category: "server", retryable: true });
  });

  it("a body's type decides when the error has no status (overloaded_error, rate_limit_error, api_error)", () => {
    expect(
      classifyModelError(bare({ message: "x", error: { type: "overloaded_error" } })).category,
    ).toBe("overloaded");
    expect(
      classifyModelError(bare({ message: "x", body: { error: { type: "rate_limit_error" } } }))
        .category,
    ).toBe("rate_limit");
    expect(classifyModelError(bare({ message: "x", type: "api_error" })).category).toBe("server");
    expect(classifyModelError(bare({ message: "x", code: "invalid_api_key" })).category).toBe(
      "auth",
    );
    expect(classifyModelError(bare({ message: "x", code: "not_found_error" })).category).toBe(
      "bad_request",
    );
  });

  it("a 429 whose code is insufficient_quota and whose message matches nothing is quota, not retried", () => {
    const e = new ModelError("429 something happened", {
      kind: "http",
      status: 429,
      code: "insufficient_quota",
    });
    expect(classifyModelError(e)).toMatchObject({ category: "quota", retryable: false });
  });

  it("billing_hard_limit_reached as a type is quota even with a 5xx status", () => {
    const e = new ModelError("503 x", {
      kind: "http",
      status: 503,
      type: "billing_hard_limit_reached",
    });
    expect(classifyModelError(e).category).toBe("quota");
  });

  it("a context_length_exceeded code with an opaque message is an overflow, never retried", () => {
    const e = new ModelError("500 x", {
      kind: "http",
      status: 500,
      code: "context_length_exceeded",
    });
    expect(classifyModelError(e)).toMatchObject({ category: "context_overflow", retryable: false });
  });

  it.each([502, 504, 520, 599])("HTTP %i is a retried server error", (status) => {
    const e = new ModelError(`${status} Bad Gateway`, { kind: "http", status });
    expect(classifyModelError(e)).toMatchObject({ category: "server", retryable: true });
  });

  it.each([
    [400, "bad_request"],
    [401, "auth"],
    [402, "quota"],
    [403, "auth"],
    [404, "bad_request"],
    [408, "timeout"],
    [409, "server"],
    [413, "context_overflow"],
    [418, "bad_request"],
    [422, "bad_request"],
    [529, "overloaded"],
  ])("HTTP %i with an opaque message is %s", (status, category) => {
    const e = new ModelError("x", { kind: "http", status });
    expect(classifyModelError(e).category).toBe(category);
  });

  it("a status below 400 without kind or code falls through to the message", () => {
    expect(classifyModelError(bare({ message: "x", status: 302 })).category).toBe("unknown");
    expect(classifyModelError(bare({ message: "socket hang up", status: 302 })).category).toBe(
      "network",
    );
  });

  it("transport kinds decide on their own: protocol is a server error, stream_cut a network error", () => {
    expect(classifyModelError(new ModelError("x", { kind: "protocol" })).category).toBe("server");
    expect(classifyModelError(new ModelError("x", { kind: "stream_cut" })).category).toBe(
      "network",
    );
    expect(classifyModelError(new ModelError("x", { kind: "idle_timeout" })).category).toBe(
      "timeout",
    );
    expect(classifyModelError(bare({ name: "AbortError", message: "x" })).category).toBe("aborted");
  });

  it("a wire mismatch (a reply in another API's format) is never retried, whatever its message says", () => {
    const c = classifyModelError(
      new ModelError("Received a Chat Completions stream: connection reset", {
        kind: "wire_mismatch",
        status: 503,
      }),
    );
    expect(c).toMatchObject({ category: "wire_mismatch", retryable: false });
    expect(c.reason).toMatch(
      /^the server does not speak this model's API: check the provider and the base URL \(not retried\)/,
    );
  });

  it("message fallbacks, in order: overloaded, rate limit, timeout, network", () => {
    expect(classifyModelError(new Error("server at capacity")).category).toBe("overloaded");
    expect(classifyModelError(new Error("Too Many Requests")).category).toBe("rate_limit");
    expect(classifyModelError(new Error("request timed out")).category).toBe("timeout");
    expect(classifyModelError(new Error("ECONNRESET")).category).toBe("network");
    expect(
      classifyModelError(bare({ message: "x", cause: { message: "fetch failed" } })).category,
    ).toBe("network");
    expect(classifyModelError("a plain string").category).toBe("unknown");
    expect(classifyModelError(null).category).toBe("unknown");
  });

  it("the reason names status, kind and code, and clips a long message to 200 characters", () => {
    const e = new ModelError("m".repeat(300), { kind: "http", status: 503, code: "busy" });
    const { reason } = classifyModelError(e);
    expect(reason).toContain("(HTTP 503, busy: ");
    expect(reason).toContain(`${"m".repeat(200)}…`);
    expect(reason).not.toContain("m".repeat(201));
    expect(classifyModelError(new ModelError("", { kind: "network" })).reason).toMatch(
      /\(network: no message\)$/,
    );
    expect(classifyModelError(new Error("zzz")).reason).toMatch(/\(no status: zzz\)$/);
  });
});

describe("parseRetryAfter edge forms", () => {
  const now = Date.parse("1994-11-06T08:49:00Z");

  it("decimal seconds are kept: 1.25 is 1250 ms, never absent", () => {
    expect(parseRetryAfter({ "retry-after": "1.25" }, now)).toEqual({
      kind: "delay",
      ms: 1250,
      source: "retry-after",
      clamped: false,
    });
  });

  it("the asctime date form is a date", () => {
    expect(parseRetryAfter({ "retry-after": "Sun Nov  6 08:49:37 1994" }, now)).toMatchObject({
      kind: "delay",
      ms: 37_000,
    });
  });

  it("a date-shaped value that is no date (NaN) is absent", () => {
    expect(parseRetryAfter({ "retry-after": "Sun, 99 Foo 1994 08:49:37 GMT" }, now)).toEqual({
      kind: "absent",
    });
  });

  it("retry-after-ms is read first and says it; a value at the cap is not clamped", () => {
    expect(parseRetryAfter({ "retry-after-ms": "1000" }, now, 1000)).toEqual({
      kind: "delay",
      ms: 1000,
      source: "retry-after-ms",
      clamped: false,
    });
  });

  it("a fraction of a millisecond rounds up", () => {
    expect(parseRetryAfter({ "retry-after-ms": "0.2" }, now)).toMatchObject({ ms: 1 });
  });

  it("a Headers-like object without the header is absent", () => {
    expect(parseRetryAfter({ get: () => null }, now)).toEqual({ kind: "absent" });
  });
});

describe("resolveRetryPolicy bounds", () => {
  it.each([
    [{ baseDelayMs: -1 }, /baseDelayMs must be a finite number ≥ 0, got -1/],
    [{ baseDelayMs: Number.NaN }, /baseDelayMs/],
    [{ baseDelayMs: Number.POSITIVE_INFINITY }, /baseDelayMs/],
    [{ jitter: 1 }, /jitter must be in \[0, 1\), got 1/],
    [{ jitter: -0.1 }, /jitter/],
    [{ maxRetryAfterMs: -1 }, /maxRetryAfterMs must be ≥ 0, got -1/],
    [{ maxRetries: 1.5 }, /maxRetries must be an integer ≥ 0/],
    [{ maxTimeoutRetries: -1 }, /maxTimeoutRetries must be an integer ≥ 0/],
    [{ baseDelayMs: 10, maxDelayMs: 9 }, /maxDelayMs must be ≥ baseDelayMs, got 9/],
    [{ operationDeadlineMs: -5 }, /operationDeadlineMs must be > 0 or undefined/],
  ])("%o is refused with the option's name", (options, message) => {
    expect(() => resolveRetryPolicy(options)).toThrow(RangeError);
    expect(() => resolveRetryPolicy(options)).toThrow(message);
  });

  it("the edges that are allowed: zero delays, jitter 0, maxRetryAfterMs 0, equal base and cap", () => {
    expect(
      resolveRetryPolicy({
        baseDelayMs: 0,
        maxDelayMs: 0,
        jitter: 0,
        maxRetryAfterMs: 0,
        maxRetries: 0,
      }),
    ).toMatchObject({
      baseDelayMs: 0,
      maxDelayMs: 0,
      jitter: 0,
      maxRetryAfterMs: 0,
      maxRetries: 0,
    });
    expect(resolveRetryPolicy({ operationDeadlineMs: 1 }).operationDeadlineMs).toBe(1);
  });
});
