import { describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { postgresRetryBudget } from "../actors/postgres-retry-budget.ts";
import type { RetryBudget } from "../actors/retry-budget.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { postgresStore } from "../session/stores/postgres-store.ts";
import { freshSchema } from "./support/postgres-server.ts";
import { usePostgres } from "./support/use-postgres.ts";

const db = usePostgres();
const { mode, stores } = db;

describe.skipIf(!mode.run)("postgresRetryBudget", () => {
  it("two pools share one bucket per provider: burst tokens in all, taken atomically under a concurrent rush", async () => {
    const schema = freshSchema("budget");
    const a = await postgresStore(db.url(), { schema, max: 8 });
    const b = await postgresStore(db.url(), { schema, max: 8 });
    stores.push(a, b);
    const ba = postgresRetryBudget(a.pool, { ratePerSec: 0, burst: 7, schema });
    const bb = postgresRetryBudget(b.pool, { ratePerSec: 0, burst: 7, schema });
    const taken = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? ba : bb).take("openai")),
    );
    expect(taken.filter(Boolean)).toHaveLength(7);
    expect(await ba.take("anthropic")).toBe(true); // one row per provider
    expect(await bb.available("openai")).toBeCloseTo(0, 5);
  });

  it("refills by the database's time at ratePerSec, never above burst", async () => {
    const schema = freshSchema("budget");
    const s = await postgresStore(db.url(), { schema });
    stores.push(s);
    const budget = postgresRetryBudget(s.pool, { ratePerSec: 20, burst: 2, schema });
    expect(await budget.take("p", 2)).toBe(true);
    expect(await budget.take("p")).toBe(false);
    await new Promise((r) => setTimeout(r, 120)); // ≈ 2.4 tokens' worth, capped at 2
    expect(await budget.available("p")).toBeCloseTo(2, 5);
    expect(await budget.take("p", 2)).toBe(true);
  });

  it("tryAcquire answers synchronously from a local reserve taken from the shared row", async () => {
    const schema = freshSchema("budget");
    const s = await postgresStore(db.url(), { schema });
    stores.push(s);
    const budget = postgresRetryBudget(s.pool, { ratePerSec: 0, burst: 3, schema, reserve: 1 });
    expect(budget.tryAcquire("p")).toBe(false); // empty reserve: no wait, a refill starts
    await new Promise((r) => setTimeout(r, 100));
    expect(budget.tryAcquire("p")).toBe(true);
    await new Promise((r) => setTimeout(r, 100));
    expect(await budget.available("p")).toBeCloseTo(1, 5); // 3 − reserve taken twice
    expect(() => postgresRetryBudget(s.pool, { ratePerSec: -1, burst: 1 })).toThrow(/ratePerSec/);
  });

  it("a process's first retry on a provider is allowed: the reserve is filled when the request starts, not when it fails", async () => {
    const schema = freshSchema("budget");
    const s = await postgresStore(db.url(), { schema });
    stores.push(s);
    const run = async (retryBudget: RetryBudget) => {
      // The failure arrives 1.5 s after the request starts: ample time for one statement on loopback,
      // even on a loaded machine.
      const model = scriptedModel([{ delayMs: 1500, error: { status: 503 } }, { text: "ok" }]);
      const agent = createAgent({ model, retryBudget, retry: { baseDelayMs: 1 } });
      try {
        return (await agent.session().prompt("hi")).status;
      } finally {
        await agent.close();
      }
    };
    const budget = postgresRetryBudget(s.pool, { ratePerSec: 0, burst: 5, schema });
    expect(await run(budget)).toBe("completed");
    // Without warm (an answer from an empty reserve), the same first retry is refused.
    const cold = postgresRetryBudget(s.pool, { ratePerSec: 0, burst: 5, schema: schema });
    expect(await run({ tryAcquire: cold.tryAcquire })).toBe("budget_exhausted");
    budget.warm?.("p");
    budget.warm?.("p"); // a second call while the first fill runs takes nothing more
    for (let i = 0; i < 100 && (await budget.available("p")) > 4.5; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 200));
    expect(await budget.available("p")).toBeCloseTo(4, 5);
  });
});
