import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresRetryBudget } from "../actors/postgres-retry-budget.ts";
import { type PostgresSessionStore, postgresStore } from "../session/postgres-store.ts";
import {
  freshSchema,
  type PostgresServer,
  postgresTestMode,
  startPostgres,
} from "./support/postgres-server.ts";

const mode = postgresTestMode();
let server: PostgresServer;
const stores: PostgresSessionStore[] = [];
beforeAll(async () => {
  if (mode.run) server = await startPostgres();
}, 60_000);
afterAll(async () => {
  for (const s of stores) await s.close();
  await server?.stop();
});

describe.skipIf(!mode.run)("postgresRetryBudget", () => {
  it("two pools share one bucket per provider: burst tokens in all, taken atomically under a concurrent rush", async () => {
    const schema = freshSchema("budget");
    const a = await postgresStore(server.url, { schema, max: 8 });
    const b = await postgresStore(server.url, { schema, max: 8 });
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
    const s = await postgresStore(server.url, { schema });
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
    const s = await postgresStore(server.url, { schema });
    stores.push(s);
    const budget = postgresRetryBudget(s.pool, { ratePerSec: 0, burst: 3, schema, reserve: 1 });
    expect(budget.tryAcquire("p")).toBe(false); // empty reserve: no wait, a refill starts
    await new Promise((r) => setTimeout(r, 100));
    expect(budget.tryAcquire("p")).toBe(true);
    await new Promise((r) => setTimeout(r, 100));
    expect(await budget.available("p")).toBeCloseTo(1, 5); // 3 − reserve taken twice
    expect(() => postgresRetryBudget(s.pool, { ratePerSec: -1, burst: 1 })).toThrow(/ratePerSec/);
  });
});
