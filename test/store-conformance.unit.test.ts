import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { LogEntry } from "../session/entries.ts";
import type { LeaseStore, SessionStore } from "../session/store.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import {
  POSTGRES_SCHEMA_VERSION,
  postgresStore,
  quoteSchema,
} from "../session/stores/postgres-store.ts";
import { sqliteDatabase } from "../session/stores/sqlite-handle.ts";
import { defaultStorePath, sqliteStore } from "../session/stores/sqlite-store.ts";
import { call, openLog, result, started, step, user } from "./session-fixtures.ts";
import {
  freshSchema,
  type PostgresServer,
  postgresTestMode,
  startPostgres,
} from "./support/postgres-server.ts";

const pgMode = postgresTestMode();
let pgServer: PostgresServer | undefined;
const server = () => pgServer!;
const opened: SessionStore[] = [];
beforeAll(async () => {
  if (pgMode.run) pgServer = await startPostgres();
}, 60_000);
afterAll(async () => {
  for (const s of opened) await s.close().catch(() => {});
  await pgServer?.stop();
});

const dirs: string[] = [];
const tmp = () => {
  const dir = mkdtempSync(join(tmpdir(), "keel-store-"));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A store under test: `open` gives a fresh store; `reopen` the same data through a new handle. */
interface Harness {
  name: string;
  open(): Promise<{ store: SessionStore; reopen(): Promise<SessionStore> }>;
}

const harnesses: Harness[] = [
  {
    name: "memory",
    async open() {
      const store = memoryStore();
      return { store, reopen: async () => store };
    },
  },
  ...(["process", "power"] as const).map((durability) => ({
    name: `sqlite (${durability})`,
    async open() {
      const path = join(tmp(), "nested", "keel.db");
      const store = sqliteStore(path, { durability });
      return {
        store,
        async reopen() {
          await store.close();
          return sqliteStore(path, { durability });
        },
      };
    },
  })),
  ...(pgMode.run
    ? [
        {
          name: "postgres",
          async open() {
            const schema = freshSchema();
            const store = await postgresStore(server().url, { schema, max: 4 });
            opened.push(store);
            return {
              store,
              async reopen() {
                await store.close();
                const again = await postgresStore(server().url, { schema, max: 4 });
                opened.push(again);
                return again;
              },
            };
          },
        },
      ]
    : []),
];

const entry = (
  seq: number,
  id = `e${seq}`,
  parentId: string | null = seq > 1 ? `e${seq - 1}` : null,
): LogEntry => ({
  type: "user_message",
  text: `m${seq}`,
  id,
  parentId,
  seq,
  at: 100 + seq,
});

describe.each(harnesses)("SessionStore conformance: $name", (h) => {
  it("an unknown session loads as []", async () => {
    const { store } = await h.open();
    expect(await store.load("nobody")).toEqual([]);
    expect(await store.list()).toEqual([]);
  });

  it("appends keep seq order across batches and survive reopening", async () => {
    const { store, reopen } = await h.open();
    await store.append("s", [entry(1), entry(2)]);
    await store.append("s", [entry(3)]);
    const again = await reopen();
    expect(await again.load("s")).toEqual([entry(1), entry(2), entry(3)]);
  });

  it("a batch that does not continue the stored seq is rejected whole, and nothing of it is written", async () => {
    const { store } = await h.open();
    await store.append("s", [entry(1), entry(2)]);
    await expect(store.append("s", [entry(3), entry(2, "x")])).rejects.toMatchObject({
      code: "SEQ_CONFLICT",
    });
    await expect(store.append("s", [entry(2, "y")])).rejects.toMatchObject({
      code: "SEQ_CONFLICT",
    });
    await expect(store.append("s", [entry(3), entry(4, "e1")])).rejects.toMatchObject({
      code: "DUPLICATE_ID",
    });
    expect((await store.load("s")).map((e) => e.seq)).toEqual([1, 2]);
  });

  it("an empty batch is a no-op", async () => {
    const { store } = await h.open();
    await store.append("s", []);
    expect(await store.list()).toEqual([]);
  });

  it("mutating appended or loaded objects does not change stored data", async () => {
    const { store } = await h.open();
    const e = { ...entry(1) } as LogEntry & { text: string };
    await store.append("s", [e]);
    e.text = "changed";
    const loaded = (await store.load("s")) as (LogEntry & { text: string })[];
    loaded[0].text = "changed too";
    expect(((await store.load("s"))[0] as { text: string }).text).toBe("m1");
  });

  it("two logs on two sessions flushing concurrently keep each session whole and ordered", async () => {
    const { store, reopen } = await h.open();
    const a = await openLog(store, "a", 3);
    const b = await openLog(store, "b", 7);
    const flushes: Promise<void>[] = [];
    for (let i = 0; i < 20; i++) {
      a.append(user(`a${i}`));
      b.append(user(`b${i}`));
      if (i % 3 === 0) flushes.push(a.flush(), b.flush());
    }
    flushes.push(a.flush(), b.flush());
    await Promise.all(flushes);
    const again = await reopen();
    expect((await again.load("a")).map((e) => (e as { text: string }).text)).toEqual(
      Array.from({ length: 20 }, (_, i) => `a${i}`),
    );
    expect(await again.load("b")).toEqual(b.entries());
  });

  it("two logs writing the same session: the later writer is rejected (SEQ_CONFLICT), the first keeps its entries", async () => {
    const { store } = await h.open();
    const a = await openLog(store, "s", 1);
    const b = await openLog(store, "s", 2);
    a.append(user("a"));
    b.append(user("b"));
    await a.flush();
    await expect(b.flush()).rejects.toMatchObject({ name: "StoreError", code: "SEQ_CONFLICT" });
    expect(await store.load("s")).toEqual(a.entries());
  });

  it("list() summarises each session: entry count, first and last entry time", async () => {
    const { store } = await h.open();
    await store.append("s", [entry(1), entry(2)]);
    await store.append("t", [entry(1)]);
    await store.append("s", [entry(3)]);
    const list = (await store.list()).sort((x, y) => x.sessionId.localeCompare(y.sessionId));
    expect(list).toEqual([
      { sessionId: "s", entries: 3, createdAt: 101, updatedAt: 103 },
      { sessionId: "t", entries: 1, createdAt: 101, updatedAt: 101 },
    ]);
  });

  it("a session log reopened from the store restores its projection exactly", async () => {
    const { store, reopen } = await h.open();
    const log = await openLog(store, "s");
    log.append(user("hi"));
    step(log, "a1", "", [call("c1")]);
    log.append(started("c1"));
    log.append(result("c1", "out"));
    log.append({ type: "settings", settings: { model: "m" } });
    await log.flush();
    const again = await openLog(await reopen(), "s", 9);
    expect(again.messages()).toEqual(log.messages());
    expect(again.settings()).toEqual({ model: "m" });
    expect(again.leafId).toBe(log.leafId);
  });

  it("using a closed store rejects with CLOSED", async () => {
    const { store } = await h.open();
    await store.close();
    await expect(store.append("s", [entry(1)])).rejects.toMatchObject({ code: "CLOSED" });
    await expect(store.load("s")).rejects.toMatchObject({ code: "CLOSED" });
  });
});

describe("sqliteStore", () => {
  it("creates its directory, uses WAL, and maps durability to synchronous NORMAL / FULL", async () => {
    const dir = tmp();
    const process = sqliteStore(join(dir, "a", ".keel", "p.db"), { durability: "process" });
    const power = sqliteStore(join(dir, "b", "f.db"), { durability: "power" });
    expect(existsSync(join(dir, "a", ".keel"))).toBe(true);
    expect(sqliteDatabase(process).pragma("journal_mode", { simple: true })).toBe("wal");
    expect(sqliteDatabase(process).pragma("synchronous", { simple: true })).toBe(1);
    expect(sqliteDatabase(power).pragma("synchronous", { simple: true })).toBe(2);
    await process.append("s", [entry(1)]);
    const row = sqliteDatabase(process)
      .prepare("SELECT session_id, seq, id, parent_id, type, at FROM entries")
      .get();
    expect(row).toEqual({
      session_id: "s",
      seq: 1,
      id: "e1",
      parent_id: null,
      type: "user_message",
      at: 101,
    });
    await process.close();
    await power.close();
  });

  it("defaultStorePath puts the database under <cwd>/.keel/", () => {
    expect(defaultStorePath("/work/project")).toBe("/work/project/.keel/keel.db");
  });

  it("an uncreatable directory fails with NOT_WRITABLE naming the path and the fix", () => {
    const file = join(tmp(), "a-file");
    writeFileSync(file, "");
    expect(() => sqliteStore(join(file, "sub", "keel.db"))).toThrow(
      /cannot create the session store directory .*a-file\/sub \(ENOTDIR\): make it writable/,
    );
  });

  it("a path that is a directory fails with NOT_WRITABLE naming the path", () => {
    const dir = tmp();
    expect(() => sqliteStore(dir)).toThrow(
      expect.objectContaining({ code: "NOT_WRITABLE", message: expect.stringContaining(dir) }),
    );
  });
});

/** Stores shared by processes: leases with fencing tokens and a posted inbox (docs/stores.md, docs/many-processes.md). */
const leaseHarnesses: {
  name: string;
  open(): Promise<SessionStore & LeaseStore>;
}[] = [
  {
    name: "sqlite",
    async open() {
      return sqliteStore(join(tmp(), "keel.db"));
    },
  },
  ...(pgMode.run
    ? [
        {
          name: "postgres",
          async open() {
            const store = await postgresStore(server().url, { schema: freshSchema(), max: 4 });
            opened.push(store);
            return store;
          },
        },
      ]
    : []),
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(leaseHarnesses)("LeaseStore conformance: $name", (h) => {
  it("one live lease per session: a second holder gets null; after release the next one gets a greater token", async () => {
    const store = await h.open();
    const a = await store.acquireLease("s", "A", 10_000);
    expect(a).toMatchObject({ token: 1, takeover: false });
    expect(await store.acquireLease("s", "B", 10_000)).toBeNull();
    expect(await store.acquireLease("s", "A", 10_000)).toBeNull(); // the same name is no pass
    await store.releaseLease(a!);
    const b = await store.acquireLease("s", "B", 10_000);
    expect(b).toMatchObject({ owner: "B", token: 2, takeover: false });
    expect(await store.readLease("s")).toMatchObject({ owner: "B", token: 2, released: false });
  });

  it("an expired lease is taken over (takeover: true); the old holder can neither renew nor write", async () => {
    const store = await h.open();
    const a = (await store.acquireLease("s", "A", 600))!;
    await store.append("s", [entry(1)], { lease: a });
    expect(await store.acquireLease("s", "B", 10_000)).toBeNull();
    await sleep(700);
    const b = (await store.acquireLease("s", "B", 10_000))!;
    expect(b).toMatchObject({ token: a.token + 1, takeover: true });
    expect(await store.renewLease(a, 10_000)).toBe(false);
    await expect(store.append("s", [entry(2)], { lease: a })).rejects.toMatchObject({
      code: "FENCED",
    });
    await store.append("s", [entry(2)], { lease: b });
    expect((await store.load("s")).map((e) => e.seq)).toEqual([1, 2]);
  });

  it("an expired lease that nobody took over still refuses its holder's writes", async () => {
    const store = await h.open();
    const a = (await store.acquireLease("s", "A", 100))!;
    await sleep(200);
    await expect(store.append("s", [entry(1)], { lease: a })).rejects.toMatchObject({
      code: "FENCED",
    });
    expect(await store.load("s")).toEqual([]);
  });

  it("while a lease is live, an append without it is refused; renewing keeps it live", async () => {
    const store = await h.open();
    const a = (await store.acquireLease("s", "A", 1000))!;
    await expect(store.append("s", [entry(1)])).rejects.toMatchObject({ code: "FENCED" });
    await sleep(500);
    expect(await store.renewLease(a, 1000)).toBe(true);
    await sleep(700);
    await store.append("s", [entry(1)], { lease: a }); // 1.2 s after acquiring: renewed
    await store.releaseLease(a);
    await store.append("s", [entry(2)]); // nobody owns it now
    expect((await store.load("s")).length).toBe(2);
  });

  it("posted inputs are deduplicated by id, read in posting order until marked taken", async () => {
    const store = await h.open();
    const input = (id: string) => ({
      id,
      lane: "next-turn" as const,
      source: "user" as const,
      body: id,
    });
    await store.postInput("s", input("b"));
    await store.postInput("s", input("a"));
    await store.postInput("s", input("b"));
    expect((await store.postedInputs("s")).map((i) => i.id)).toEqual(["b", "a"]);
    await store.markTaken("s", ["b"]);
    expect(await store.postedInputs("s")).toEqual([input("a")]);
    expect(await store.postedInputs("other")).toEqual([]);
  });

  it("sessions needing a runner: untaken inputs, a crashed owner, a release with pending work; never a live owner", async () => {
    const store = await h.open();
    const input = { id: "i", lane: "next-turn" as const, source: "user" as const, body: "x" };
    await store.postInput("posted", input);
    const live = (await store.acquireLease("owned", "A", 10_000))!;
    await store.postInput("owned", input);
    await store.acquireLease("crashed", "A", 100);
    const p = (await store.acquireLease("pending", "A", 10_000))!;
    await store.releaseLease(p, { pending: true });
    const c = (await store.acquireLease("clean", "A", 10_000))!;
    await store.releaseLease(c);
    await sleep(200);
    expect((await store.sessionsNeedingRunner(10)).sort()).toEqual([
      "crashed",
      "pending",
      "posted",
    ]);
    await store.releaseLease(live);
    expect((await store.sessionsNeedingRunner(10)).sort()).toEqual([
      "crashed",
      "owned",
      "pending",
      "posted",
    ]);
  });

  it("the doorbell rings for an input posted through another handle of the same store", async () => {
    const store = await h.open();
    const rung: string[] = [];
    const stop = await store.watchInputs((id) => rung.push(id));
    await store.postInput("s", { id: "i", lane: "next-step", source: "user", body: "x" });
    await vi.waitFor(() => expect(rung).toContain("s"), { timeout: 3000 });
    await stop();
  });
});

describe.skipIf(!pgMode.run)("postgresStore across pools", () => {
  it("concurrent appends from two pools: exactly the acknowledged batches are stored, in seq order, and of two batches at one seq exactly one lands", async () => {
    const schema = freshSchema();
    const a = await postgresStore(server().url, { schema, max: 4 });
    const b = await postgresStore(server().url, { schema, max: 4 });
    opened.push(a, b);
    // Four sessions, five writers each, from both pools at once, seqs racing: every append that
    // resolved is stored, none that rejected is, and each session's seqs stay increasing.
    const landed = new Map<string, number[]>();
    await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const id = `s${i % 4}`;
        const seq = Math.floor(i / 4) + 1;
        try {
          await (i % 2 ? a : b).append(id, [entry(seq)]);
          landed.set(id, [...(landed.get(id) ?? []), seq]);
        } catch (error) {
          expect(error).toMatchObject({ code: expect.stringMatching(/SEQ_CONFLICT|DUPLICATE_ID/) });
        }
      }),
    );
    // The same session, same next seq, from both pools: one wins, the other gets SEQ_CONFLICT.
    const results = await Promise.allSettled([
      a.append("race", [entry(1, "x1"), entry(2, "x2")]),
      b.append("race", [entry(1, "y1")]),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const rejected = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    expect(rejected.reason).toMatchObject({ code: "SEQ_CONFLICT" });
    for (const store of [a, b]) {
      for (const id of ["s0", "s1", "s2", "s3"]) {
        const seqs = (await store.load(id)).map((e) => e.seq);
        expect(seqs).toEqual([...(landed.get(id) ?? [])].sort((x, y) => x - y));
      }
      const race = (await store.load("race")).map((e) => e.id);
      expect([["x1", "x2"], ["y1"]]).toContainEqual(race);
    }
  });

  it("schema is versioned in keel_meta; a newer version is refused with the fix", async () => {
    const schema = freshSchema();
    const store = await postgresStore(server().url, { schema });
    opened.push(store);
    const v = await store.pool.query(
      `SELECT value FROM ${store.schema}.keel_meta WHERE key = 'schema_version'`,
    );
    expect(v.rows[0].value).toBe(POSTGRES_SCHEMA_VERSION);
    await store.pool.query(
      `UPDATE ${store.schema}.keel_meta SET value = '99' WHERE key = 'schema_version'`,
    );
    await expect(postgresStore(server().url, { schema })).rejects.toThrow(
      new RegExp(
        `version 99, newer than this Keel's ${POSTGRES_SCHEMA_VERSION}; open it with a newer Keel`,
      ),
    );
    expect(() => quoteSchema("Bad-Name")).toThrow(/lowercase SQL name/);
  });

  it("a version-1 schema (tables, no append function) is migrated to the current version on open: its log stays and appends continue it in one statement", async () => {
    const schema = freshSchema();
    const old = await postgresStore(server().url, { schema });
    await old.append("m", [entry(1, "m1"), entry(2, "m2")]);
    // What Keel 1 left: the same tables, no append_entries, version 1.
    await old.pool.query(`DROP FUNCTION ${old.schema}.append_entries`);
    await old.pool.query(
      `UPDATE ${old.schema}.keel_meta SET value = '1' WHERE key = 'schema_version'`,
    );
    await old.close();
    const store = await postgresStore(server().url, { schema });
    opened.push(store);
    const v = await store.pool.query(
      `SELECT value FROM ${store.schema}.keel_meta WHERE key = 'schema_version'`,
    );
    expect(v.rows[0].value).toBe(POSTGRES_SCHEMA_VERSION);
    await store.append("m", [entry(3, "m3")]);
    expect((await store.load("m")).map((e) => e.id)).toEqual(["m1", "m2", "m3"]);
    await expect(store.append("m", [entry(3, "again")])).rejects.toMatchObject({
      code: "SEQ_CONFLICT",
      message: expect.stringMatching(/entry again has seq 3, not after seq 3/),
    });
  });

  it("an unreachable server fails with IO naming the URL (without its password) and the fix", async () => {
    await expect(postgresStore("postgres://u:secret@127.0.0.1:1/db")).rejects.toThrow(
      /postgres:\/\/u:\*\*\*@127\.0\.0\.1:1\/db.*check that the server runs/,
    );
  });
});
