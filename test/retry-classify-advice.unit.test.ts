import { describe, expect, it } from "vitest";
import { ModelError } from "../contracts/model.ts";
import { classifyModelError, parseRetryAfter } from "../machines/policies/retry-classify.ts";

const http = (status: number, message = "opaque") =>
  new ModelError(message, { kind: "http", status });

describe("retry classification tells the caller what to do, in words", () => {
  it("each category's reason carries its advice: auth names the key, a bad request what to check, a retryable one what happened", () => {
    expect(classifyModelError(http(401)).reason).toContain("check apiKey / OPENAI_API_KEY");
    expect(classifyModelError(http(422)).reason).toContain(
      "check the model name, baseURL, messages and tool schemas",
    );
    expect(classifyModelError(http(429)).reason).toMatch(
      /^rate limited by the provider \(HTTP 429/,
    );
    expect(classifyModelError(http(503)).reason).toMatch(
      /^the provider (returned a server error|is overloaded)/,
    );
    expect(classifyModelError(http(599)).reason).toMatch(/^the provider returned a server error/);
    const cut = new ModelError("socket hang up", { kind: "network" });
    expect(classifyModelError(cut).reason).toMatch(/^the connection failed or the stream was cut/);
  });

  it("any 4xx without a category of its own is a bad request, from 400 on; a caller's abort is 'aborted' whatever else it says", () => {
    expect(classifyModelError(http(418))).toMatchObject({
      category: "bad_request",
      retryable: false,
    });
    expect(classifyModelError({ status: 400, message: "opaque" })).toMatchObject({
      category: "bad_request",
    });
    const aborted = classifyModelError({ kind: "aborted", status: 429, message: "stop" });
    expect(aborted).toMatchObject({ category: "aborted", retryable: false });
    expect(aborted.reason).toMatch(/^the request was cancelled by the caller/);
  });

  it("overflow, quota, rate-limit and timeout messages match in their spaced and joined spellings", () => {
    const msg = (message: string) => classifyModelError({ message }).category;
    expect(msg("context length exceeded")).toBe("context_overflow");
    expect(msg("context_length_exceeded")).toBe("context_overflow");
    expect(msg("the maximum prompt length is 4096 tokens")).toBe("context_overflow");
    expect(msg("insufficient quota")).toBe("quota");
    expect(msg("ratelimited, slow down")).toBe("rate_limit");
    expect(msg("rate limit hit")).toBe("rate_limit");
    expect(msg("upstream timeout")).toBe("timeout");
    expect(msg("the request timed out")).toBe("timeout");
  });

  it("a message of 200 characters is quoted whole; a longer one is cut at 200 with an ellipsis", () => {
    const exactly = "x".repeat(200);
    expect(classifyModelError(http(500, exactly)).reason).toContain(`${exactly})`);
    const longer = "y".repeat(201);
    expect(classifyModelError(http(500, longer)).reason).toContain(`${"y".repeat(200)}…)`);
  });
});

describe("retry classification: fields, fallbacks and headers", () => {
  it("an error without a message says so in its reason", () => {
    expect(classifyModelError(new ModelError("", { kind: "http", status: 503 })).reason).toMatch(
      /\(HTTP 503: no message\)$/,
    );
    expect(classifyModelError({ status: 503 }).reason).toMatch(/\(HTTP 503: no message\)$/);
  });

  it("the provider's type classifies when its code is one Keel does not know", () => {
    const err = { code: "weird_code", type: "server_error", message: "opaque" };
    expect(classifyModelError(err)).toMatchObject({ category: "server", retryable: true });
  });

  it("message, code and type are matched one by one: words split across them make no category", () => {
    expect(classifyModelError({ message: "rate", code: "limit" }).category).toBe("unknown");
  });

  it("Retry-After is read with the spaces around its value trimmed (a date too)", () => {
    expect(parseRetryAfter({ "retry-after": " 2 " }, 0)).toMatchObject({ kind: "delay", ms: 2000 });
    const now = Date.parse("Wed, 21 Oct 2015 07:28:00 GMT");
    expect(parseRetryAfter({ "retry-after": "  Wed, 21 Oct 2015 07:28:05 GMT " }, now)).toEqual({
      kind: "delay",
      ms: 5000,
      source: "retry-after",
      clamped: false,
    });
  });
});

describe("retry classification: what the last mutation run showed unstated", () => {
  it("a caller's abort is 'aborted' even when its message reads like an overflow or a quota", () => {
    for (const message of ["maximum context length exceeded", "insufficient_quota"]) {
      const err = new ModelError(message, { kind: "aborted" });
      expect(classifyModelError(err)).toMatchObject({ category: "aborted", retryable: false });
    }
  });

  it("a numeric provider code (Gemini sends error.code 429) is kept in the reason", () => {
    const r = classifyModelError({ body: { error: { code: 1234, message: "odd" } }, status: 400 });
    expect(r.reason).toContain("HTTP 400, 1234");
  });

  it("a Retry-After that does not start with an HTTP-date is not read as one", () => {
    const now = Date.parse("Sun, 06 Nov 1994 08:49:00 GMT");
    const date = "Sun, 06 Nov 1994 08:49:37 GMT";
    expect(parseRetryAfter({ "retry-after": date }, now)).toMatchObject({ kind: "delay" });
    expect(parseRetryAfter({ "retry-after": `in ${date}` }, now)).toEqual({ kind: "absent" });
  });
});
