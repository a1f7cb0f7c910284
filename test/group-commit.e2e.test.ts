import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import type { LogEntry } from "../session/entries.ts";
import type { Lease, LeaseStore, SessionStore } from "../session/store.ts";
import { groupCommitStats } from "../session/stores/group-commit.ts";
import { type PostgresSessionStore, postgresStore } from "../session/stores/postgres-store.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { storeAcksEarly } from "./support/mutants/store-acks-early.ts";
import { freshSchema } from "./support/postgres-server.ts";
import { usePostgres } from "./support/use-postgres.ts";

// Group commit (docs/stores.md): appends of many sessions share one transaction,
// each caller acknowledged only once its own entries are durable, a refused caller failing
// alone. Every store that groups is run here against a real engine: SQLite files and a real
// PostgreSQL server; a second connection stands for "another process" (it blocks commits by
// holding the lock they need, and reads what is durable).

const db = usePostgres();
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const tmp = () => {
  const dir = mkdtempSync(join(tmpdir(), "keel-group-"));
  dirs.push(dir);
  return dir;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Shared = SessionStore & LeaseStore;

/** A store under test and "another process" beside it. */
interface Opened {
  store: Shared;
  /** How many entries of the session another connection reads as committed. */
  committed(sessionId: string): Promise<number>;
  /** Holds back every commit touching `sessions` until the returned function is called. */
  block(sessions: readonly string[]): Promise<() => Promise<void>>;
  /** Whether the committed entries of these sessions were written by one transaction (null: cannot tell). */
  oneTransaction(sessions: readonly string[]): Promise<boolean | null>;
  close(): Promise<void>;
}

interface Harness {
  name: string;
  open(): Promise<Opened>;
}

const sqliteHarness = (durability: "process" | "power"): Harness => ({
  name: `sqlite (${durability})`,
  async open() {
    const path = join(tmp(), "keel.db");
    const store = sqliteStore(path, { durability });
    const reader = new Database(path);
    return {
      store,
      committed: async (sessionId) =>
        reader
          .prepare<[string], number>("SELECT count(*) FROM entries WHERE session_id = ?")
          .pluck()
          .get(sessionId)!,
      async block() {
        const other = new Database(path);
        other.exec("BEGIN IMMEDIATE"); // the file's write lock, held by another connection
        return async () => {
          other.exec("COMMIT");
          other.close();
        };
      },
      oneTransaction: async () => null,
      async close() {
        reader.close();
        await store.close();
      },
    };
  },
});

const postgresHarness: Harness = {
  name: "postgres",
  async open() {
    const store: PostgresSessionStore = await postgresStore(db.url(), {
      schema: freshSchema("g"),
      max: 4,
    });
    db.stores.push(store);
    const reader = new pg.Pool({ connectionString: db.url(), max: 2 });
    const s = store.schema;
    return {
      store,
      committed: async (sessionId) =>
        Number(
          (
            await reader.query(`SELECT count(*) AS n FROM ${s}.entries WHERE session_id = $1`, [
              sessionId,
            ])
          ).rows[0].n,
        ),
      async block(sessions) {
        // An append locks its session's lease row FOR SHARE: a holder of FOR UPDATE holds it back.
        const other = new pg.Client({ connectionString: db.url() });
        await other.connect();
        await other.query("BEGIN");
        await other.query(`SELECT 1 FROM ${s}.leases WHERE session_id = ANY($1) FOR UPDATE`, [
          sessions,
        ]);
        return async () => {
          await other.query("COMMIT");
          await other.end();
        };
      },
      async oneTransaction(sessions) {
        const r = await reader.query(
          `SELECT count(DISTINCT xmin::text) AS n FROM ${s}.entries WHERE session_id = ANY($1)`,
          [sessions],
        );
        return Number(r.rows[0].n) === 1;
      },
      async close() {
        await reader.end();
        await store.close();
      },
    };
  },
};

const harnesses: Harness[] = [
  sqliteHarness("process"),
  sqliteHarness("power"),
  ...(db.mode.run ? [postgresHarness] : []),
];

const entry = (sessionId: string, seq: number, id = `${sessionId}-e${seq}`): LogEntry => ({
  type: "user_message",
  text: `${sessionId} ${seq}`,
  id,
  parentId: null,
  seq,
  at: 1000 + seq,
});

const names = (n: number, prefix = "s") => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

async function leases(store: Shared, sessions: readonly string[]): Promise<Map<string, Lease>> {
  const held = new Map<string, Lease>();
  for (const s of sessions) held.set(s, (await store.acquireLease(s, "test", 60_000))!);
  return held;
}

/**
 * The durability check: appends of `sessions` (two entries each) are held back by another
 * connection; none may resolve while they cannot have committed, and when one resolves another
 * connection must read its entries. Returns what went wrong, or null.
 */
async function ackedBeforeDurable(h: Opened, store: Shared): Promise<string | null> {
  const sessions = names(6, "d");
  const held = await leases(h.store, sessions);
  const release = await h.block(sessions);
  const early: string[] = [];
  let blocked = true;
  const problems: string[] = [];
  const appends = sessions.map((s) =>
    store.append(s, [entry(s, 1), entry(s, 2)], { lease: held.get(s) }).then(async () => {
      if (blocked) early.push(s);
      const n = await h.committed(s);
      if (n !== 2) problems.push(`${s} resolved with ${n} of its 2 entries committed`);
    }),
  );
  await sleep(300);
  blocked = false;
  await release();
  await Promise.all(appends);
  if (early.length > 0) return `resolved while its commit was held back: ${early.join(", ")}`;
  return problems[0] ?? null;
}

describe.each(harnesses)("group commit: $name", (harness) => {
  it("each append resolves only once its own entries are durable: none while another connection holds its commit back, each readable from that connection when it resolves", async () => {
    const h = await harness.open();
    expect(await ackedBeforeDurable(h, h.store)).toBeNull();
    // And without a blocker: many sessions at once, each read back the moment it resolves.
    const sessions = names(20, "f");
    const seen = await Promise.all(
      sessions.map((s) => h.store.append(s, [entry(s, 1)]).then(() => h.committed(s))),
    );
    expect(seen).toEqual(sessions.map(() => 1));
    await h.close();
  });

  it("catches a store that acknowledges an append before it commits (mutant)", async () => {
    const h = await harness.open();
    expect(await ackedBeforeDurable(h, storeAcksEarly(h.store))).toMatch(/resolved/);
    await h.close();
  });

  it("a fenced session's refusal fails it alone: the rest of its group commits, in one transaction, and a seq conflict or a stored id refuses only its own append", async () => {
    const h = await harness.open();
    const { store } = h;
    const sessions = names(6);
    const held = await leases(store, [...sessions, "pilot"]);
    // s3 and s4 already hold entries 1 and 2.
    for (const s of ["s3", "s4"])
      await store.append(s, [entry(s, 1), entry(s, 2)], { lease: held.get(s) });
    // A pilot append in flight (held back), so that the six below queue into one group.
    const release = await h.block(["pilot"]);
    const pilot = store.append("pilot", [entry("pilot", 1)], { lease: held.get("pilot") });
    await sleep(50);
    const before = { ...groupCommitStats(store)! };
    const stale = { ...held.get("s2")!, token: held.get("s2")!.token + 7 };
    const outcomes = await Promise.allSettled([
      store.append("s0", [entry("s0", 1), entry("s0", 2)], { lease: held.get("s0") }),
      store.append("s1", [entry("s1", 1)], { lease: held.get("s1") }),
      store.append("s2", [entry("s2", 1)], { lease: stale }),
      store.append("s3", [entry("s3", 2, "s3-again")], { lease: held.get("s3") }),
      store.append("s4", [entry("s4", 3, "s4-e1")], { lease: held.get("s4") }),
      store.append("s5", [entry("s5", 1)], { lease: held.get("s5") }),
      (async () => {
        await sleep(100);
        await release();
      })(),
    ]);
    await pilot;
    const after = groupCommitStats(store)!;
    expect(outcomes.map((o) => (o.status === "fulfilled" ? "ok" : o.reason.code))).toEqual([
      "ok",
      "ok",
      "FENCED",
      "SEQ_CONFLICT",
      "DUPLICATE_ID",
      "ok",
      "ok",
    ]);
    // The six were one group (the pilot went alone before them).
    expect(after.items - before.items).toBeGreaterThanOrEqual(6);
    expect(after.largest).toBeGreaterThanOrEqual(6);
    expect(await h.oneTransaction(["s0", "s1", "s5"])).not.toBe(false);
    for (const [s, ids] of [
      ["s0", ["s0-e1", "s0-e2"]],
      ["s1", ["s1-e1"]],
      ["s2", []],
      ["s3", ["s3-e1", "s3-e2"]],
      ["s4", ["s4-e1", "s4-e2"]],
      ["s5", ["s5-e1"]],
    ] as const) {
      expect((await store.load(s)).map((e) => e.id)).toEqual(ids);
    }
    await h.close();
  });

  it("close() writes the appends already called before it closes", async () => {
    const h = await harness.open();
    const sessions = names(5, "c");
    const appends = sessions.map((s) => h.store.append(s, [entry(s, 1)]));
    const closing = h.store.close();
    await Promise.all(appends);
    await closing;
    for (const s of sessions) expect(await h.committed(s)).toBe(1);
    await expect(h.store.append("late", [entry("late", 1)])).rejects.toMatchObject({
      code: "CLOSED",
    });
    await h.close();
  });
});

describe.skipIf(!db.mode.run)("postgres group commit across processes", () => {
  it("two processes' groups racing one unleased session's seq: the statement that loses fails whole, then each of its appends is retried alone, so only the conflicting one fails", async () => {
    const schema = freshSchema("race");
    const a = await postgresStore(db.url(), { schema, max: 4 });
    const b = await postgresStore(db.url(), { schema, max: 4 });
    db.stores.push(a, b);
    // A third connection inserts x's seq 1 and holds it uncommitted: both groups pass their
    // checks (they cannot see it), then wait on it at their insert; when it rolls back, one group
    // inserts x's seq 1 and the other meets a unique violation after its checks passed.
    const blocker = new pg.Client({ connectionString: db.url() });
    await blocker.connect();
    await blocker.query("BEGIN");
    await blocker.query(
      `INSERT INTO ${a.schema}.entries (session_id, seq, id, parent_id, type, at, body) VALUES ('x', 1, 'held', NULL, 'user_message', 0, '{}')`,
    );
    const settled = Promise.allSettled([
      a.append("x", [entry("x", 1, "from-a")]),
      a.append("only-a", [entry("only-a", 1)]),
      b.append("x", [entry("x", 1, "from-b")]),
      b.append("only-b", [entry("only-b", 1)]),
    ]);
    await sleep(300);
    const before = [groupCommitStats(a)!.largest, groupCommitStats(b)!.largest];
    await blocker.query("ROLLBACK");
    await blocker.end();
    const [xa, onlyA, xb, onlyB] = await settled;
    expect(before).toEqual([2, 2]); // each process sent its two appends as one group
    expect(onlyA.status).toBe("fulfilled");
    expect(onlyB.status).toBe("fulfilled");
    const x = [xa, xb];
    expect(x.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const lost = x.find((r) => r.status === "rejected") as PromiseRejectedResult;
    expect(lost.reason).toMatchObject({ code: "SEQ_CONFLICT" });
    expect((await a.load("only-a")).length).toBe(1);
    expect((await a.load("only-b")).length).toBe(1);
    expect((await a.load("x")).map((e) => e.id)).toEqual([
      xa.status === "fulfilled" ? "from-a" : "from-b",
    ]);
  });
});

describe("sqlite store: many writing processes on one file", () => {
  it("an append waiting for another process's lock leaves the event loop running: a timer on the same loop releases the lock, then the append commits", async () => {
    const path = join(tmp(), "keel.db");
    const store = sqliteStore(path);
    const other = new Database(path);
    other.exec("BEGIN IMMEDIATE");
    let ticks = 0;
    const interval = setInterval(() => ticks++, 10);
    // Released from this thread's event loop: a store that waited for the lock synchronously
    // would never let this timer run (and fail after busyTimeoutMs).
    setTimeout(() => other.exec("COMMIT"), 300);
    const t0 = Date.now();
    await store.append("s", [entry("s", 1)]);
    clearInterval(interval);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250); // it did wait for the lock
    expect(ticks).toBeGreaterThan(0);
    expect(other.prepare("SELECT count(*) FROM entries").pluck().get()).toBe(1);
    other.close();
    await store.close();
  });

  it("a write that stays locked past busyTimeoutMs fails with BUSY, says what to do, and writes nothing", async () => {
    const path = join(tmp(), "keel.db");
    const store = sqliteStore(path, { busyTimeoutMs: 200 });
    const other = new Database(path);
    other.exec("BEGIN IMMEDIATE");
    await expect(store.append("s", [entry("s", 1)])).rejects.toMatchObject({
      name: "StoreError",
      code: "BUSY",
      message: expect.stringMatching(/locked by other writing processes for 200 ms.*PostgreSQL/),
    });
    await expect(store.acquireLease("s", "A", 1000)).rejects.toMatchObject({ code: "BUSY" });
    other.exec("COMMIT");
    expect(await store.load("s")).toEqual([]);
    await store.append("s", [entry("s", 1)]);
    expect((await store.load("s")).length).toBe(1);
    other.close();
    await store.close();
  });
});
