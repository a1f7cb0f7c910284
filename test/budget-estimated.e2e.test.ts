// Caps that hold without reported usage (issue 40): budgets count Keel's estimate, marked
// estimated; implausible reported usage is replaced by the estimate with a warning.
import { describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import type { Usage } from "../contracts/messages.ts";
import { chargeOf } from "../machines/policies/budget.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { echo } from "./session-fixtures.ts";

/** Twelve steps, each a 20 000-character answer with a call, then a last answer. */
function chatty(usage?: Usage) {
  let step = 0;
  return scriptedModel(
    () =>
      step++ < 12
        ? {
            text: "w".repeat(20_000),
            toolCalls: [{ id: `c${step}`, name: "echo", arguments: '{"text":"x"}' }],
            ...(usage ? { usage } : {}),
          }
        : { text: "done", ...(usage ? { usage } : {}) },
    { name: "local" },
  );
}

describe("budgets without reported usage", () => {
  it("maxSpendTokens stops a model that reports no usage within one step of the cap (twelve steps ended completed)", async () => {
    const problems: string[] = [];
    const agent = createAgent({
      model: chatty(),
      tools: [echo],
      limits: { maxSpendTokens: 1000 },
      onProblem: (m) => problems.push(m),
    });
    const session = await agent.openSession("tokens");
    const result = await session.prompt("go");
    expect(result.status).toBe("budget_exhausted");
    expect(result.steps).toBe(1);
    expect(result.usageEstimated).toBe(true);
    // 20 000 characters out are about 5 000 tokens: the estimate, not zero.
    expect(result.usage.outputTokens).toBeGreaterThan(4000);
    const logged = session.entries().filter((e) => e.type === "assistant_message");
    expect(logged.every((e) => (e as { usageEstimated?: true }).usageEstimated)).toBe(true);
    // Warned once for the agent, not once a response or a session.
    expect((await agent.openSession("other").then((s) => s.prompt("go"))).status).toBe(
      "budget_exhausted",
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/reported no usage.*estimate/);
    await agent.close();
  });

  it("maxCost stops it too, within one step of the cap", async () => {
    const agent = createAgent({
      model: chatty(),
      tools: [echo],
      prices: { local: { input: 1, output: 1 } },
      budget: { maxCost: 0.012 },
    });
    const session = await agent.openSession("cost");
    const result = await session.prompt("go");
    expect(result.status).toBe("budget_exhausted");
    expect(result.budget).toMatchObject({ scope: "agent", kind: "cost" });
    // Step 1 costs about 0.005 (5 000 tokens out at 1 a million), step 2 about 0.010 (its
    // input holds step 1's answer): the cap is passed at step 2, by less than one step.
    expect(result.steps).toBe(2);
    expect(result.cost).toBeGreaterThanOrEqual(0.012);
    expect(result.cost).toBeLessThan(0.012 + 0.011);
    await agent.close();
  });

  it("a provider reporting prompt_tokens -100000 buys nothing: the estimate is charged and each is warned", async () => {
    const problems: string[] = [];
    const agent = createAgent({
      model: chatty({ inputTokens: -100_000, outputTokens: 1 }),
      tools: [echo],
      limits: { maxSpendTokens: 12_000 },
      onProblem: (m) => problems.push(m),
    });
    const session = await agent.openSession("negative");
    const result = await session.prompt("go");
    expect(result.status).toBe("budget_exhausted");
    expect(result.steps).toBeLessThanOrEqual(3);
    expect(result.usage.inputTokens).toBeGreaterThan(0);
    expect(problems.length).toBe(result.steps);
    expect(problems[0]).toMatch(/-100000.*not plausible/);
    await agent.close();
  });
});

describe("chargeOf", () => {
  const estimate = { inputTokens: 100, outputTokens: 20 };
  it("keeps plausible reported usage", () => {
    const reported = { inputTokens: 90, outputTokens: 25 };
    expect(chargeOf(reported, estimate, 1000)).toEqual({ usage: reported, estimated: false });
  });
  it("counts the estimate when none or all-zero usage is reported", () => {
    expect(chargeOf(undefined, estimate)).toEqual({ usage: estimate, estimated: true });
    const zero = { inputTokens: 0, outputTokens: 0 };
    expect(chargeOf(zero, estimate)).toEqual({ usage: estimate, estimated: true });
  });
  it("replaces negative, fractional and over-the-window counts, saying why", () => {
    for (const bad of [
      { inputTokens: -5, outputTokens: 3 },
      { inputTokens: 5.5, outputTokens: 3 },
      { inputTokens: 5, outputTokens: 3, cachedInputTokens: -1 },
      { inputTokens: 5_000, outputTokens: 3 },
      { inputTokens: Number.NaN, outputTokens: 3 },
    ]) {
      const c = chargeOf(bad, estimate, 1000);
      expect(c.usage).toEqual(estimate);
      expect(c.problem).toMatch(/not plausible/);
    }
  });
});
