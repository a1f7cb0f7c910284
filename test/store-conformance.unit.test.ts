import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { LogEntry } from "../session/entries.ts";
import { memoryStore } from "../session/memory-store.ts";
import { sqliteDatabase } from "../session/sqlite-handle.ts";
import { defaultStorePath, sqliteStore } from "../session/sqlite-store.ts";
import type { SessionStore } from "../session/store.ts";
import { call, openLog, result, started, step, user } from "./session-fixtures.ts";

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
  open(): { store: SessionStore; reopen(): Promise<SessionStore> };
}

const harnesses: Harness[] = [
  {
    name: "memory",
    open() {
      const store = memoryStore();
      return { store, reopen: async () => store };
    },
  },
  ...(["process", "power"] as const).map((durability) => ({
    name: `sqlite (${durability})`,
    open() {
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
    const { store } = h.open();
    expect(await store.load("nobody")).toEqual([]);
    expect(await store.list()).toEqual([]);
  });

  it("appends keep seq order across batches and survive reopening", async () => {
    const { store, reopen } = h.open();
    await store.append("s", [entry(1), entry(2)]);
    await store.append("s", [entry(3)]);
    const again = await reopen();
    expect(await again.load("s")).toEqual([entry(1), entry(2), entry(3)]);
  });

  it("a batch that does not continue the stored seq is rejected whole, and nothing of it is written", async () => {
    const { store } = h.open();
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
    const { store } = h.open();
    await store.append("s", []);
    expect(await store.list()).toEqual([]);
  });

  it("mutating appended or loaded objects does not change stored data", async () => {
    const { store } = h.open();
    const e = { ...entry(1) } as LogEntry & { text: string };
    await store.append("s", [e]);
    e.text = "changed";
    const loaded = (await store.load("s")) as (LogEntry & { text: string })[];
    loaded[0].text = "changed too";
    expect(((await store.load("s"))[0] as { text: string }).text).toBe("m1");
  });

  it("two logs on two sessions flushing concurrently keep each session whole and ordered", async () => {
    const { store, reopen } = h.open();
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
    const { store } = h.open();
    const a = await openLog(store, "s", 1);
    const b = await openLog(store, "s", 2);
    a.append(user("a"));
    b.append(user("b"));
    await a.flush();
    await expect(b.flush()).rejects.toMatchObject({ name: "StoreError", code: "SEQ_CONFLICT" });
    expect(await store.load("s")).toEqual(a.entries());
  });

  it("list() summarises each session: entry count, first and last entry time", async () => {
    const { store } = h.open();
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
    const { store, reopen } = h.open();
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
    const { store } = h.open();
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
