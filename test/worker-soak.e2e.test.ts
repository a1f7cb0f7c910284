import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LogEntry } from "../session/entries.ts";
import { type PostgresSessionStore, postgresStore } from "../session/stores/postgres-store.ts";
import { type Proc, sleep, startChild, until } from "./support/pg-procs.ts";
import {
  freshSchema,
  type PostgresServer,
  postgresTestMode,
  startPostgres,
} from "./support/postgres-server.ts";

// KEEL_SOAK=full: 300 sessions (the soak); default 30 so the suite stays under a minute.
// KEEL_SOAK_SEED replays a run: the same sessions, inputs, kill times and victims.
const FULL = process.env.KEEL_SOAK === "full";
const SESSIONS = FULL ? 300 : 30;
const SEED = Number(process.env.KEEL_SOAK_SEED ?? Date.now() % 1_000_000);

/** mulberry32: a small seeded PRNG, so a failing run replays from its printed seed. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const mode = postgresTestMode();
let server: PostgresServer;
let store: PostgresSessionStore;
const workers: Proc[] = [];
beforeAll(async () => {
  if (!mode.run) return;
  server = await startPostgres();
}, 60_000);
afterAll(async () => {
  for (const w of workers) w.child.kill("SIGKILL");
  await store?.close();
  await server?.stop();
});

describe.skipIf(!mode.run)("workers under faults (PostgreSQL, loopback)", () => {
  it(`${SESSIONS} sessions, 3 workers, one SIGKILLed every ~2 s and replaced: every input consumed exactly once, every call one result, no non-idempotent effect twice, nothing acknowledged lost`, async () => {
    console.log(
      `worker soak seed ${SEED} (replay: KEEL_SOAK_SEED=${SEED}${FULL ? " KEEL_SOAK=full" : ""})`,
    );
    const random = rng(SEED);
    const schema = freshSchema("soak");
    store = await postgresStore(server.url, { schema, max: 6 });
    await store.pool.query(
      `CREATE TABLE IF NOT EXISTS ${store.schema}.effects (session_id text, call_id text, label text, pid int, at timestamptz DEFAULT clock_timestamp())`,
    );
    const spawnWorker = async () => {
      const w = startChild(["worker", server.url, schema, "8"], {
        KEEL_TEST_TTL: "1500",
        KEEL_TEST_POLL: "200",
      });
      workers.push(w);
      await w.waitFor((l) => l.ev === "worker-ready", 30_000);
      return w;
    };
    let live: Proc[] = await Promise.all([spawnWorker(), spawnWorker(), spawnWorker()]);
    // Each session gets 2–3 inputs: tool turns ("do a b") and plain ones, posted over time.
    const posted = new Map<string, string[]>();
    const plan: { session: string; id: string; body: string; at: number }[] = [];
    for (let s = 0; s < SESSIONS; s++) {
      const n = 2 + Math.floor(random() * 2);
      for (let k = 0; k < n; k++) {
        const labels = Array.from(
          { length: 1 + Math.floor(random() * 2) },
          (_, j) => `s${s}k${k}l${j}`,
        );
        plan.push({
          session: `w${s}`,
          id: `w${s}-in${k}`,
          body: random() < 0.8 ? `do ${labels.join(" ")}` : `hello ${k}`,
          at: Math.floor(random() * (FULL ? 20_000 : 9000)),
        });
      }
    }
    plan.sort((x, y) => x.at - y.at);
    const kills: number[] = [];
    const start = Date.now();
    const poster = (async () => {
      for (const p of plan) {
        const wait = p.at - (Date.now() - start);
        if (wait > 0) await sleep(wait);
        await store.postInput(p.session, {
          id: p.id,
          lane: "next-turn",
          source: "user",
          body: p.body,
        });
        posted.set(p.session, [...(posted.get(p.session) ?? []), p.id]); // acknowledged
      }
    })();
    const killer = (async () => {
      const end = FULL ? 24_000 : 9000;
      while (Date.now() - start < end || kills.length < 3) {
        await sleep(1500 + Math.floor(random() * 1000));
        const victim = live[Math.floor(random() * live.length)];
        victim.child.kill("SIGKILL");
        kills.push(victim.pid);
        live = live.filter((w) => w !== victim);
        live.push(await spawnWorker());
      }
    })();
    await Promise.all([poster, killer]);
    // Drain: every acknowledged input consumed, every session's turns ended, no lease held.
    const check = async () => {
      for (const [session, ids] of posted) {
        const entries = await store.load(session);
        const consumed = entries
          .filter((e) => e.type === "inbox_consumed")
          .map((e) => (e as { inboxId: string }).inboxId);
        if (!ids.every((id) => consumed.includes(id))) return undefined;
        const opens = entries.filter((e) => e.type === "turn_start").length;
        const ends = entries.filter((e) => e.type === "turn_end").length;
        if (opens !== ends) return undefined;
      }
      return true;
    };
    try {
      await until(check, FULL ? 150_000 : 40_000, "every input consumed and every turn ended");
    } catch (error) {
      // Say which sessions are stuck, and how, before failing.
      for (const [session, ids] of posted) {
        const entries = await store.load(session);
        const consumed = entries.filter((e) => e.type === "inbox_consumed").length;
        const opens = entries.filter((e) => e.type === "turn_start").length;
        const ends = entries.filter((e) => e.type === "turn_end").length;
        if (consumed < ids.length || opens !== ends)
          console.log(
            `STUCK ${session} ${JSON.stringify({ posted: ids.length, consumed, opens, ends, lease: await store.readLease(session), untaken: (await store.postedInputs(session)).length })} jobs ${JSON.stringify((await store.pool.query("SELECT key, attempts, max_attempts, locked_at, locked_by, run_at, last_error FROM graphile_worker._private_jobs WHERE payload->>'sessionId' = $1", [session])).rows)}`,
          );
      }
      for (const w of live) console.log(`WORKER ${w.pid} stderr: ${w.stderr().slice(-1500)}`);
      throw error;
    }
    const effects = (
      await store.pool.query(
        `SELECT call_id, count(*)::int AS n FROM ${store.schema}.effects GROUP BY call_id`,
      )
    ).rows as { call_id: string; n: number }[];
    expect(effects.filter((e) => e.n > 1)).toEqual([]); // no non-idempotent effect twice
    let calls = 0;
    const allStarted = new Set<string>();
    for (const [session, ids] of posted) {
      const entries: LogEntry[] = await store.load(session);
      const consumed = entries
        .filter((e) => e.type === "inbox_consumed")
        .map((e) => (e as { inboxId: string }).inboxId);
      expect(consumed.sort()).toEqual([...ids].sort()); // each exactly once, none lost
      const received = entries
        .filter((e) => e.type === "inbox")
        .map((e) => (e as { inboxId: string }).inboxId);
      expect(received.sort()).toEqual([...ids].sort());
      const started = entries
        .filter((e) => e.type === "call_started")
        .map((e) => (e as { callId: string }).callId);
      const results = entries
        .filter((e) => e.type === "call_result")
        .map((e) => (e as { callId: string }).callId);
      expect(new Set(results).size).toBe(results.length); // never two results for one call
      for (const id of started) expect(results).toContain(id); // every started call has its result
      for (const id of started) allStarted.add(id);
      calls += results.length;
      const seqs = entries.map((e) => e.seq);
      expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
    }
    // Write-ahead: every effect belongs to a call whose start was logged first.
    for (const e of effects) expect(allStarted.has(e.call_id)).toBe(true);
    console.log(
      `worker soak: ${SESSIONS} sessions, ${plan.length} inputs, ${calls} call results, ${effects.length} effects, ${kills.length} workers SIGKILLed, ${Date.now() - start} ms`,
    );
    expect(kills.length).toBeGreaterThanOrEqual(3);
  }, 420_000);
});
