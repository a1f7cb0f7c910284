import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import Database from "better-sqlite3";
import type { CheckpointStore } from "./checkpoint.ts";
import type { LogEntry } from "./entries.ts";
import type { SessionStore, SessionSummary } from "./store.ts";
import { checkBatch, StoreError } from "./store-error.ts";

/**
 * How far a resolved `append` survives: "process" — a kill -9 of this process (WAL,
 * `synchronous=NORMAL`: the commit is in the OS's file cache); "power" — a power cut or OS crash
 * too (`synchronous=FULL`: the WAL is fsynced at every commit, ≈ 0.2 ms a commit).
 */
export type Durability = "process" | "power";

export interface SqliteStoreOptions {
  durability?: Durability;
  /** How long a writer waits for another process's lock before failing (default 5000 ms). */
  busyTimeoutMs?: number;
}

/** A SQLite-backed session store; `db` is exposed so a ledger can share its transactions. */
export interface SqliteSessionStore extends SessionStore, CheckpointStore {
  readonly kind: "sqlite";
  readonly path: string;
  readonly durability: Durability;
  readonly db: Database.Database;
  /** Runs `fn` in one IMMEDIATE transaction (nested calls join the outer one). */
  transaction<T>(fn: () => T): T;
}

/** `<cwd>/.keel/keel.db`: where a project's sessions live by default. */
export function defaultStorePath(cwd: string): string {
  return join(resolve(cwd), ".keel", "keel.db");
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS sessions (
  session_id TEXT PRIMARY KEY,
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL,
  entries INTEGER NOT NULL,
  last_seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
  session_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  id TEXT NOT NULL,
  parent_id TEXT,
  type TEXT NOT NULL,
  at REAL NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (session_id, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS entries_by_id ON entries (session_id, id);
CREATE TABLE IF NOT EXISTS checkpoints (
  session_id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL,
  body TEXT NOT NULL
);
`;

/**
 * Opens (creating it and its directory if needed) a SQLite session store: WAL journal, one
 * IMMEDIATE transaction per `append` batch (all or nothing), entries stored as JSON with
 * `session_id, seq, id, parent_id, type, at` columns, a `sessions` summary table. Several
 * processes may share the file (writes serialise on SQLite's lock; `busyTimeoutMs`).
 * Throws a `StoreError` (`NOT_WRITABLE`) naming the path and the fix when it cannot open it.
 */
export function sqliteStore(path: string, options: SqliteStoreOptions = {}): SqliteSessionStore {
  const durability = options.durability ?? "process";
  const db = openDatabase(path);
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${durability === "power" ? "FULL" : "NORMAL"}`);
  db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
  db.exec(SCHEMA);
  const lastSeq = db.prepare<[string], { last_seq: number }>(
    "SELECT last_seq FROM sessions WHERE session_id = ?",
  );
  const insert = db.prepare(
    "INSERT INTO entries (session_id, seq, id, parent_id, type, at, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
  );
  const upsert = db.prepare(
    `INSERT INTO sessions (session_id, created_at, updated_at, entries, last_seq) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (session_id) DO UPDATE SET updated_at = excluded.updated_at,
       entries = entries + excluded.entries, last_seq = excluded.last_seq`,
  );
  const load = db
    .prepare<[string], string>("SELECT body FROM entries WHERE session_id = ? ORDER BY seq")
    .pluck();
  const loadRange = db
    .prepare<[string, number, number], string>(
      "SELECT body FROM entries WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq",
    )
    .pluck();
  const saveCheckpoint = db.prepare(
    `INSERT INTO checkpoints (session_id, seq, body) VALUES (?, ?, ?)
     ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, body = excluded.body WHERE excluded.seq >= checkpoints.seq`,
  );
  const loadCheckpoint = db.prepare<[string], { seq: number; body: string }>(
    "SELECT seq, body FROM checkpoints WHERE session_id = ?",
  );
  const list = db.prepare<
    [],
    { session_id: string; entries: number; created_at: number; updated_at: number }
  >(
    "SELECT session_id, entries, created_at, updated_at FROM sessions ORDER BY created_at, session_id",
  );
  const appendBatch = db.transaction((sessionId: string, entries: readonly LogEntry[]) => {
    const error = checkBatch(sessionId, lastSeq.get(sessionId)?.last_seq ?? 0, entries);
    if (error) throw error;
    for (const e of entries)
      insert.run(sessionId, e.seq, e.id, e.parentId, e.type, e.at, JSON.stringify(e));
    const last = entries[entries.length - 1];
    upsert.run(sessionId, entries[0].at, last.at, entries.length, last.seq);
  });
  let closed = false;
  const guard = <T>(what: string, fn: () => T): T => {
    if (closed)
      throw new StoreError(
        "CLOSED",
        `sqlite store ${path}: ${what} after close(); open a new store`,
      );
    try {
      return fn();
    } catch (error) {
      throw asStoreError(error, path, what);
    }
  };
  return {
    kind: "sqlite",
    path,
    durability,
    db,
    transaction: (fn) => guard("transaction", () => db.transaction(fn).immediate()),
    async append(sessionId, entries) {
      if (entries.length === 0) return;
      guard("append", () => appendBatch.immediate(sessionId, entries));
    },
    async load(sessionId) {
      return guard("load", () => load.all(sessionId).map((body) => JSON.parse(body) as LogEntry));
    },
    async saveCheckpoint(sessionId, seq, body) {
      guard("saveCheckpoint", () => saveCheckpoint.run(sessionId, seq, body));
    },
    async loadFromCheckpoint(sessionId) {
      return guard("loadFromCheckpoint", () => {
        const checkpoint = loadCheckpoint.get(sessionId);
        if (!checkpoint) return null;
        const decode = (from: number, to: number) =>
          loadRange.all(sessionId, from, to).map((body) => JSON.parse(body) as LogEntry);
        return {
          seq: checkpoint.seq,
          body: checkpoint.body,
          tail: decode(checkpoint.seq, Number.MAX_SAFE_INTEGER),
          loadPrefix: () =>
            guard("load (history before the checkpoint)", () => decode(0, checkpoint.seq)),
        };
      });
    },
    loadUpTo(sessionId, seq) {
      return guard("load (history up to a checkpoint)", () =>
        loadRange.all(sessionId, 0, seq).map((body) => JSON.parse(body) as LogEntry),
      );
    },
    async list(): Promise<SessionSummary[]> {
      return guard("list", () =>
        list.all().map((r) => ({
          sessionId: r.session_id,
          entries: r.entries,
          createdAt: r.created_at,
          updatedAt: r.updated_at,
        })),
      );
    },
    async close() {
      if (closed) return;
      closed = true;
      db.close();
    },
  };
}

function openDatabase(path: string): Database.Database {
  if (path !== ":memory:") {
    const dir = dirname(resolve(path));
    try {
      mkdirSync(dir, { recursive: true });
    } catch (error) {
      throw new StoreError(
        "NOT_WRITABLE",
        `cannot create the session store directory ${dir} (${(error as NodeJS.ErrnoException).code ?? error}): make it writable (e.g. chmod u+w on its parent) or pass another store path`,
        { cause: error },
      );
    }
  }
  try {
    const db = new Database(path);
    db.pragma("user_version"); // touches the file: fails now, not at the first append
    return db;
  } catch (error) {
    throw new StoreError(
      "NOT_WRITABLE",
      `cannot open the session store ${path} (${(error as Error).message}): check that the file and its directory are writable by this user, or pass another store path`,
      { cause: error },
    );
  }
}

function asStoreError(error: unknown, path: string, what: string): unknown {
  if (error instanceof StoreError) return error;
  const code = (error as { code?: string }).code ?? "";
  if (code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY") {
    return new StoreError(
      "DUPLICATE_ID",
      `sqlite store ${path}: ${what}: an entry with this id or seq is already stored (${(error as Error).message})`,
      { cause: error },
    );
  }
  if (code === "SQLITE_READONLY" || code === "SQLITE_CANTOPEN" || code === "SQLITE_PERM") {
    return new StoreError(
      "NOT_WRITABLE",
      `sqlite store ${path}: ${what} failed (${code}): make the file and its directory writable, or pass another store path`,
      { cause: error },
    );
  }
  if (code.startsWith("SQLITE_")) {
    return new StoreError(
      "IO",
      `sqlite store ${path}: ${what} failed (${code}: ${(error as Error).message})`,
      { cause: error },
    );
  }
  return error;
}
