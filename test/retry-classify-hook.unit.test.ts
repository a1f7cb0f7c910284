import { describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { ModelError } from "../contracts/model.ts";
import {
  decideRetry,
  initialRetryState,
  type RetryDecision,
  type RetryPolicy,
  resolveRetryPolicy,
} from "../machines/policies/retry-policy.ts";
import { scriptedModel } from "../providers/scripted-model.ts";

const e400 = () =>
  new ModelError("the gateway says: try again", {
    kind: "http",
    status: 400,
    code: "busy_gateway",
  });
const e503 = () => new ModelError("503 busy", { kind: "http", status: 503 });
const aborted = () => new ModelError("aborted by the caller", { kind: "aborted" });

const decide = (classify: RetryPolicy["classify"], error: unknown): RetryDecision =>
  decideRetry(initialRetryState({ classify, baseDelayMs: 0, maxDelayMs: 0 }), {
    error,
    now: 0,
    random: () => 0,
    hasOutput: false,
  });

describe("retry.classify: the embedder's classification runs before the built-in rules", () => {
  it('"retry" retries an error the built-in rules would not, "fail" stops one they would retry', () => {
    expect(decide(undefined, e400())).toMatchObject({ action: "stop", stoppedBy: "not_retryable" });
    const retried = decide(
      (e) => ((e as ModelError).code === "busy_gateway" ? "retry" : undefined),
      e400(),
    );
    expect(retried).toMatchObject({ action: "retry", retry: 1 });
    expect(retried.reason).toMatch(/^retry\.classify said "retry": /);

    expect(decide(undefined, e503())).toMatchObject({ action: "retry" });
    const failed = decide(() => "fail", e503());
    expect(failed).toMatchObject({ action: "stop", status: "failed", stoppedBy: "not_retryable" });
    expect(failed.reason).toMatch(
      /^retry\.classify said "fail" \(not retried\): the provider is overloaded/,
    );
  });

  it("undefined leaves the decision to the built-in rules, and the hook sees the error itself", () => {
    const seen: unknown[] = [];
    const error = e503();
    const d = decide((e) => {
      seen.push(e);
      return undefined;
    }, error);
    expect(seen).toEqual([error]);
    expect(d).toMatchObject({ action: "retry", category: "overloaded" });
    expect(d.reason).not.toMatch(/classify/);
  });

  it("a hook's retry still counts against maxRetries: it never makes more than maxRetries + 1 requests", () => {
    let state = initialRetryState({ classify: () => "retry", maxRetries: 2 });
    const actions: string[] = [];
    for (let i = 0; i < 3; i++) {
      const d = decideRetry(state, { error: e400(), now: 0, random: () => 0, hasOutput: false });
      actions.push(d.action === "stop" ? `stop:${d.stoppedBy}` : d.action);
      if (d.action !== "stop") state = d.state;
    }
    expect(actions).toEqual(["retry", "retry", "stop:max_retries"]);
  });

  it("a caller's abort is never asked about: it cancels even when the hook says retry", () => {
    let asked = 0;
    const d = decide(() => {
      asked++;
      return "retry";
    }, aborted());
    expect(d).toMatchObject({ action: "stop", status: "cancelled" });
    expect(asked).toBe(0);
  });

  it("a throwing hook is a failed classification with a reason, not a crash", () => {
    const d = decide(() => {
      throw new RangeError("no table for this provider");
    }, e503());
    expect(d).toMatchObject({ action: "stop", status: "failed", stoppedBy: "not_retryable" });
    expect(d.reason).toMatch(
      /^the retry\.classify hook threw \(RangeError: no table for this provider\), so the request was not retried; fix the hook/,
    );
    expect(d.reason).toContain("HTTP 503");
  });

  it("a hook that answers something else is a failed classification that names the answer", () => {
    const d = decide((() => "yes") as unknown as RetryPolicy["classify"], e503());
    expect(d).toMatchObject({ action: "stop", status: "failed" });
    expect(d.reason).toMatch(/returned "yes", which is not "retry", "fail" or undefined/);
  });

  it("resolveRetryPolicy refuses a classify that is not a function, naming the option", () => {
    expect(() =>
      resolveRetryPolicy({ classify: "retry" as unknown as RetryPolicy["classify"] }),
    ).toThrow(
      /retry policy: classify must be a function \(error\) => "retry" \| "fail" \| undefined, got string/,
    );
    expect(() =>
      createAgent({
        model: scriptedModel([]),
        retry: { classify: 42 as unknown as RetryPolicy["classify"] },
      }),
    ).toThrow(/classify must be a function/);
  });

  it("through an agent: a 400 the hook marks retryable is retried and the turn completes; a 503 it marks fail ends the turn after one request", async () => {
    const fast = { baseDelayMs: 0, maxDelayMs: 0 };
    const retrying = scriptedModel([
      { error: { status: 400, code: "busy_gateway", message: "try again" } },
      { text: "done" },
    ]);
    const a = createAgent({
      model: retrying,
      retry: {
        ...fast,
        classify: (e) => ((e as ModelError).code === "busy_gateway" ? "retry" : undefined),
      },
    });
    expect(await a.session().prompt("go")).toMatchObject({ status: "completed", text: "done" });
    expect(retrying.requests).toHaveLength(2);

    const failing = scriptedModel([{ error: { status: 503 } }, { text: "never" }]);
    const b = createAgent({ model: failing, retry: { ...fast, classify: () => "fail" } });
    const result = await b.session().prompt("go");
    expect(result.status).toBe("failed");
    expect(result.reason).toMatch(/retry\.classify said "fail"/);
    expect(failing.requests).toHaveLength(1);

    const throwing = scriptedModel([{ error: { status: 503 } }, { text: "never" }]);
    const c = createAgent({
      model: throwing,
      retry: {
        ...fast,
        classify: () => {
          throw new Error("bug in the hook");
        },
      },
    });
    const crashed = await c.session().prompt("go");
    expect(crashed.status).toBe("failed");
    expect(crashed.reason).toMatch(/the retry\.classify hook threw \(Error: bug in the hook\)/);
    expect(throwing.requests).toHaveLength(1);
  });
});
