import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { postgresProviderSlots } from "../actors/postgres-provider-slots.ts";
import { SlotLostError } from "../actors/provider-slots.ts";
import {
  type FakeOpenAIServer,
  type FakeReply,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";
import { freshSchema } from "./support/postgres-server.ts";
import { usePostgres } from "./support/use-postgres.ts";

const CHILD = fileURLToPath(new URL("./support/slots-child.ts", import.meta.url));
// Before this file's own afterAll: hooks run as a stack, so the children and pools end first.
const db = usePostgres();
const { mode } = db;
const children: ChildProcess[] = [];
const pools: pg.Pool[] = [];
afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  for (const p of pools) await p.end().catch(() => {});
});

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** A child running test/support/slots-child.ts; resolves lines it prints as JSON. */
function child(args: string[], env: Record<string, string> = {}) {
  const proc = spawn(process.execPath, ["--import", "tsx", CHILD, ...args], {
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  children.push(proc);
  let stderr = "";
  proc.stderr!.on("data", (d) => {
    stderr = (stderr + d).slice(-4000);
  });
  const lines: Record<string, unknown>[] = [];
  const waiters: { ev: string; resolve: (l: Record<string, unknown>) => void }[] = [];
  createInterface({ input: proc.stdout! }).on("line", (text) => {
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text);
    } catch {
      return;
    }
    lines.push(line);
    for (const w of [...waiters])
      if (w.ev === line.ev) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
  });
  return {
    proc,
    next: (ev: string, timeoutMs = 60_000) =>
      new Promise<Record<string, unknown>>((resolve, reject) => {
        const found = lines.find((l) => l.ev === ev);
        if (found) return resolve(found);
        const timer = setTimeout(
          () => reject(new Error(`child printed no ${ev} in ${timeoutMs} ms; stderr: ${stderr}`)),
          timeoutMs,
        );
        waiters.push({
          ev,
          resolve: (l) => {
            clearTimeout(timer);
            resolve(l);
          },
        });
      }),
  };
}

const slowAnswer = (text: string, ms: number): FakeReply => {
  const [first, ...rest] = streamReply({ text });
  return [first!, { type: "sleep", ms }, ...rest];
};

describe.skipIf(!mode.run)(
  "provider slots shared through PostgreSQL (real child processes)",
  () => {
    it("three processes that start 40 sessions each together never have more than the shared limit in flight at the loopback provider", async () => {
      const schema = freshSchema("slots");
      const LIMIT = 3;
      const PER = 40;
      server = await startFakeOpenAIServer();
      for (let i = 0; i < 3 * PER; i++) server.enqueue(slowAnswer(`answer ${i}`, 40));
      const procs = [0, 1, 2].map(() =>
        child(["run", db.url(), schema, server!.baseURL, String(PER), String(LIMIT)]),
      );
      await Promise.all(procs.map((p) => p.next("ready")));
      for (const p of procs) p.proc.stdin!.write("go\n");
      const done = await Promise.all(procs.map((p) => p.next("done", 120_000)));
      expect(done.map((d) => d.completed)).toEqual([PER, PER, PER]);
      expect(server.requests).toHaveLength(3 * PER);
      expect(server.maxInFlight).toBeLessThanOrEqual(LIMIT);
      expect(server.maxInFlight).toBeGreaterThan(0);
      expect(done.reduce((n, d) => n + Number(d.queued), 0)).toBeGreaterThan(0);
    }, 180_000);

    it("a killed process's slots come back when their lease expires, and a waiter then gets one", async () => {
      const schema = freshSchema("slots");
      const LEASE = 1500;
      const holder = child(["hold", db.url(), schema, "2", "2"], {
        KEEL_TEST_LEASE: String(LEASE),
      });
      await holder.next("held");
      const pool = new pg.Pool({ connectionString: db.url(), max: 3 });
      pool.on("error", () => {});
      pools.push(pool);
      const slots = postgresProviderSlots(pool, {
        limits: { openai: 2 },
        schema,
        leaseMs: LEASE,
        pollMs: 50,
      });
      expect(await slots.held("openai")).toBe(2);
      // Renewed while the holder lives: still held after more than a lease.
      await new Promise((r) => setTimeout(r, LEASE * 1.5));
      expect(await slots.held("openai")).toBe(2);
      const positions: number[] = [];
      const waiting = slots.acquire("openai", {
        signal: new AbortController().signal,
        onQueued: (n) => positions.push(n),
      });
      let got = false;
      void waiting.then(() => {
        got = true;
      });
      await new Promise((r) => setTimeout(r, 300));
      expect(got).toBe(false);
      expect(positions).toEqual([1]);
      holder.proc.kill("SIGKILL");
      const killedAt = Date.now();
      const release = await waiting;
      // It came back by expiry, not at once: the dead process never released it.
      expect(Date.now() - killedAt).toBeGreaterThan(200);
      expect(await slots.held("openai")).toBe(1);
      release();
      await new Promise((r) => setTimeout(r, 200));
      expect(await slots.held("openai")).toBe(0);
      await slots.close();
    }, 60_000);

    it("a process stopped past its lease loses its slots when it resumes: its requests end instead of running over the limit", async () => {
      const schema = freshSchema("slots");
      const LEASE = 900;
      const holder = child(["hold", db.url(), schema, "2", "2"], {
        KEEL_TEST_LEASE: String(LEASE),
      });
      await holder.next("held");
      const pool = new pg.Pool({ connectionString: db.url(), max: 3 });
      pool.on("error", () => {});
      pools.push(pool);
      const slots = postgresProviderSlots(pool, {
        limits: { openai: 2 },
        schema,
        leaseMs: LEASE,
        pollMs: 50,
      });
      holder.proc.kill("SIGSTOP"); // stopped past its lease: its rows expire
      await new Promise((r) => setTimeout(r, LEASE * 1.6));
      const signal = new AbortController().signal;
      const mine = [
        await slots.acquire("openai", { signal }),
        await slots.acquire("openai", { signal }),
      ];
      expect(await slots.held("openai")).toBe(2);
      holder.proc.kill("SIGCONT");
      // Both of its requests are told their slot is lost, within a renewal period or so.
      const resumedAt = Date.now();
      const lost = await holder.next("lost", 5_000);
      expect(lost.message).toMatch(/provider slot was lost/);
      await new Promise((r) => setTimeout(r, 300));
      expect(Date.now() - resumedAt).toBeLessThan(LEASE * 2);
      // Our rows are still ours: the resumed process renewed none of them.
      expect(await slots.held("openai")).toBe(2);
      for (const release of mine) release();
      await slots.close();
      holder.proc.kill("SIGKILL");
    }, 60_000);

    it("an aborted waiter leaves the queue at once and takes no row; the next waiter is served when a slot frees", async () => {
      const schema = freshSchema("slots");
      const pool = new pg.Pool({ connectionString: db.url(), max: 4 });
      pool.on("error", () => {});
      pools.push(pool);
      const slots = postgresProviderSlots(pool, { limits: { p: 1 }, schema, pollMs: 50 });
      const first = await slots.acquire("p", { signal: new AbortController().signal });
      const ctl = new AbortController();
      const aborted = slots.acquire("p", { signal: ctl.signal });
      const next = slots.acquire("p", { signal: new AbortController().signal });
      await new Promise((r) => setTimeout(r, 150));
      ctl.abort(new Error("gone"));
      await expect(aborted).rejects.toThrow("gone");
      expect(await slots.held("p")).toBe(1);
      first();
      const second = await next;
      expect(await slots.held("p")).toBe(1);
      second();
      second(); // once
      await new Promise((r) => setTimeout(r, 150));
      expect(await slots.held("p")).toBe(0);
      await slots.close();
      expect(() => postgresProviderSlots(pool, { limits: { p: 0 } })).toThrow(
        /p must be an integer/,
      );
    }, 30_000);

    it("leaseMs and pollMs of 1e10 are clamped to 2^31 − 1 ms with a warning: a holder and a waiter do not query the database hundreds of times a second", async () => {
      const schema = freshSchema("slots");
      let queries = 0;
      class CountingPool extends pg.Pool {
        override query(...args: unknown[]): never {
          queries++;
          return (super.query as (...a: unknown[]) => never)(...args);
        }
      }
      const pool = new CountingPool({ connectionString: db.url(), max: 4 });
      pool.on("error", () => {});
      pools.push(pool);
      const warnings: string[] = [];
      const onWarning = (w: Error) => warnings.push(w.message);
      process.on("warning", onWarning);
      const slots = postgresProviderSlots(pool, {
        limits: { p: 1 },
        schema,
        leaseMs: 1e10,
        pollMs: 1e10,
      });
      await new Promise((r) => setImmediate(r));
      process.off("warning", onWarning);
      expect(warnings.join("\n")).toMatch(/postgresProviderSlots: `leaseMs` of 10000000000 ms/);
      expect(warnings.join("\n")).toMatch(/postgresProviderSlots: `pollMs` of 10000000000 ms/);
      const held = await slots.acquire("p", { signal: new AbortController().signal });
      const ctl = new AbortController();
      const waiting = slots.acquire("p", { signal: ctl.signal }).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 100));
      const before = queries;
      await new Promise((r) => setTimeout(r, 1000));
      // Before: the renewal (every leaseMs / 3) and the poll fired every millisecond.
      expect(queries - before).toBeLessThan(10);
      ctl.abort(new Error("done"));
      await waiting;
      held();
      await slots.close();
    }, 30_000);
  },
);

describe("a provider slot lost while its request runs", () => {
  it("ends that attempt as a retryable failure, not a cancel: the turn retries under a new slot and completes", async () => {
    const { createAgent } = await import("../actors/agent.ts");
    const { scriptedModel } = await import("../providers/scripted-model.ts");
    const losers: AbortController[] = [];
    // Slots whose first grant is lost while its stream runs (as a stopped process's would be).
    const slots = {
      limitOf: () => 1,
      acquire: async () => {
        const lost = new AbortController();
        losers.push(lost);
        if (losers.length === 1) setTimeout(() => lost.abort(new SlotLostError("lost (test)")), 50);
        return Object.assign(() => {}, { lost: lost.signal });
      },
    };
    const model = scriptedModel([{ text: "never finished", delayMs: 2_000 }, { text: "retried" }]);
    const agent = createAgent({ model, concurrency: slots, retry: { baseDelayMs: 1 } });
    const result = await agent.session("lost").prompt("hi");
    expect(result).toMatchObject({ status: "completed", text: "retried" });
    expect(losers).toHaveLength(2);
    await agent.close();
  });
});
