// Concurrent sessions reserve from the agent's budget before they send (issue 40): eight
// sessions of one agent spent eight times its budget, each stop reporting `spent` at the cap.
import { describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { echo } from "./session-fixtures.ts";

const STEP = { inputTokens: 200, outputTokens: 100 };

describe("an agent budget shared by concurrent sessions", () => {
  it("eight concurrent sessions overrun the agent's budget by at most one step's worth in all, and each reports what it spent (they spent eight times it)", async () => {
    let n = 0;
    // Every response calls a tool (the turn goes on) after a short wait, so the sessions interleave.
    const model = scriptedModel(
      () => ({
        delayMs: 2,
        toolCalls: [{ id: `c${n++}`, name: "echo", arguments: '{"text":"x"}' }],
        usage: STEP,
      }),
      { contextWindow: 8000 },
    );
    const cap = 3000;
    const agent = createAgent({ model, tools: [echo], budget: { maxSpendTokens: cap } });
    const sessions = await Promise.all(
      Array.from({ length: 8 }, (_, i) => agent.openSession(`s${i}`)),
    );
    const results = await Promise.all(sessions.map((s) => s.prompt("work")));
    let total = 0;
    for (const [i, r] of results.entries()) {
      expect(r.status).toBe("budget_exhausted");
      expect(r.budget).toMatchObject({ scope: "agent", kind: "tokens", limit: cap });
      // What the session spent is what its log holds, and no more than the agent spent.
      const logged = sessions[i]!.entries().filter((e) => e.type === "assistant_message");
      expect(r.usage.inputTokens + r.usage.outputTokens).toBe(logged.length * 300);
      total += r.usage.inputTokens + r.usage.outputTokens;
    }
    expect(total).toBeLessThanOrEqual(cap + 300);
    for (const r of results) expect(r.budget!.spent).toBeLessThanOrEqual(total);
    // The stops report what was spent when each stopped, not the cap for every one.
    expect(results.some((r) => r.budget!.spent !== cap)).toBe(true);
    await agent.close();
  }, 30_000);
});
