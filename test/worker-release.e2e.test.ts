import pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { startWorker, type Worker } from "../actors/worker.ts";
import { textOf } from "../contracts/messages.ts";
import type { ModelRequest } from "../contracts/model.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { PostedInput } from "../session/store.ts";
import { type PostgresSessionStore, postgresStore } from "../session/stores/postgres-store.ts";
import { defineTool } from "../tools/define-tool.ts";
import { type Proc, sleep, startChild, until } from "./support/pg-procs.ts";
import { freshSchema } from "./support/postgres-server.ts";
import { usePostgres } from "./support/use-postgres.ts";

// Workers never leave a session with work and nobody to run it (issue 19's stalled soak), each
// way set up deterministically on a real server: gates inside store calls stand for the
// scheduling a loaded machine produces by chance. Workers run in this process (each with its own
// pool, agent and owner name, as separate processes have); sweeps are off where a test shows that
// a path loses no wake-up by itself.

const db = usePostgres();
const { mode, stores } = db;
let workers: Worker[] = [];
const procs: Proc[] = [];
afterEach(async () => {
  for (const w of workers) await w.stop().catch(() => {});
  workers = [];
});
afterAll(async () => {
  for (const p of procs) p.child.kill("SIGKILL");
});

const open = async (schema: string) => {
  const store = await postgresStore(db.url(), { schema, max: 6 });
  stores.push(store);
  return store;
};
const input = (id: string, body: string): PostedInput => ({
  id,
  lane: "next-turn",
  source: "user",
  body,
});
const consumed = async (store: PostgresSessionStore, session: string) =>
  (await store.load(session))
    .filter((e) => e.type === "inbox_consumed")
    .map((e) => (e as { inboxId: string }).inboxId);
const inLog = async (store: PostgresSessionStore, session: string) =>
  (await store.load(session))
    .filter((e) => e.type === "inbox")
    .map((e) => (e as { inboxId: string }).inboxId);
/** Resolves once `ids` are all consumed in `session`, or rejects after `ms`. */
const allConsumed = (store: PostgresSessionStore, session: string, ids: string[], ms = 10_000) =>
  until(
    async () =>
      (await consumed(store, session)).filter((id) => ids.includes(id)).length === ids.length
        ? true
        : undefined,
    ms,
    `inputs ${ids.join(", ")} of ${session} consumed`,
  );
const jobsKeyed = async (store: PostgresSessionStore, session: string) =>
  Number(
    (
      await store.pool.query(
        "SELECT count(*) AS n FROM graphile_worker._private_jobs WHERE key = $1",
        [`keel:${store.schema.replaceAll('"', "")}:${session}`],
      )
    ).rows[0].n,
  );

/** "hold" calls the `hold` tool, which returns when its call is cancelled; anything else answers "done". */
const model = () =>
  scriptedModel((request: ModelRequest) => {
    const last = request.messages[request.messages.length - 1];
    const text = last?.role === "user" ? textOf(last.content) : "";
    if (text === "hold")
      return { toolCalls: [{ id: `h${Date.now()}`, name: "hold", arguments: "{}" }] };
    return { text: "done" };
  });
const holding = new Set<string>();
const hold = defineTool({
  name: "hold",
  description: "Waits until the call is cancelled.",
  parameters: z.object({}),
  traits: { cancellable: true },
  execute: async (_args, ctx) => {
    holding.add(ctx.sessionId);
    await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
    holding.delete(ctx.sessionId);
    return "released";
  },
});

describe.skipIf(!mode.run)(
  "workers never leave a session with work and nobody to run it (PostgreSQL)",
  () => {
    it("a worker stopped mid-turn with an input queued in the log releases the lease as pending, and another worker runs that input", async () => {
      const schema = freshSchema("rel");
      const store = await open(schema);
      const first = await startWorker({
        store,
        model: model(),
        tools: [hold],
        owner: "first:1",
        leaseTtlMs: 1500,
        pollMs: 100,
        sweepMs: 200,
        shutdownGraceMs: 100,
      });
      workers.push(first);
      await store.postInput("s", input("a", "hold"));
      await until(
        async () => (holding.has("s") ? true : undefined),
        10_000,
        "the hold call running",
      );
      await store.postInput("s", input("b", "after the hold"));
      // The owner moves b into its log (taken), queued behind the running turn.
      await until(
        async () => ((await inLog(store, "s")).includes("b") ? true : undefined),
        10_000,
        "b in the log",
      );
      await first.stop(); // what SIGTERM does: the turn is interrupted, the lease released
      const lease = await store.readLease("s");
      expect(lease).toMatchObject({ owner: "first:1", released: true, pending: true });
      expect(await store.postedInputs("s")).toEqual([]); // b is the log's now: only `pending` says it waits
      workers.push(
        await startWorker({
          store: await open(schema),
          model: model(),
          tools: [hold],
          owner: "second:2",
          pollMs: 100,
          sweepMs: 200,
        }),
      );
      await allConsumed(store, "s", ["b"]);
    }, 40_000);

    it("a runner that takes over a crashed owner's session and closes it without resuming releases the lease as pending, and a worker runs the queued input", async () => {
      const schema = freshSchema("crash");
      const store = await open(schema);
      // A runner process owns c; its turn waits in a tool; a second input queues in its log.
      const crashed = startChild(["runner", db.url(), schema, "c"], { KEEL_TEST_SESSION: "c" });
      procs.push(crashed);
      await crashed.waitFor((l) => l.ev === "role" && l.role === "owner");
      await store.postInput("c", input("c1", "do wait60000"));
      await crashed.waitFor((l) => l.ev === "waiting");
      await store.postInput("c", input("c2", "after the crash"));
      await until(
        async () => ((await inLog(store, "c")).includes("c2") ? true : undefined),
        10_000,
        "c2 in the log",
      );
      crashed.child.kill("SIGKILL");
      await crashed.exited;
      // Another process opens c: it takes over at once (its host:pid holder is gone), recovers
      // (the tool call is marked unknown) and starts continuing the cut turn; its close cancels
      // that turn, and the input queued behind it stays queued (a close does not run it).
      const reader = createAgent({ model: model(), store, lease: { ttlMs: 1500, pollMs: 100 } });
      const session = await reader.openSession("c");
      expect(session.role).toBe("owner");
      await reader.close();
      expect(await store.readLease("c")).toMatchObject({ released: true, pending: true });
      workers.push(
        await startWorker({
          store: await open(schema),
          model: model(),
          tools: [hold],
          owner: "worker:3",
          pollMs: 100,
          sweepMs: 200,
        }),
      );
      await allConsumed(store, "c", ["c1", "c2"]);
    }, 40_000);

    for (const where of [
      "another worker, which finds the lease still held",
      "the releasing worker, still running the session",
    ] as const) {
      it(`an input posted while its owner releases the session runs without a sweep, though its job went to ${where}`, async () => {
        const schema = freshSchema("wake");
        const store = await open(schema);
        let armed = true;
        let secondUp: () => void = () => {};
        const secondReady = new Promise<void>((r) => {
          secondUp = r;
        });
        if (!where.startsWith("another")) secondUp();
        const poster = await open(schema);
        const releasing: PostgresSessionStore = {
          ...store,
          async releaseLease(lease, options) {
            if (armed && lease.sessionId === "r") {
              armed = false;
              await secondReady;
              await poster.postInput("r", input("late", "late input")); // its job, queued now, ends without running it
              await until(
                async () => ((await jobsKeyed(store, "r")) === 0 ? true : undefined),
                10_000,
                "the late input's job done",
              );
            }
            return store.releaseLease(lease, options);
          },
        };
        const sweepless = {
          leaseTtlMs: 1500,
          pollMs: 100,
          sweepMs: 1_000_000_000,
          model: model(),
          tools: [hold],
        };
        workers.push(
          await startWorker({
            ...sweepless,
            store: releasing,
            owner: "first:1",
            concurrency: where.startsWith("another") ? 1 : 2,
          }),
        );
        await store.postInput("r", input("early", "early input"));
        if (where.startsWith("another")) {
          await until(
            async () => ((await store.readLease("r"))?.owner === "first:1" ? true : undefined),
            10_000,
            "first owning r",
          );
          workers.push(
            await startWorker({
              ...sweepless,
              store: await open(schema),
              owner: "second:2",
              concurrency: 2,
            }),
          );
          secondUp();
        }
        await allConsumed(store, "r", ["early", "late"]);
        expect(armed).toBe(false);
      }, 40_000);
    }

    it("a job a SIGKILLed worker left locked (graphile-worker keeps it for hours) does not hold its session back: the sweep's job replaces its key", async () => {
      const schema = freshSchema("locked");
      const store = await open(schema);
      const installer = await startWorker({
        store,
        model: model(),
        tools: [hold],
        owner: "installer:1",
      });
      await installer.stop(); // the trigger stays: inputs enqueue jobs
      await store.postInput("k", input("k1", "hello"));
      // The state a worker killed after taking the job and before taking the lease leaves behind.
      const locked = await store.pool.query(
        "UPDATE graphile_worker._private_jobs SET locked_at = now(), locked_by = 'dead-worker', attempts = 1 WHERE key = $1 RETURNING id",
        [`keel:${schema}:k`],
      );
      expect(locked.rowCount).toBe(1);
      workers.push(
        await startWorker({
          store: await open(schema),
          model: model(),
          tools: [hold],
          owner: "live:2",
          pollMs: 100,
          sweepMs: 200,
        }),
      );
      await allConsumed(store, "k", ["k1"]);
      // The input is consumed mid-turn; the worker releases the lease when the turn has ended.
      await until(
        async () => ((await store.readLease("k"))?.released ? true : undefined),
        10_000,
        "k's lease released",
      );
      expect(await store.readLease("k")).toMatchObject({ released: true, pending: false });
      // add_job took the key off the locked job and spent its attempts: it never runs again.
      const dead = await store.pool.query(
        "SELECT key, attempts = max_attempts AS spent FROM graphile_worker._private_jobs WHERE id = $1",
        [locked.rows[0].id],
      );
      expect(dead.rows).toEqual([{ key: null, spent: true }]);
    }, 40_000);

    it("sweeps run one at a time, leave a job that already waits as it is, and enqueue what they find in one transaction (one NOTIFY)", async () => {
      // Under CPU starvation leases are lost and many sessions need a runner at once. Sweeps that
      // overlapped, each re-adding one job per session (a transaction with a NOTIFY, which
      // PostgreSQL commits one at a time), queued thousands of requests in a worker's pool ahead of
      // its lease renewals and graphile-worker's job fetches: nothing ran (issue 19's soak).
      const schema = freshSchema("sweep");
      const store = await open(schema);
      let inSweep = 0;
      let maxInSweep = 0;
      let sweeps = 0;
      const slowSweeps: PostgresSessionStore = {
        ...store,
        async sessionsNeedingRunner(limit) {
          sweeps++;
          maxInSweep = Math.max(maxInSweep, ++inSweep);
          try {
            await new Promise((r) => setTimeout(r, 120)); // a loaded server: slower than the interval
            return await store.sessionsNeedingRunner(limit);
          } finally {
            inSweep--;
          }
        },
      };
      workers.push(
        await startWorker({
          store: slowSweeps,
          model: model(),
          tools: [hold],
          owner: "busy:1",
          concurrency: 1, // held by one session: the others' jobs wait
          pollMs: 100,
          sweepMs: 20,
          shutdownGraceMs: 100,
        }),
      );
      await store.postInput("busy", input("b0", "hold"));
      await until(async () => (holding.has("busy") ? true : undefined), 10_000, "busy holding");
      const ids = Array.from({ length: 20 }, (_, i) => `q${i}`);
      for (const id of ids) await store.postInput(id, input(`${id}-in`, "hello"));
      const listener = new pg.Client({ connectionString: db.url() });
      await listener.connect();
      let notified = 0;
      listener.on("notification", (n) => {
        if (n.channel === "jobs:insert") notified++;
      });
      await listener.query(`LISTEN "jobs:insert"`);
      const jobs = async () =>
        (
          await store.pool.query<{ key: string; revision: number; locked: boolean }>(
            "SELECT key, revision, locked_at IS NOT NULL AS locked FROM graphile_worker.jobs WHERE key LIKE $1 ORDER BY key",
            [`keel:${schema}:q%`],
          )
        ).rows;
      try {
        const before = sweeps;
        await sleep(1000);
        expect(sweeps - before).toBeGreaterThanOrEqual(3); // every session below needed a runner each time
        expect(maxInSweep).toBe(1);
        expect(notified).toBe(0); // their jobs wait: no sweep rewrote one
        expect((await jobs()).map((j) => j.revision)).toEqual(ids.map(() => 0));
        // Locked by a worker that died: not waiting. The next sweep adds all 20 at once.
        await store.pool.query(
          "UPDATE graphile_worker._private_jobs SET locked_at = now(), locked_by = 'dead-worker' WHERE key LIKE $1",
          [`keel:${schema}:q%`],
        );
        await until(
          async () => ((await jobs()).filter((j) => !j.locked).length === 20 ? true : undefined),
          10_000,
          "20 new jobs",
        );
        await sleep(300);
        expect(notified).toBe(1);
        expect((await jobs()).filter((j) => j.key !== null && !j.locked)).toHaveLength(20);
      } finally {
        await listener.end();
      }
    }, 40_000);
  },
);
