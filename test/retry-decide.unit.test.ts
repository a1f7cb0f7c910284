import { describe, expect, it } from "vitest";
import { ModelError } from "../contracts/model.ts";
import {
  decideRetry,
  initialRetryState,
  type RetryDecision,
  remainingWait,
} from "../machines/policies/retry-policy.ts";

const e503 = (headers: Record<string, string> = {}) =>
  new ModelError("503 busy", { kind: "http", status: 503, headers });
const timeout = () => new ModelError("slow", { kind: "idle_timeout" });
const go = (d: RetryDecision) => {
  if (d.action === "stop") throw new Error(`expected a retry, got stop: ${d.reason}`);
  return d;
};
const stop = (d: RetryDecision) => {
  if (d.action !== "stop") throw new Error(`expected a stop, got ${d.action}`);
  return d;
};

describe("decideRetry, details a caller reads", () => {
  it("a random draw outside [0, 1) is clamped: the backoff stays within base·(1 ± jitter)", () => {
    const s = initialRetryState({ baseDelayMs: 1000, jitter: 0.5 });
    const at = (r: number) =>
      go(decideRetry(s, { error: e503(), now: 0, random: () => r, hasOutput: false })).delayMs;
    expect(at(5)).toBe(1500);
    expect(at(-3)).toBe(500);
    expect(at(0.5)).toBe(1000);
  });

  it("the k-th backoff doubles and is capped", () => {
    let s = initialRetryState({ baseDelayMs: 100, maxDelayMs: 250, jitter: 0, maxRetries: 5 });
    const delays: number[] = [];
    for (let k = 0; k < 3; k++) {
      const d = go(decideRetry(s, { error: e503(), now: 0, random: () => 0, hasOutput: false }));
      delays.push(d.delayMs);
      s = d.state;
    }
    expect(delays).toEqual([100, 200, 250]);
  });

  it("the retry's reason says which retry, the wait and where the wait came from", () => {
    const s = initialRetryState({ baseDelayMs: 1000, jitter: 0 });
    const backoff = go(
      decideRetry(s, { error: e503(), now: 0, random: () => 0, hasOutput: false }),
    );
    expect(backoff.reason).toMatch(/; retry 1\/2 in 1000 ms \(local backoff\)$/);
    expect(backoff).toMatchObject({
      retry: 1,
      readyAt: 1000,
      waitSource: "backoff",
      category: "overloaded",
    });
    const server = go(
      decideRetry(s, {
        error: e503({ "retry-after": "3" }),
        now: 10,
        random: () => 0,
        hasOutput: true,
      }),
    );
    expect(server.reason).toMatch(/; continue 1\/2 in 3000 ms \(provider's Retry-After\)$/);
    expect(server).toMatchObject({ action: "continue", readyAt: 3010, waitSource: "retry-after" });
    expect(server.state).toMatchObject({
      retries: 1,
      timeoutRetries: 0,
      readyAt: 3010,
      waitSource: "retry-after",
    });
  });

  it("only a timeout counts against maxTimeoutRetries, and the stop says how many timeouts", () => {
    const s = initialRetryState({ maxRetries: 5, maxTimeoutRetries: 1, jitter: 0 });
    const first = go(
      decideRetry(s, { error: timeout(), now: 0, random: () => 0, hasOutput: false }),
    );
    expect(first.state.timeoutRetries).toBe(1);
    const other = go(
      decideRetry(first.state, { error: e503(), now: 0, random: () => 0, hasOutput: false }),
    );
    expect(other.state.timeoutRetries).toBe(1);
    const second = stop(
      decideRetry(other.state, { error: timeout(), now: 0, random: () => 0, hasOutput: false }),
    );
    expect(second).toMatchObject({
      status: "failed",
      stoppedBy: "max_timeout_retries",
      category: "timeout",
    });
    expect(second.reason).toMatch(
      /^gave up after 2 timeout\(s\) \(maxTimeoutRetries 1\); last error: no data arrived in time/,
    );
  });

  it("maxRetries stops with how many requests were made", () => {
    const s = initialRetryState({ maxRetries: 0 });
    const d = stop(decideRetry(s, { error: e503(), now: 0, random: () => 0, hasOutput: false }));
    expect(d).toMatchObject({ status: "failed", stoppedBy: "max_retries" });
    expect(d.reason).toMatch(
      /^gave up after 1 request\(s\) \(maxRetries 0\); last error: the provider is overloaded/,
    );
  });

  it("a wait past the deadline says what remains and which wait it was", () => {
    const s = initialRetryState({ operationDeadlineMs: 5000 }, 1000);
    expect(s.deadline).toBe(6000);
    const server = stop(
      decideRetry(s, {
        error: e503({ "retry-after": "10" }),
        now: 2000,
        random: () => 0,
        hasOutput: false,
      }),
    );
    expect(server).toMatchObject({ status: "budget_exhausted", stoppedBy: "deadline" });
    expect(server.reason).toContain(
      "the next request could start only in 10000 ms (provider's Retry-After) but 4000 ms remain before the operation deadline (operationDeadlineMs 5000)",
    );
    const late = stop(
      decideRetry(s, {
        error: e503({ "retry-after": "10" }),
        now: 9000,
        random: () => 0,
        hasOutput: false,
      }),
    );
    expect(late.reason).toContain("but 0 ms remain");
    const local = stop(
      decideRetry(initialRetryState({ operationDeadlineMs: 500, baseDelayMs: 1000, jitter: 0 }), {
        error: e503(),
        now: 0,
        random: () => 0,
        hasOutput: false,
      }),
    );
    expect(local.reason).toContain("(local backoff)");
    // Exactly at the deadline is already too late.
    const edge = decideRetry(
      initialRetryState({ operationDeadlineMs: 1000, baseDelayMs: 1000, jitter: 0 }),
      {
        error: e503(),
        now: 0,
        random: () => 0,
        hasOutput: false,
      },
    );
    expect(edge.action).toBe("stop");
  });

  it("no deadline means none: a long wait is still a retry", () => {
    const s = initialRetryState({});
    expect(s.deadline).toBeUndefined();
    const d = go(
      decideRetry(s, {
        error: e503({ "retry-after": "800" }),
        now: 0,
        random: () => 0,
        hasOutput: false,
      }),
    );
    expect(d.delayMs).toBe(800_000);
  });

  it("a shared budget given as a boolean decides too, and its stop says why", () => {
    const s = initialRetryState({});
    const no = stop(
      decideRetry(s, {
        error: e503(),
        now: 0,
        random: () => 0,
        hasOutput: false,
        budgetAllows: false,
      }),
    );
    expect(no).toMatchObject({ status: "budget_exhausted", stoppedBy: "shared_budget" });
    expect(no.reason).toMatch(/^the shared retry budget for this provider is exhausted/);
    expect(
      decideRetry(s, {
        error: e503(),
        now: 0,
        random: () => 0,
        hasOutput: false,
        budgetAllows: true,
      }).action,
    ).toBe("retry");
  });

  it("an HTTP-date is read against wallNow, or against now when no wall time is given", () => {
    const s = initialRetryState({});
    const date = "Thu, 01 Jan 1970 00:00:10 GMT";
    const d = go(
      decideRetry(s, {
        error: e503({ "retry-after": date }),
        now: 4000,
        random: () => 0,
        hasOutput: false,
      }),
    );
    expect(d.delayMs).toBe(6000);
    const w = go(
      decideRetry(s, {
        error: e503({ "retry-after": date }),
        now: 4000,
        wallNow: 9000,
        random: () => 0,
        hasOutput: false,
      }),
    );
    expect(w.delayMs).toBe(1000);
  });

  it("an error that is not an object is classified, not a crash", () => {
    const d = stop(
      decideRetry(initialRetryState({}), {
        error: null,
        now: 0,
        random: () => 0,
        hasOutput: false,
      }),
    );
    expect(d).toMatchObject({ stoppedBy: "not_retryable", category: "unknown" });
    expect(d.reason).not.toContain("last error");
  });

  it("remainingWait is 0 before any decision", () => {
    expect(remainingWait(initialRetryState({}), 123)).toBe(0);
  });
});
