import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { builtinTools } from "../tools/builtin/index.ts";
import { addWorkspace } from "./support/acceptance-fixture.ts";
import { ignoresWiderBudgetsTurnMachine } from "./support/mutants/turn.mutants.ts";

const testsCheck = { name: "tests", command: "node add.test.mjs", files: ["add.test.mjs"] };
const USAGE = { inputTokens: 300, outputTokens: 100 };

/**
 * A model that never fixes anything: every turn reads a file (one step), then answers (a second
 * step); each response reports 400 tokens. So a turn spends 800 tokens.
 */
function stubbornModel() {
  let n = 0;
  return scriptedModel(() => {
    n++;
    return n % 2 === 1
      ? {
          toolCalls: [{ id: `c${n}`, name: "read_file", arguments: '{"path":"add.mjs"}' }],
          usage: USAGE,
        }
      : { text: `answer ${n / 2}: it should work now`, usage: USAGE };
  });
}

async function acceptanceLoop(turnMachine?: typeof ignoresWiderBudgetsTurnMachine) {
  const ws = addWorkspace();
  const model = stubbornModel();
  const agent = createAgent({
    model,
    tools: builtinTools({ root: ws }),
    acceptance: { workspace: ws, checks: [testsCheck], until: "passed", maxRounds: 3 },
    // 2 000 tokens: a turn spends 800, so one round never reaches it; the third turn does.
    promptBudget: { maxSpendTokens: 2000 },
    ...(turnMachine ? { turnMachine } : {}),
  });
  const session = await agent.openSession("loop");
  const events: AgentEvent[] = [];
  session.subscribe((e) => events.push(e));
  const result = await session.prompt("fix add()");
  await agent.close();
  return { result, events, requests: model.requests.length };
}

describe("budgets with a scope", () => {
  it("an acceptance loop of three rounds stops at a prompt token budget one round would not reach, between steps, and its result names that budget", async () => {
    const { result, events, requests } = await acceptanceLoop();
    // Turn 1 (800), round 1 (1 600), round 2's first step (2 000): stopped before its second.
    expect(requests).toBe(5);
    expect(result).toMatchObject({
      status: "budget_exhausted",
      acceptance: "failed",
      rounds: 2,
      budget: { scope: "prompt", kind: "tokens", limit: 2000, spent: 2000, defaulted: false },
    });
    expect(result.reason).toBe("prompt budget: maxSpendTokens (2000) reached: 2000 spent");
    expect(result.usage).toEqual({ inputTokens: 1500, outputTokens: 500 });
    const ended = events.filter((e) => e.type === "turn.ended");
    expect(ended.map((e) => (e as { status: string }).status)).toEqual([
      "completed",
      "completed",
      "budget_exhausted",
    ]);
    expect(ended.at(-1)).toMatchObject({ budget: { scope: "prompt", kind: "tokens" } });
  });

  it("the chart that forgets the wider budgets at each round runs all three rounds (the e2e catches it)", async () => {
    const { result, requests } = await acceptanceLoop(ignoresWiderBudgetsTurnMachine);
    expect(requests).toBe(8);
    expect(result.status).toBe("completed");
    expect(result.budget).toBeUndefined();
  });

  it("a reopened session continues its session budget from its log (SQLite) instead of starting afresh", async () => {
    const db = path.join(mkdtempSync(path.join(tmpdir(), "keel-budget-")), "s.db");
    const open = () =>
      createAgent({
        model: scriptedModel(() => ({ text: "ok", usage: USAGE })),
        store: sqliteStore(db),
      });
    const first = open();
    const s1 = await first.openSession("kept", { budget: { maxSpendTokens: 1000 } });
    for (const text of ["one", "two", "three"]) {
      // A one-step answer ends naturally: the budget stops work between steps, not an answer.
      expect((await s1.prompt(text)).status).toBe("completed"); // 400, 800, 1 200
    }
    await first.close();

    const second = open();
    const s2 = await second.openSession("kept", { budget: { maxSpendTokens: 1000 } });
    // Already spent before the reopening: the prompt sends no request at all.
    const refused = await s2.prompt("four");
    expect(refused).toMatchObject({
      status: "budget_exhausted",
      steps: 0,
      budget: { scope: "session", kind: "tokens", limit: 1000, spent: 1200, defaulted: false },
    });
    expect(refused.reason).toBe("session budget: maxSpendTokens (1000) reached: 1200 spent");
    const ends = s2
      .entries()
      .filter((e): e is LogEntry & { type: "turn_end" } => e.type === "turn_end");
    expect(ends.at(-1)).toMatchObject({ budget: { scope: "session", kind: "tokens" } });
    await second.close();
  });

  it("the agent's budget is summed across its sessions", async () => {
    const agent = createAgent({
      model: scriptedModel(() => ({ text: "ok", usage: USAGE })),
      budget: { maxSteps: 3 },
    });
    const a = await agent.openSession("a");
    const b = await agent.openSession("b");
    for (const [s, text] of [
      [a, "1"],
      [b, "2"],
      [a, "3"],
    ] as const) {
      expect((await s.prompt(text)).status).toBe("completed");
    }
    const refused = await b.prompt("4");
    expect(refused).toMatchObject({
      status: "budget_exhausted",
      steps: 0,
      budget: { scope: "agent", kind: "steps", limit: 3, spent: 3 },
    });
    await agent.close();
  });

  it("cost comes from the embedder's price table: each response's usage event and the result carry it, and a cost cap stops the next prompt", async () => {
    const agent = createAgent({
      model: scriptedModel(
        () => ({
          text: "ok",
          usage: { inputTokens: 1_000_000, outputTokens: 100_000, cachedInputTokens: 500_000 },
        }),
        { name: "m1" },
      ),
      // Per million tokens: 500 000 fresh × 2 + 500 000 cached × 0.5 + 100 000 × 10 = 2.25.
      prices: { m1: { input: 2, output: 10, cachedInput: 0.5 } },
      budget: { maxCost: 4 },
    });
    const session = await agent.openSession("c");
    const costs: number[] = [];
    session.subscribe((e) => {
      if (e.type === "message.committed" && e.cost !== undefined) costs.push(e.cost);
    });
    expect((await session.prompt("a")).cost).toBeCloseTo(2.25, 10);
    // The next request is as large as the last (the provider measured it): another 2.25 that
    // 4 cannot cover, so it is not sent (the agent's budget is reserved before each request).
    const two = await session.prompt("b");
    expect(two).toMatchObject({
      status: "budget_exhausted",
      steps: 0,
      budget: { scope: "agent", kind: "cost", limit: 4 },
    });
    expect(two.budget?.spent).toBeCloseTo(2.25, 10);
    expect(costs).toEqual([2.25]);
    const entries = session.entries().filter((e) => e.type === "assistant_message");
    expect(entries.map((e) => (e as { cost?: number }).cost)).toEqual([2.25]);
    await agent.close();
  });

  it("a cost cap for a model missing from the price table is refused at configuration, saying what to pass", () => {
    const model = scriptedModel([], { name: "m2" });
    expect(() => createAgent({ model, budget: { maxCost: 1 } })).toThrow(
      /maxCost.*no entry for model "m2".*prices/,
    );
    expect(() =>
      createAgent({ model, prices: { m1: { input: 1, output: 1 } }, limits: { maxCost: 1 } }),
    ).toThrow(/no entry for model "m2"/);
    const agent = createAgent({ model });
    expect(() => agent.session("x", { budget: { maxCost: 1 } })).toThrow(/agent\.session.*"m2"/);
    expect(() => createAgent({ model, promptBudget: { maxTokens: 5 } as never })).toThrow(
      /unknown field `maxTokens`/,
    );
  });

  it("a default, not the embedder, that stops a run is named as one", async () => {
    const agent = createAgent({
      model: scriptedModel(() => ({ toolCalls: [{ id: "c", name: "nope", arguments: "{}" }] })),
      loopGuard: false,
    });
    const session = await agent.openSession("d");
    const result = await session.prompt("loop forever");
    expect(result).toMatchObject({
      status: "budget_exhausted",
      steps: 50,
      budget: { scope: "turn", kind: "steps", limit: 50, defaulted: true },
    });
    expect(result.reason).toMatch(/maxSteps \(50\) reached \(Keel's default turn maxSteps/);
    await agent.close();
  });
});
