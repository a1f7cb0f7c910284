import { describe, expect, it } from "vitest";
import { SimulatedClock } from "xstate";
import { createAgent } from "../actors/agent.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";

/** Lets every pending promise callback run (the clock only moves when the test says so). */
const settle = async () => {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
};

function setup(script: Parameters<typeof scriptedModel>[0], operationDeadlineMs: number) {
  const clock = new SimulatedClock();
  const model = scriptedModel(script, { clock });
  const session = createAgent({
    model,
    clock,
    random: () => 0.5,
    retry: { operationDeadlineMs, baseDelayMs: 1000 },
  }).session();
  const events: AgentEvent[] = [];
  session.subscribe((e) => events.push(e));
  return { clock, model, session, events };
}

describe("the operation deadline bounds the request in flight (virtual time)", () => {
  it("a request that never answers is aborted exactly when the deadline passes, and the turn ends budget_exhausted", async () => {
    const { clock, model, session, events } = setup([{ hang: true }], 5000);
    let out: { status: string; reason?: string } | undefined;
    void session.prompt("hi").then((o) => {
      out = o;
    });
    await settle();
    expect(model.requests).toHaveLength(1);
    clock.increment(4999);
    await settle();
    expect(out).toBeUndefined();
    expect(model.requests[0].signal.aborted).toBe(false);
    clock.increment(1);
    await settle();
    expect(model.requests[0].signal.aborted).toBe(true);
    expect(out?.status).toBe("budget_exhausted");
    expect(out?.reason).toMatch(/operationDeadlineMs 5000.*in flight.*aborted/);
    expect(events.find((e) => e.type === "turn.ended")?.at).toBe(5000);
    const end = session
      .entries()
      .find((e): e is Extract<LogEntry, { type: "attempt_end" }> => e.type === "attempt_end");
    expect(end?.error).toMatch(/operationDeadlineMs 5000/);
    expect(model.requests).toHaveLength(1);
  });

  it("the deadline counts from the operation's first request: a retry that hangs is cut at start + deadline, not at its own start + deadline", async () => {
    const { clock, model, session } = setup(
      [{ error: { status: 503 }, delayMs: 1000 }, { hang: true }],
      5000,
    );
    let out: { status: string; reason?: string } | undefined;
    void session.prompt("hi").then((o) => {
      out = o;
    });
    await settle();
    clock.increment(1000); // the 503 arrives; backoff 1000 ms (jitter factor 1)
    await settle();
    clock.increment(1000); // the retry starts at t = 2000 and hangs
    await settle();
    expect(model.requests).toHaveLength(2);
    clock.increment(2999); // t = 4999
    await settle();
    expect(out).toBeUndefined();
    clock.increment(1); // t = 5000: the operation's deadline
    await settle();
    expect(model.requests[1].signal.aborted).toBe(true);
    expect(out?.status).toBe("budget_exhausted");
  });

  it("an answer that completes before the deadline is untouched, and no timer outlives it", async () => {
    const { clock, session } = setup([{ text: "quick", delayMs: 100 }], 5000);
    let out: { status: string } | undefined;
    void session.prompt("hi").then((o) => {
      out = o;
    });
    await settle();
    clock.increment(100);
    await settle();
    expect(out?.status).toBe("completed");
    clock.increment(10_000);
    await settle();
    expect(session.messages().at(-1)).toEqual({ role: "assistant", content: "quick" });
  });
});
