// An agent's budget shared across processes through PostgreSQL (issue 40): two agents on two
// pools of one database, each a process's view, share one spend and both stop at its cap.
import { describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { postgresAgentSpend } from "../actors/postgres-agent-budget.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { postgresStore } from "../session/stores/postgres-store.ts";
import { echo } from "./session-fixtures.ts";
import { freshSchema } from "./support/postgres-server.ts";
import { usePostgres } from "./support/use-postgres.ts";

const db = usePostgres();
const { mode, stores } = db;
const STEP = { inputTokens: 200, outputTokens: 100 };

describe.skipIf(!mode.run)("postgresAgentSpend", () => {
  it("an agent budget shared by two processes stops both, a few steps over its cap in all (not sharing, they spent 9 600 of 6 000)", async () => {
    const schema = freshSchema("agentspend");
    const pools = [
      await postgresStore(db.url(), { schema }),
      await postgresStore(db.url(), { schema }),
    ];
    stores.push(...pools);
    const cap = 6000;
    let n = 0;
    const agents = pools.map((store) =>
      createAgent({
        model: scriptedModel(
          () => ({
            delayMs: 5,
            toolCalls: [{ id: `c${n++}`, name: "echo", arguments: '{"text":"x"}' }],
            usage: STEP,
          }),
          { contextWindow: 8000 },
        ),
        tools: [echo],
        budget: { maxSpendTokens: cap },
        sharedSpend: postgresAgentSpend(store.pool, { name: "team", schema }),
      }),
    );
    const sessions = await Promise.all(agents.map((a, i) => a.openSession(`p${i}`)));
    const results = await Promise.all(sessions.map((s) => s.prompt("work")));
    let total = 0;
    for (const r of results) {
      expect(r.status).toBe("budget_exhausted");
      expect(r.budget).toMatchObject({ scope: "agent", kind: "tokens", limit: cap });
      total += r.usage.inputTokens + r.usage.outputTokens;
    }
    // Each process sees the other's spend as of its last write or read (both in the background,
    // a read at each request): a few steps over the cap in all. Not sharing, they spent 9 600.
    expect(total).toBeLessThanOrEqual(cap + 6 * 300);
    await new Promise((r) => setTimeout(r, 200)); // the last charges are written in the background
    const shared = await postgresAgentSpend(pools[0]!.pool, { name: "team", schema }).read();
    expect(shared.inputTokens + shared.outputTokens).toBe(total);
    expect(shared.steps).toBe(total / 300);
    // A third process starting now is stopped before any request.
    const late = createAgent({
      model: scriptedModel([{ text: "never" }], { contextWindow: 8000 }),
      budget: { maxSpendTokens: cap },
      sharedSpend: postgresAgentSpend(pools[1]!.pool, { name: "team", schema }),
    });
    const lateSession = await late.openSession("late");
    await new Promise((r) => setTimeout(r, 50)); // its first reservation refreshes the total
    const first = await lateSession.prompt("work");
    const second = first.status === "budget_exhausted" ? first : await lateSession.prompt("work");
    expect(second).toMatchObject({ status: "budget_exhausted" });
    for (const a of [...agents, late]) await a.close();
  }, 60_000);
});
