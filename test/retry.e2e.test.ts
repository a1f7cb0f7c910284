import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SimulatedClock } from "xstate";
import { createAgent } from "../actors/agent.ts";
import { tokenBucketBudget } from "../actors/retry-budget.ts";
import type { AgentEvent, AgentEventOf } from "../contracts/events.ts";
import type { RetryPolicy } from "../machines/policies/retry-policy.ts";
import { openaiModel } from "../providers/openai-model.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import {
  contextOverflow,
  cutAfterText,
  cutBeforeAnyByte,
  type FakeOpenAIServer,
  type FakeReply,
  insufficientQuota,
  neverAnswer,
  rateLimited,
  serviceUnavailable,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";

/**
 * Retry scenarios through the whole agent: createAgent + openaiModel + the real SDK over real
 * HTTP to the fake server. The agent runs on a SimulatedClock; each scheduled retry wait is
 * observed (retry.scheduled) and then passed by advancing the clock by exactly its delay, so
 * the test sees every wait and never sleeps.
 */

let server: FakeOpenAIServer;
beforeEach(async () => {
  server = await startFakeOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

type Scheduled = AgentEventOf<"retry.scheduled">;

function setup(
  options: {
    retry?: Partial<RetryPolicy>;
    firstChunkTimeoutMs?: number;
    budget?: ReturnType<typeof tokenBucketBudget>;
    advance?: boolean;
  } = {},
) {
  const clock = new SimulatedClock();
  const model = openaiModel({
    contextWindow: 8192,
    model: "fake-model",
    baseURL: server.baseURL,
    firstChunkTimeoutMs: options.firstChunkTimeoutMs,
  });
  const agent = createAgent({
    model,
    clock,
    random: () => 0.5,
    retry: options.retry,
    retryBudget: options.budget,
  });
  const events: AgentEvent[] = [];
  const open = (id?: string) => {
    const session = agent.session(id);
    session.subscribe((e) => {
      events.push(e);
      // The wait timer is armed in the same synchronous step; pass it once that step is over.
      if (e.type === "retry.scheduled" && options.advance !== false)
        queueMicrotask(() => clock.increment(e.delayMs));
    });
    return session;
  };
  const waits = () => events.filter((e): e is Scheduled => e.type === "retry.scheduled");
  return { clock, agent, open, events, waits };
}

const enqueue = (...replies: FakeReply[]) => server.enqueue(...replies);

describe("retries through the whole agent, over real HTTP", () => {
  it("429 with Retry-After: 2 waits exactly 2 s on the clock, then the second request completes", async () => {
    enqueue(rateLimited({ "retry-after": "2" }), streamReply({ text: "hello" }));
    const { open, waits, clock } = setup();
    const s = open();
    const out = await s.prompt("hi");
    expect(out.status).toBe("completed");
    expect(server.requests).toHaveLength(2);
    expect(waits().map((w) => [w.delayMs, w.mode, w.retry])).toEqual([[2000, "retry", 1]]);
    expect(clock.now()).toBe(2000);
    expect(s.messages().at(-1)).toMatchObject({ role: "assistant", content: "hello" });
  });

  it("503 three times makes exactly 3 requests (maxRetries 2) with backoff 1 s then 2 s, then fails", async () => {
    enqueue(
      serviceUnavailable(),
      serviceUnavailable(),
      serviceUnavailable(),
      streamReply({ text: "never" }),
    );
    const { open, waits } = setup();
    const out = await open().prompt("hi");
    expect(out.status).toBe("failed");
    expect(out.reason).toMatch(/gave up after 3 request/);
    expect(server.requests).toHaveLength(3);
    expect(waits().map((w) => w.delayMs)).toEqual([1000, 2000]);
  });

  it("retry-after-ms and an HTTP-date are honoured as the provider's wait", async () => {
    const date = new Date(Date.now() + 5000).toUTCString();
    enqueue(
      rateLimited({ "retry-after-ms": "1500" }),
      rateLimited({ "retry-after": date }),
      streamReply({ text: "ok" }),
    );
    const { open, waits } = setup();
    expect((await open().prompt("hi")).status).toBe("completed");
    const [a, b] = waits().map((w) => w.delayMs);
    expect(a).toBe(1500);
    // The date has 1 s resolution and is converted against the wall clock at decision time.
    expect(b).toBeGreaterThan(3000);
    expect(b).toBeLessThanOrEqual(5000);
  });

  it("Retry-After: 0 is waited as 0 but each one still counts: 3 requests, then failed", async () => {
    enqueue(
      ...[0, 1, 2].map(() => rateLimited({ "retry-after": "0" })),
      streamReply({ text: "never" }),
    );
    const { open, waits, clock } = setup();
    const out = await open().prompt("hi");
    expect(out.status).toBe("failed");
    expect(server.requests).toHaveLength(3);
    expect(waits().map((w) => w.delayMs)).toEqual([0, 0]);
    expect(clock.now()).toBe(0);
  });

  it("context overflow and insufficient_quota fail after one request, without any wait", async () => {
    for (const reply of [contextOverflow(), insufficientQuota()]) {
      // Anything after the fault would be unscripted (a 500, retried) and show in the count.
      enqueue(reply);
      const { open, waits } = setup();
      const before = server.requests.length;
      const out = await open().prompt("hi");
      expect(out.status).toBe("failed");
      expect(out.reason).toMatch(/not retried/);
      expect(server.requests.length - before).toBe(1);
      expect(waits()).toEqual([]);
    }
  });

  it("a Retry-After past the operation deadline ends the turn budget_exhausted with no sleep", async () => {
    enqueue(rateLimited({ "retry-after": "120" }), streamReply({ text: "never" }));
    const { open, waits, clock } = setup({ retry: { operationDeadlineMs: 60_000 } });
    const out = await open().prompt("hi");
    expect(out.status).toBe("budget_exhausted");
    expect(out.reason).toMatch(/deadline/);
    expect(server.requests).toHaveLength(1);
    expect(waits()).toEqual([]);
    expect(clock.now()).toBe(0);
  });

  it("OpenAI Chat cannot continue a partial message: a cut after text falls back to Retry and says so in the event and the log; partial text never reaches the model", async () => {
    enqueue(
      cutAfterText("partial answer "),
      cutBeforeAnyByte(),
      streamReply({ text: "full answer" }),
    );
    const { open, waits } = setup({ retry: { maxRetries: 3 } });
    const s = open();
    expect((await s.prompt("hi")).status).toBe("completed");
    expect(waits().map((w) => w.mode)).toEqual(["retry", "retry"]);
    expect(waits()[0].fallback).toMatch(
      /Continue fell back to Retry: model .* cannot continue from a partial answer \(capabilities\.continueFromPartial/,
    );
    expect(waits()[1].fallback).toBeUndefined();
    const starts = s.entries().filter((e) => e.type === "attempt_start");
    expect(starts.map((e) => (e.type === "attempt_start" ? e.recovery : null))).toEqual([
      undefined,
      { mode: "retry", from: expect.any(String), fallback: expect.stringMatching(/fell back/) },
      { mode: "retry", from: expect.any(String) },
    ]);
    expect(server.requests).toHaveLength(3);
    for (const req of server.requests)
      expect(JSON.stringify(req.body.messages)).not.toContain("partial answer");
    expect(JSON.stringify(s.messages())).not.toContain("partial answer");
  });

  it("first-chunk timeouts have their own budget: two timeouts end the turn after 2 requests", async () => {
    enqueue(neverAnswer(), neverAnswer(), streamReply({ text: "never" }));
    const { open, waits } = setup({ firstChunkTimeoutMs: 150 });
    const out = await open().prompt("hi");
    expect(out.status).toBe("failed");
    expect(out.reason).toMatch(/timeout/);
    expect(server.requests).toHaveLength(2);
    expect(waits()).toHaveLength(1);
  });

  it("an interrupt during a Retry-After wait cancels the turn at once, without advancing the clock", async () => {
    enqueue(rateLimited({ "retry-after": "60" }), streamReply({ text: "never" }));
    const { open, clock } = setup({ advance: false });
    const s = open();
    s.subscribe((e) => {
      if (e.type === "retry.scheduled") queueMicrotask(() => s.interrupt("user pressed stop"));
    });
    const out = await s.prompt("hi");
    expect(out.status).toBe("cancelled");
    expect(server.requests).toHaveLength(1);
    expect(clock.now()).toBe(0);
  });

  it("100 sessions failing at once make 100 first requests and only `burst` extra ones", async () => {
    const budgetClock = new SimulatedClock();
    const budget = tokenBucketBudget({ ratePerSec: 1, burst: 10, clock: budgetClock });
    for (let i = 0; i < 130; i++) enqueue(serviceUnavailable());
    const { open, waits } = setup({ budget });
    const outs = await Promise.all(
      Array.from({ length: 100 }, (_, i) => open(`s${i}`).prompt("hi")),
    );
    expect(server.requests).toHaveLength(110);
    expect(waits()).toHaveLength(10);
    // The 10 tokens go to whoever fails first: a session may use one or two of them (then it
    // ends on maxRetries); every other session is refused at its first failure.
    const exhausted = outs.filter((o) => o.status === "budget_exhausted");
    expect(exhausted.length).toBeGreaterThanOrEqual(90);
    expect(outs.every((o) => o.status === "budget_exhausted" || o.status === "failed")).toBe(true);
    expect(exhausted[0].reason).toMatch(/shared retry budget/);
  });

  it("an invalid retry policy is a RangeError from createAgent, naming the field", () => {
    expect(() => createAgent({ model: scriptedModel([]), retry: { jitter: 2 } })).toThrow(
      /retry policy: jitter must be in \[0, 1\), got 2/,
    );
  });
});

describe("the turn's retry wait (invariant 7 of docs/architecture.md: a Retry-After is waited once)", () => {
  it("the turn arms its timer with what remains of the decided ready time, not the full Retry-After again", async () => {
    // Reading this clock takes 1 ms: the decision and the arming of the timer see different
    // times, as on a real clock when the logger or a listener runs in between.
    const sim = new SimulatedClock();
    let drift = 0;
    const clock = {
      now: () => sim.now() + ++drift,
      setTimeout: (fn: () => void, ms: number) => sim.setTimeout(fn, ms),
      clearTimeout: (id: number) => sim.clearTimeout(id),
    };
    const model = scriptedModel(
      [{ error: { status: 429, headers: { "retry-after": "2" } } }, { text: "hello" }],
      { clock: sim },
    );
    const agent = createAgent({ model, clock, random: () => 0.5 });
    const session = agent.session();
    const waits: Scheduled[] = [];
    session.subscribe((e) => {
      if (e.type !== "retry.scheduled") return;
      waits.push(e);
      queueMicrotask(() => sim.increment(e.delayMs));
    });
    const out = await session.prompt("hi");
    expect(out.status).toBe("completed");
    expect(waits).toHaveLength(1);
    const [wait] = waits;
    // decideRetry fixed readyAt = decision time + 2000; the timer waits only the remainder.
    expect(wait.delayMs).toBeLessThan(2000);
    expect(wait.delayMs).toBeGreaterThan(1990);
    const decidedAt = wait.readyAt - 2000;
    expect(wait.readyAt - wait.delayMs).toBeGreaterThan(decidedAt);
    await agent.close();
  });
});
