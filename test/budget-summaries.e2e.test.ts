// Every request counts (issue 40): a compaction's summary requests are charged to the turn and
// the wider budgets, and recorded on the compaction entry so a reopened session counts them.
import { describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import type { Message } from "../contracts/messages.ts";
import type { ModelRequest } from "../contracts/model.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { spendOf } from "../session/spend.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { echo } from "./session-fixtures.ts";

const asksSummary = (messages: readonly Message[]) => {
  const last = messages.at(-1);
  return (
    last?.role === "user" &&
    last.content.some((p) => p.type === "text" && p.text.startsWith("Summarise the conversation"))
  );
};
const isSummary = (r: ModelRequest) => asksSummary(r.messages);
const SUMMARY_USAGE = { inputTokens: 1900, outputTokens: 200 };

/**
 * Answers of 400 characters with no usage (so the budget estimates the context and compacts);
 * a summary's request reports SUMMARY_USAGE.
 */
const model = () =>
  scriptedModel(
    (request) =>
      isSummary(request)
        ? { text: "The user asked questions.", usage: SUMMARY_USAGE }
        : { text: `reply ${"r".repeat(400)}` },
    { contextWindow: 2000, name: "m" },
  );

describe("a compaction's summary requests are charged", () => {
  it("an automatic compaction's summary is recorded on its entry, and a reopened session's spend counts it", async () => {
    const store = memoryStore();
    const agent = createAgent({
      model: model(),
      store,
      context: { keepRecentTokens: 100 },
      prices: { m: { input: 1, output: 1 } },
    });
    const session = await agent.openSession("auto");
    for (let i = 0; i < 6; i++) await session.prompt(`question ${i} ${"q".repeat(600)}`);
    const entries = session.entries();
    const compaction = entries.find((e) => e.type === "compaction") as {
      usage?: { inputTokens: number };
      cost?: number;
    };
    expect(compaction.usage).toEqual(SUMMARY_USAGE);
    expect(compaction.cost).toBeCloseTo(2100 / 1_000_000, 12);
    let responses = 0;
    for (const e of entries) {
      if (e.type === "assistant_message") responses += e.usage!.inputTokens + e.usage!.outputTokens;
    }
    const spent = spendOf(entries);
    const compactions = entries.filter((e) => e.type === "compaction").length;
    expect(spent.inputTokens + spent.outputTokens).toBe(responses + 2100 * compactions);
    await agent.close();
  }, 30_000);

  it("session.compact() charges the session budget in this process", async () => {
    const run = async (budget?: { maxSpendTokens: number }) => {
      const agent = createAgent({ model: model() });
      const session = await agent.openSession("manual", budget ? { budget } : {});
      for (let i = 0; i < 3; i++) await session.prompt(`question ${i} ${"q".repeat(300)}`);
      const spent = spendOf(session.entries());
      return { agent, session, own: spent.inputTokens + spent.outputTokens };
    };
    // A dry run measures what the three prompts spend (the model and its estimate are deterministic).
    const dry = await run();
    await dry.agent.close();
    const { agent, session, own } = await run({ maxSpendTokens: dry.own + 1000 });
    expect(own).toBe(dry.own);
    expect((await session.compact({ keepRecentTokens: 50 })).ok).toBe(true);
    const next = await session.prompt("and now?");
    expect(next).toMatchObject({ status: "budget_exhausted", steps: 0 });
    expect(next.budget).toMatchObject({ scope: "session", kind: "tokens" });
    expect(next.budget!.spent).toBe(own + 2100);
    await agent.close();
  });

  it("within a turn, the summary counts in the turn's own cap (a session capped at 20 000 was billed 40 000)", async () => {
    // Each turn: a call, then an answer, ~110 output tokens each; a summary reports 1 500 out.
    let n = 0;
    const m = scriptedModel(
      (request) =>
        isSummary(request)
          ? { text: "The user asked questions.", usage: { inputTokens: 100, outputTokens: 1500 } }
          : n++ % 2 === 0
            ? { toolCalls: [{ id: `c${n}`, name: "echo", arguments: '{"text":"x"}' }] }
            : { text: `reply ${"r".repeat(400)}` },
      { contextWindow: 2000, name: "m" },
    );
    const agent = createAgent({
      model: m,
      tools: [echo],
      context: { keepRecentTokens: 100 },
      limits: { maxOutputTokens: 1000 },
    });
    const session = await agent.openSession("turn");
    let stopped: Awaited<ReturnType<typeof session.prompt>> | undefined;
    for (let i = 0; i < 8 && !stopped; i++) {
      const r = await session.prompt(`question ${i} ${"q".repeat(600)}`);
      if (r.status !== "completed") stopped = r;
    }
    expect(stopped?.status).toBe("budget_exhausted");
    expect(stopped?.budget).toMatchObject({ scope: "turn", kind: "outputTokens" });
    expect(stopped!.budget!.spent).toBeGreaterThanOrEqual(stopped!.usage.outputTokens + 1500);
    await agent.close();
  }, 30_000);
});
