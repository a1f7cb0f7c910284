import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import type { LogEntry } from "../session/entries.ts";
import { StoreError } from "../session/store-error.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";

const dirs: string[] = [];
const file = () => {
  const dir = mkdtempSync(join(tmpdir(), "keel-schema-"));
  dirs.push(dir);
  return join(dir, "keel.db");
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const entry = (seq: number, at: number): LogEntry =>
  ({
    type: "user_message",
    text: `m${seq}`,
    id: `e${seq}`,
    parentId: seq > 1 ? `e${seq - 1}` : null,
    seq,
    at,
  }) as LogEntry;

/** A file as Keel wrote it before schema version 2: the summary row kept by every append. */
function writeVersion1(path: string): void {
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.exec(`
    CREATE TABLE sessions (session_id TEXT PRIMARY KEY, created_at REAL NOT NULL,
      updated_at REAL NOT NULL, entries INTEGER NOT NULL, last_seq INTEGER NOT NULL);
    CREATE TABLE entries (session_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL,
      parent_id TEXT, type TEXT NOT NULL, at REAL NOT NULL, body TEXT NOT NULL,
      PRIMARY KEY (session_id, seq));
    CREATE UNIQUE INDEX entries_by_id ON entries (session_id, id);
    CREATE TABLE checkpoints (session_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, body TEXT NOT NULL);`);
  const insert = db.prepare("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)");
  for (const e of [entry(1, 100), entry(2, 200), entry(3, 300)]) {
    insert.run("old", e.seq, e.id, e.parentId, e.type, e.at, JSON.stringify(e));
  }
  db.prepare("INSERT INTO sessions VALUES ('old', 100, 300, 3, 3)").run();
  db.close();
}

const columns = (path: string) => {
  const db = new Database(path, { readonly: true });
  try {
    const meta = db
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'keel_meta'")
      .get();
    return {
      version: meta
        ? db.prepare("SELECT value FROM keel_meta WHERE key = 'schema_version'").pluck().get()
        : undefined,
      sessions: db.prepare("SELECT name FROM pragma_table_info('sessions')").pluck().all(),
    };
  } finally {
    db.close();
  }
};

describe("sqlite store schema", () => {
  it("a path that is not a string (an options object first, as other stores take) is a TypeError saying the call's shape", () => {
    const call = sqliteStore as unknown as (path: unknown) => unknown;
    expect(() => call({ path: "x.db" })).toThrow(
      /sqliteStore: the first argument is the database file's path.*sqliteStore\(".keel\/sessions.db", \{ durability: "power" \}\); got object/,
    );
    expect(() => call("")).toThrow(/non-empty string.*got string/);
  });

  it("a new file is version 3: sessions keep only when they began", async () => {
    const path = file();
    const store = sqliteStore(path);
    await store.append("s", [entry(1, 10), entry(2, 20)]);
    await store.close();
    expect(columns(path)).toEqual({ version: 3, sessions: ["session_id", "created_at"] });
  });

  it("reads a version 1 file's sessions whole, migrates it, and goes on appending after its last seq", async () => {
    const path = file();
    writeVersion1(path);
    const store = sqliteStore(path);
    expect(columns(path)).toEqual({ version: 3, sessions: ["session_id", "created_at"] });
    expect(await store.list()).toEqual([
      { sessionId: "old", entries: 3, createdAt: 100, updatedAt: 300 },
    ]);
    // The next seq continues the old file's; a repeat of an old seq is refused as before.
    await expect(store.append("old", [entry(3, 301)])).rejects.toMatchObject({
      code: "SEQ_CONFLICT",
    });
    await store.append("old", [entry(4, 400)]);
    expect((await store.load("old")).map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expect((await store.list())[0]).toEqual({
      sessionId: "old",
      entries: 4,
      createdAt: 100,
      updatedAt: 400,
    });
    await store.close();
    // Opening a migrated file again changes nothing.
    const again = sqliteStore(path);
    expect((await again.list())[0].entries).toBe(4);
    await again.close();
  });

  it("list() counts every entry and takes the time of the last seq, with seqs that skip", async () => {
    const store = sqliteStore(file());
    await store.append("a", [entry(1, 5)]);
    await store.append("b", [entry(2, 7), entry(9, 8)]);
    await store.append("a", [entry(4, 9), entry(6, 6)]);
    expect(await store.list()).toEqual([
      { sessionId: "a", entries: 3, createdAt: 5, updatedAt: 6 },
      { sessionId: "b", entries: 2, createdAt: 7, updatedAt: 8 },
    ]);
    await store.close();
  });

  it("refuses a file from a newer Keel, saying which versions, and leaves it as it was", () => {
    const path = file();
    const db = new Database(path);
    db.exec("CREATE TABLE keel_meta (key TEXT PRIMARY KEY, value)");
    db.exec("INSERT INTO keel_meta VALUES ('schema_version', 7)");
    db.close();
    let error: unknown;
    try {
      sqliteStore(path);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(StoreError);
    expect(String((error as Error).message)).toMatch(
      /tables in this file are schema version 7, newer than this Keel's 3; open it with a newer Keel/,
    );
    expect(columns(path)).toEqual({ version: 7, sessions: [] });
    const db2 = new Database(path, { readonly: true });
    expect(db2.pragma("journal_mode", { simple: true })).toBe("delete");
    db2.close();
  });

  it("leaves the application's user_version alone: the file is shared with its tables", async () => {
    const path = file();
    const app = new Database(path);
    app.exec("CREATE TABLE orders (id TEXT PRIMARY KEY)");
    app.pragma("user_version = 3");
    app.close();
    const store = sqliteStore(path);
    await store.append("s", [entry(1, 1)]);
    await store.close();
    const db = new Database(path, { readonly: true });
    expect(db.pragma("user_version", { simple: true })).toBe(3);
    db.close();
    expect(columns(path).version).toBe(3);
  });

  it("opens a current file while another process holds a write transaction (no write lock to open)", async () => {
    const path = file();
    const first = sqliteStore(path);
    await first.append("s", [entry(1, 1)]);
    const writer = new Database(path);
    writer.pragma("busy_timeout = 0");
    writer.exec("BEGIN IMMEDIATE");
    try {
      const reader = sqliteStore(path, { busyTimeoutMs: 0 });
      expect(await reader.list()).toEqual([
        { sessionId: "s", entries: 1, createdAt: 1, updatedAt: 1 },
      ]);
      await reader.close();
    } finally {
      writer.exec("ROLLBACK");
      writer.close();
      await first.close();
    }
  });

  it("a session whose row went missing gets it back at its next append; no entries: updatedAt is createdAt", async () => {
    const path = file();
    const store = sqliteStore(path);
    await store.append("a", [entry(1, 10)]);
    await store.append("b", [entry(1, 20)]);
    const db = new Database(path);
    db.exec("DELETE FROM sessions WHERE session_id = 'a'");
    db.exec("DELETE FROM entries WHERE session_id = 'b'");
    db.close();
    await store.append("a", [entry(2, 30)]);
    expect(await store.list()).toEqual([
      { sessionId: "b", entries: 0, createdAt: 20, updatedAt: 20 },
      { sessionId: "a", entries: 2, createdAt: 30, updatedAt: 30 },
    ]);
    await store.append("b", [entry(1, 40)]);
    expect((await store.list())[0]).toEqual({
      sessionId: "b",
      entries: 1,
      createdAt: 20,
      updatedAt: 40,
    });
    await store.close();
  });

  it("names the dropped column and what to do when an object of the application's blocks the migration", () => {
    const path = file();
    writeVersion1(path);
    const db = new Database(path);
    db.exec("CREATE VIEW recent AS SELECT session_id, updated_at FROM sessions");
    db.close();
    expect(() => sqliteStore(path)).toThrow(
      /cannot migrate Keel's tables to schema version 3: dropping sessions\.updated_at failed .*a view, trigger or index of yours/,
    );
    // Nothing was changed: the migration is one transaction.
    expect(columns(path).sessions).toEqual([
      "session_id",
      "created_at",
      "updated_at",
      "entries",
      "last_seq",
    ]);
  });
});
