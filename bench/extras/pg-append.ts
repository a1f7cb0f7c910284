// A PostgreSQL append, side by side: `store.append` as it is against the transaction it replaced
// (BEGIN; lease row FOR SHARE; max(seq); INSERT session; INSERT entries; COMMIT: six round
// trips), both on the same fresh loopback server and schema, rounds interleaved so a machine's
// changing load falls on both alike. Every append carries its session's lease (fenced), batches
// of 1 and 4 entries, 1 and 10 sessions appending at once. Also counts the statements one append
// sends. Reports appends per second, p50/p99 latency and the ratio.
//   npx tsx bench/extras/pg-append.ts
import pg from "pg";
import type { LogEntry } from "../../session/entries.ts";
import type { Lease } from "../../session/store.ts";
import { fenced } from "../../session/store-error.ts";
import { type PostgresSessionStore, postgresStore } from "../../session/stores/postgres-store.ts";
import { startPostgres } from "../../test/support/postgres-server.ts";

const ROUNDS = 3;
const APPENDS = 150; // per session per round

/** The append before schema version 2: one transaction of six statements. */
async function sixStatements(
  store: PostgresSessionStore,
  sessionId: string,
  entries: LogEntry[],
  lease: Lease,
): Promise<void> {
  const s = store.schema;
  const c = await store.pool.connect();
  try {
    await c.query("BEGIN");
    const row = (
      await c.query<{ token: string; live: boolean }>(
        `SELECT token, NOT released AND expires_at > clock_timestamp() AS live
         FROM ${s}.leases WHERE session_id = $1 FOR SHARE`,
        [sessionId],
      )
    ).rows[0];
    if (!row?.live || Number(row.token) !== lease.token)
      throw fenced(sessionId, "bench", lease.token);
    const last = await c.query<{ seq: string | null }>(
      `SELECT max(seq) AS seq FROM ${s}.entries WHERE session_id = $1`,
      [sessionId],
    );
    if (Number(last.rows[0].seq ?? 0) >= entries[0].seq) throw new Error("seq conflict");
    await c.query(
      `INSERT INTO ${s}.sessions (session_id, created_at) VALUES ($1, $2) ON CONFLICT (session_id) DO NOTHING`,
      [sessionId, entries[0].at],
    );
    await c.query(
      `INSERT INTO ${s}.entries (session_id, seq, id, parent_id, type, at, body)
       SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::float8[], $7::text[])`,
      [
        sessionId,
        entries.map((e) => e.seq),
        entries.map((e) => e.id),
        entries.map((e) => e.parentId),
        entries.map((e) => e.type),
        entries.map((e) => e.at),
        entries.map((e) => JSON.stringify(e)),
      ],
    );
    await c.query("COMMIT");
  } catch (error) {
    await c.query("ROLLBACK").catch(() => {});
    throw error;
  } finally {
    c.release();
  }
}

const entryAt = (session: string, seq: number): LogEntry =>
  ({
    type: "inbox",
    id: `${session}-${seq}`,
    parentId: seq > 1 ? `${session}-${seq - 1}` : null,
    seq,
    at: Date.now(),
    inboxId: `i${seq}`,
    source: "user",
    lane: "next-turn",
    body: "a message of the length a short user message has, give or take a few words",
  }) as unknown as LogEntry;

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const median = (xs: number[]) => pct(xs, 50);

type Mode = "six statements" | "store.append";
let sessions = 0;

async function round(
  store: PostgresSessionStore,
  mode: Mode,
  concurrent: number,
  batch: number,
): Promise<{ perSec: number; latencies: number[] }> {
  const latencies: number[] = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrent }, async () => {
      const id = `b${++sessions}`;
      const lease = (await store.acquireLease(id, "bench:1", 600_000))!;
      let seq = 0;
      for (let i = 0; i < APPENDS; i++) {
        const entries = Array.from({ length: batch }, () => entryAt(id, ++seq));
        const t = performance.now();
        if (mode === "store.append") await store.append(id, entries, { lease });
        else await sixStatements(store, id, entries, lease);
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { perSec: (concurrent * APPENDS) / ((performance.now() - t0) / 1000), latencies };
}

/** Statements one append sends (client.query calls), counted on pg's Client. */
async function statementsPerAppend(store: PostgresSessionStore, mode: Mode): Promise<number> {
  const id = `count${++sessions}`;
  const lease = (await store.acquireLease(id, "bench:1", 600_000))!;
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  let n = 0;
  proto.query = function (this: unknown, ...args: unknown[]) {
    n++;
    return original.apply(this, args);
  };
  try {
    const entries = [entryAt(id, 1)];
    if (mode === "store.append") await store.append(id, entries, { lease });
    else await sixStatements(store, id, entries, lease);
  } finally {
    proto.query = original;
  }
  return n;
}

const rows = [
  "| synchronous_commit | sessions | entries / append | six statements: appends/s, p50, p99 ms | store.append: appends/s, p50, p99 ms | throughput ratio | p50 ratio |",
  "|---|---:|---:|---|---|---:|---:|",
];
for (const sync of ["on", "off"]) {
  const server = await startPostgres({ settings: { synchronous_commit: sync } });
  const store = await postgresStore(server.url, { schema: "bench", max: 10 });
  try {
    if (sync === "on") {
      console.error(
        `statements per append: six statements ${await statementsPerAppend(store, "six statements")}, store.append ${await statementsPerAppend(store, "store.append")}`,
      );
    }
    for (const concurrent of [1, 10]) {
      for (const batch of [1, 4]) {
        await round(store, "store.append", concurrent, batch); // warm-up
        await round(store, "six statements", concurrent, batch);
        const got: Record<Mode, { perSec: number[]; latencies: number[] }> = {
          "six statements": { perSec: [], latencies: [] },
          "store.append": { perSec: [], latencies: [] },
        };
        for (let r = 0; r < ROUNDS; r++) {
          for (const mode of ["six statements", "store.append"] as const) {
            const out = await round(store, mode, concurrent, batch);
            got[mode].perSec.push(out.perSec);
            got[mode].latencies.push(...out.latencies);
          }
        }
        const cell = (m: Mode) =>
          `${Math.round(median(got[m].perSec))}, ${pct(got[m].latencies, 50).toFixed(2)}, ${pct(got[m].latencies, 99).toFixed(2)}`;
        const ratio = median(got["store.append"].perSec) / median(got["six statements"].perSec);
        const p50 =
          pct(got["six statements"].latencies, 50) / pct(got["store.append"].latencies, 50);
        const line = `| ${sync} | ${concurrent} | ${batch} | ${cell("six statements")} | ${cell("store.append")} | ${ratio.toFixed(2)}× | ${p50.toFixed(2)}× |`;
        rows.push(line);
        console.error(line);
      }
    }
  } finally {
    await store.close();
    await server.stop();
  }
}
console.log(rows.join("\n"));
