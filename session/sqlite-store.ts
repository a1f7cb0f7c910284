import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import type Database from "better-sqlite3";
import { loadPeer } from "../contracts/optional-peer.ts";
import type { CheckpointStore } from "./checkpoint.ts";
import { LOG_SCHEMA_VERSION, type LogEntry } from "./entries.ts";
import { type CommitOutcome, GroupCommit, rememberGroupCommit } from "./group-commit.ts";
import { sqliteEraser, truncateWal } from "./sqlite-erase.ts";
import { rememberDatabase } from "./sqlite-handle.ts";
import type {
  AppendOptions,
  LeaseInfo,
  LeaseStore,
  PostedInput,
  SessionStore,
  SessionSummary,
} from "./store.ts";
import { checkBatch, fenced, StoreError } from "./store-error.ts";
import { upgradeEntryV2 } from "./upgrade-entry.ts";

/**
 * How far a resolved `append` survives: "process" — a kill -9 of this process (WAL,
 * `synchronous=NORMAL`: the commit is in the OS's file cache); "power" — a power cut or OS crash
 * too (`synchronous=FULL`: the WAL is fsynced at every commit; its cost: bench/FIGURES.md).
 */
export type Durability = "process" | "power";

/** `sqliteStore` options. */
export interface SqliteStoreOptions {
  durability?: Durability;
  /**
   * How long a write waits for another process's lock before failing with `BUSY` (default
   * 5000 ms). The wait is asynchronous: the event loop runs meanwhile (see `LOCK_SPIN_MS`).
   */
  busyTimeoutMs?: number;
  /**
   * The clock lease expiry is measured on. Contract: wall-clock ms, the same for every process
   * sharing the file (default `Date.now`); tests inject a manual clock.
   */
  now?: () => number;
  /**
   * Opens an existing file for reading only (default false): nothing is created, migrated or
   * written, and every write rejects with `NOT_WRITABLE`. A file in a folder this user cannot
   * write is read from a copy taken when it opens.
   */
  readOnly?: boolean;
}

/**
 * A SQLite-backed session store. Its `better-sqlite3` handle is not part of its type (an
 * embedder's program would need that package's types): a ledger reaches it through
 * `sqliteDatabase` (session/sqlite-handle.ts), and an atomic ledger run hands it to the effect (`ctx.transact`).
 */
export interface SqliteSessionStore extends SessionStore, CheckpointStore, LeaseStore {
  readonly kind: "sqlite";
  readonly path: string;
  readonly durability: Durability;
  /**
   * Runs `fn` in one IMMEDIATE transaction (nested calls join the outer one). Synchronous: while
   * another process holds the file's write lock it waits for it on this thread (up to
   * `busyTimeoutMs`), the event loop stopped. Keel's own writes wait asynchronously.
   */
  transaction<T>(fn: () => T): T;
}

/**
 * How long a write may wait synchronously, inside SQLite, for another process's lock before it
 * yields: it then retries from a timer (1, 2, 4 … 16 ms apart, jittered) until `busyTimeoutMs`,
 * so a process whose writes queue on the file lock never stops its event loop longer than this.
 */
export const LOCK_SPIN_MS = 2;

/** One `append` call waiting for its group. */
interface AppendRequest {
  sessionId: string;
  entries: readonly LogEntry[];
  options: AppendOptions;
}

/** `<cwd>/.keel/keel.db`: where a project's sessions live by default. */
export function defaultStorePath(cwd: string): string {
  return join(resolve(cwd), ".keel", "keel.db");
}

/**
 * The version of Keel's tables in the file, kept in Keel's own `keel_meta` table (not
 * `PRAGMA user_version`: the file is shared with the application's own tables through the
 * ledger, and the application may version those). 2: `sessions` holds only when each session
 * began; its last seq, entry count and last time are read from `entries` (by its primary key), so
 * an append writes no summary row: one page fewer in every commit's WAL (what it saves:
 * bench/FIGURES.md). Older files are migrated when opened, after which a
 * Keel from before version 2 can no longer append to them: every process sharing a store file
 * must be upgraded together. 3: the entries' bodies are in log schema 3's shape (neutral message
 * parts, session/entries.ts `LOG_SCHEMA_VERSION`); a version-2 file's assistant messages and
 * attempt ends are rewritten when it is opened, and its checkpoints (derived projections of the
 * old shape) dropped, in the same transaction. The `leases` (one runner per session, fencing
 * tokens) and `inbox` (inputs posted by other processes) tables are only added, with
 * CREATE TABLE IF NOT EXISTS when a file is opened: no version of their own.
 */
const SCHEMA_VERSION = LOG_SCHEMA_VERSION;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS keel_meta (
  key TEXT PRIMARY KEY,
  value
);
CREATE TABLE IF NOT EXISTS sessions (
  session_id TEXT PRIMARY KEY,
  created_at REAL NOT NULL
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
CREATE TABLE IF NOT EXISTS leases (
  session_id TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  token INTEGER NOT NULL,
  expires_at REAL NOT NULL,
  released INTEGER NOT NULL DEFAULT 0,
  pending INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS inbox (
  n INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL,
  inbox_id TEXT NOT NULL,
  lane TEXT NOT NULL,
  source TEXT NOT NULL,
  body TEXT NOT NULL,
  taken INTEGER NOT NULL DEFAULT 0,
  UNIQUE (session_id, inbox_id)
);
`;

/**
 * Opens (creating it and its directory if needed) a SQLite session store: WAL journal, entries
 * stored as JSON with `session_id, seq, id, parent_id, type, at` columns, a `sessions` table of
 * when each began (an older file is migrated when opened).
 *
 * Group commit: the appends of every session of this store issued before the event loop's next
 * check phase (`setImmediate`) are written in one IMMEDIATE transaction, each call's batch in a
 * savepoint of its own: a call refused (fenced, seq conflict, duplicate id) writes nothing and
 * fails alone, the others commit. A session writing alone does not wait for the check phase,
 * but for once every 10 ms (session/group-commit.ts). Each `append` resolves once the
 * transaction holding its batch has committed (durable to `durability`).
 *
 * Several processes may share the file: writes serialise on SQLite's lock. A write waits at most
 * `LOCK_SPIN_MS` inside SQLite, then retries from a timer until `busyTimeoutMs` and fails
 * with `BUSY` (nothing written), so waiting never stops the event loop (docs/many-processes.md).
 * Throws a `StoreError` naming the path and the fix when it cannot open it (`NOT_WRITABLE`) or a
 * newer Keel wrote it (`IO`).
 */
export function sqliteStore(path: string, options: SqliteStoreOptions = {}): SqliteSessionStore {
  const durability = options.durability ?? "process";
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  const db = options.readOnly ? openReadOnly(path) : openDatabase(path);
  try {
    // Before anything changes the file (its journal mode included): refuse a newer Keel's.
    const version = schemaVersion(db, path);
    if (options.readOnly) {
      if (version < SCHEMA_VERSION) throw notCurrent(path, version);
    } else {
      db.pragma("journal_mode = WAL");
      db.pragma(`synchronous = ${durability === "power" ? "FULL" : "NORMAL"}`);
      // Deleted or rewritten rows leave zeros, not their old bytes (session deletion, redaction).
      db.pragma("secure_delete = ON");
    }
    db.pragma(`busy_timeout = ${Math.min(LOCK_SPIN_MS, busyTimeoutMs)}`);
    // A current file takes no write lock to open (a reader must open while another process
    // holds a long write transaction); CREATE … IF NOT EXISTS changes nothing there.
    if (options.readOnly) {
      // Nothing to create: the version check above found Keel's tables.
    } else if (version < SCHEMA_VERSION) migrate(db, path);
    else db.exec(SCHEMA);
  } catch (error) {
    db.close();
    throw openError(error, path);
  }
  // The last seq of a session: the end of its primary key's range, O(log n).
  const lastSeq = db
    .prepare<[string], number | null>("SELECT max(seq) FROM entries WHERE session_id = ?")
    .pluck();
  const insert = db.prepare(
    "INSERT INTO entries (session_id, seq, id, parent_id, type, at, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
  );
  // Every append (a lookup, and no write once the row exists): a session whose row went
  // missing gets it back rather than staying out of list().
  const begin = db.prepare(
    "INSERT INTO sessions (session_id, created_at) VALUES (?, ?) ON CONFLICT (session_id) DO NOTHING",
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
    `SELECT s.session_id, s.created_at,
       (SELECT count(*) FROM entries e WHERE e.session_id = s.session_id) AS entries,
       coalesce((SELECT e.at FROM entries e WHERE e.session_id = s.session_id
         ORDER BY e.seq DESC LIMIT 1), s.created_at) AS updated_at
     FROM sessions s ORDER BY s.created_at, s.session_id`,
  );
  // Leases use this host's wall clock (every process sharing the file is on this host).
  const now = options.now ?? (() => Date.now());
  const leaseRow = db.prepare<
    [string],
    { owner: string; token: number; expires_at: number; released: number; pending: number }
  >("SELECT owner, token, expires_at, released, pending FROM leases WHERE session_id = ?");
  // One call's batch. Called inside the group's transaction, so better-sqlite3 wraps it in a
  // savepoint: a refusal rolls back only this batch.
  const appendOne = db.transaction((req: AppendRequest) => {
    const { sessionId, entries, options: opts } = req;
    const lease = leaseRow.get(sessionId);
    const live = lease !== undefined && !lease.released && lease.expires_at > now();
    if (opts.lease) {
      if (!live || lease.token !== opts.lease.token)
        throw fenced(sessionId, `sqlite store ${path}`, opts.lease.token);
    } else if (live) {
      throw fenced(sessionId, `sqlite store ${path}`, undefined);
    }
    const last = lastSeq.get(sessionId) ?? 0;
    const error = checkBatch(sessionId, last, entries);
    if (error) throw error;
    begin.run(sessionId, entries[0].at);
    for (const e of entries)
      insert.run(sessionId, e.seq, e.id, e.parentId, e.type, e.at, JSON.stringify(e));
  });
  const appendGroup = db.transaction((group: readonly AppendRequest[]): CommitOutcome[] => {
    const outcomes: CommitOutcome[] = [];
    for (const req of group) {
      try {
        appendOne(req);
        outcomes.push(undefined);
      } catch (error) {
        const refusal = asStoreError(error, path, "append");
        // Anything but a refusal of this batch (an I/O error, a full disk) fails the group; so
        // does an error after which SQLite rolled the whole transaction back.
        if (!isRefusal(refusal) || !db.inTransaction) throw refusal;
        outcomes.push(refusal as StoreError);
      }
    }
    return outcomes;
  });
  // A lone append needs no savepoint: its refusal rolls back its own transaction.
  const commitGroup = (group: readonly AppendRequest[]): CommitOutcome[] => {
    if (group.length > 1) return appendGroup.immediate(group);
    try {
      appendOne.immediate(group[0]);
      return [undefined];
    } catch (error) {
      const refusal = asStoreError(error, path, "append");
      if (!isRefusal(refusal)) throw error; // retryBusy retries a lock, maps the rest
      return [refusal as StoreError];
    }
  };
  const takeLease = db.prepare<
    [{ sessionId: string; owner: string; expiresAt: number; now: number; ifToken: number }],
    { token: number }
  >(
    `INSERT INTO leases AS l (session_id, owner, token, expires_at, released, pending)
     VALUES (@sessionId, @owner, 1, @expiresAt, 0, 0)
     ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, token = l.token + 1,
       expires_at = excluded.expires_at, released = 0, pending = 0
     WHERE l.released OR l.expires_at <= @now OR l.token = @ifToken
     RETURNING token`,
  );
  const acquire = db.transaction(
    (sessionId: string, owner: string, ttlMs: number, ifToken: number) => {
      const t = now();
      const before = leaseRow.get(sessionId);
      const row = takeLease.get({ sessionId, owner, expiresAt: t + ttlMs, now: t, ifToken });
      if (!row) return null;
      return {
        sessionId,
        owner,
        token: row.token,
        takeover: before !== undefined && !before.released,
      };
    },
  );
  const renew = db.prepare(
    "UPDATE leases SET expires_at = ? WHERE session_id = ? AND token = ? AND NOT released AND expires_at > ?",
  );
  const release = db.prepare(
    "UPDATE leases SET released = 1, pending = ? WHERE session_id = ? AND token = ? AND NOT released AND expires_at > ?",
  );
  const post = db.prepare(
    "INSERT INTO inbox (session_id, inbox_id, lane, source, body) VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, inbox_id) DO NOTHING",
  );
  const posted = db.prepare<[string], PostedInput>(
    "SELECT inbox_id AS id, lane, source, body FROM inbox WHERE session_id = ? AND NOT taken ORDER BY n",
  );
  const take = db.prepare("UPDATE inbox SET taken = 1 WHERE session_id = ? AND inbox_id = ?");
  const untaken = db
    .prepare<[], string>("SELECT DISTINCT session_id FROM inbox WHERE NOT taken")
    .pluck();
  const needing = db
    .prepare<[{ now: number; limit: number }], string>(
      `SELECT session_id FROM (
         SELECT DISTINCT session_id FROM inbox WHERE NOT taken
         UNION
         SELECT session_id FROM leases WHERE (released AND pending) OR (NOT released AND expires_at <= @now)
       ) need
       WHERE NOT EXISTS (SELECT 1 FROM leases l WHERE l.session_id = need.session_id
         AND NOT l.released AND l.expires_at > @now)
       LIMIT @limit`,
    )
    .pluck();
  const watchers = new Set<ReturnType<typeof setInterval>>();
  let closed = false;
  const refuseClosed = (what: string) =>
    new StoreError("CLOSED", `sqlite store ${path}: ${what} after close(); open a new store`);
  const guard = <T>(what: string, fn: () => T): T => {
    if (closed) throw refuseClosed(what);
    try {
      return fn();
    } catch (error) {
      throw asStoreError(error, path, what);
    }
  };
  /**
   * Runs `fn` at once; while another process holds a lock it needs (SQLITE_BUSY: nothing of the
   * try was written) it is retried from a timer until `busyTimeoutMs`, then fails with `BUSY`.
   * Every asynchronous operation of the store goes through it; reads rarely need it (WAL readers
   * wait only while a file is being recovered or its log reset).
   */
  const retryBusy = async <T>(what: string, fn: () => T): Promise<T> => {
    const deadline = performance.now() + busyTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      if (closed && what !== "append") throw refuseClosed(what);
      try {
        return fn();
      } catch (error) {
        if (!isBusy(error)) throw asStoreError(error, path, what);
        const left = deadline - performance.now();
        if (left <= 0) throw busy(path, what, busyTimeoutMs, error);
        await sleep(Math.min(left, backoff(attempt)));
      }
    }
  };
  const eraser = sqliteEraser(db, { path, now });
  const removeSession = db.transaction(eraser.deleteSession);
  const redactRows = db.transaction(eraser.redactEntries);
  /**
   * Empties the write-ahead log after a deletion or redaction, so no earlier version of a page
   * stays in it; while another connection keeps it from completing, tries again from a timer
   * until `busyTimeoutMs`, then fails with `BUSY` (the change itself is committed).
   */
  const emptyWal = async (what: string) => {
    const deadline = performance.now() + busyTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      if (closed) throw refuseClosed(what);
      if (truncateWal(db)) return;
      const left = deadline - performance.now();
      if (left <= 0)
        throw new StoreError(
          "BUSY",
          `sqlite store ${path}: ${what} is committed, but for ${busyTimeoutMs} ms another connection to the file kept its write-ahead log (${path}-wal) from being emptied, so the log may still hold copies of what was removed; call ${what} again once the other processes are idle (it can be repeated), or close them`,
        );
      await sleep(Math.min(left, backoff(attempt)));
    }
  };
  const committer = new GroupCommit<AppendRequest>({
    start: "immediate",
    key: (req) => req.sessionId,
    commit: (group) => retryBusy("append", () => commitGroup(group)),
  });
  const store: SqliteSessionStore = {
    kind: "sqlite",
    path,
    durability,
    transaction: (fn) =>
      guard("transaction", () => {
        if (db.inTransaction) return db.transaction(fn)();
        // Synchronous by contract: the one write that waits for the lock on this thread.
        db.pragma(`busy_timeout = ${busyTimeoutMs}`);
        try {
          return db.transaction(fn).immediate();
        } finally {
          db.pragma(`busy_timeout = ${Math.min(LOCK_SPIN_MS, busyTimeoutMs)}`);
        }
      }),
    async append(sessionId, entries, opts = {}) {
      if (closed) throw refuseClosed("append");
      if (entries.length === 0) return;
      return committer.submit({ sessionId, entries, options: opts });
    },
    async acquireLease(sessionId, owner, ttlMs, opts = {}) {
      return retryBusy("acquireLease", () =>
        acquire.immediate(sessionId, owner, ttlMs, opts.ifToken ?? -1),
      );
    },
    async renewLease(lease, ttlMs) {
      return retryBusy("renewLease", () => {
        const t = now();
        return renew.run(t + ttlMs, lease.sessionId, lease.token, t).changes === 1;
      });
    },
    async releaseLease(lease, opts = {}) {
      await retryBusy("releaseLease", () =>
        release.run(opts.pending ? 1 : 0, lease.sessionId, lease.token, now()),
      );
    },
    async readLease(sessionId): Promise<LeaseInfo | null> {
      return retryBusy("readLease", () => {
        const row = leaseRow.get(sessionId);
        if (!row) return null;
        return {
          sessionId,
          owner: row.owner,
          token: row.token,
          expiresInMs: row.expires_at - now(),
          released: row.released === 1,
          pending: row.pending === 1,
        };
      });
    },
    async postInput(sessionId, input) {
      await retryBusy("postInput", () =>
        post.run(sessionId, input.id, input.lane, input.source, input.body),
      );
    },
    async postedInputs(sessionId) {
      return retryBusy("postedInputs", () => posted.all(sessionId));
    },
    async markTaken(sessionId, ids) {
      await retryBusy("markTaken", () =>
        db
          .transaction(() => {
            for (const id of ids) take.run(sessionId, id);
          })
          .immediate(),
      );
    },
    async watchInputs(listener) {
      // SQLite has no notifications: the doorbell is a poll of the inbox table (the truth).
      const timer = setInterval(() => {
        if (closed) return;
        try {
          for (const id of untaken.all()) listener(id);
        } catch {
          // a busy file: the next tick reads again
        }
      }, 200);
      timer.unref();
      watchers.add(timer);
      return async () => {
        clearInterval(timer);
        watchers.delete(timer);
      };
    },
    async sessionsNeedingRunner(limit) {
      return retryBusy("sessionsNeedingRunner", () => {
        const t = now();
        return needing.all({ now: t, limit });
      });
    },
    async load(sessionId) {
      return retryBusy("load", () =>
        load.all(sessionId).map((body) => JSON.parse(body) as LogEntry),
      );
    },
    async loadAfter(sessionId, afterSeq) {
      return guard("load (the log's tail)", () =>
        loadRange
          .all(sessionId, afterSeq, Number.MAX_SAFE_INTEGER)
          .map((body) => JSON.parse(body) as LogEntry),
      );
    },
    async deleteSession(sessionId) {
      // Appends already called are written first: they must not recreate what is deleted.
      await committer.idle();
      const removed = await retryBusy("deleteSession", () => removeSession.immediate(sessionId));
      await emptyWal("deleteSession");
      return removed;
    },
    async redactEntries(sessionId, entryIds, redaction, opts = {}) {
      await committer.idle();
      const entries = await retryBusy("redactEntries", () =>
        redactRows.immediate(sessionId, entryIds, redaction, opts.lease),
      );
      await emptyWal("redactEntries");
      return entries;
    },
    async saveCheckpoint(sessionId, seq, body) {
      await retryBusy("saveCheckpoint", () => saveCheckpoint.run(sessionId, seq, body));
    },
    async loadFromCheckpoint(sessionId) {
      return retryBusy("loadFromCheckpoint", () => {
        const checkpoint = loadCheckpoint.get(sessionId);
        if (!checkpoint) return null;
        const decode = (from: number, to: number) =>
          loadRange.all(sessionId, from, to).map((body) => JSON.parse(body) as LogEntry);
        return {
          seq: checkpoint.seq,
          body: checkpoint.body,
          tail: decode(checkpoint.seq, Number.MAX_SAFE_INTEGER),
          loadPrefix: () =>
            retryBusy("load (history before the checkpoint)", () => decode(0, checkpoint.seq)),
          loadPrefixSync: () =>
            guard("load (history before the checkpoint)", () => decode(0, checkpoint.seq)),
        };
      });
    },
    async loadUpTo(sessionId, seq) {
      return retryBusy("load (history up to a checkpoint)", () =>
        loadRange.all(sessionId, 0, seq).map((body) => JSON.parse(body) as LogEntry),
      );
    },
    loadUpToSync(sessionId, seq) {
      return guard("load (history up to a checkpoint)", () =>
        loadRange.all(sessionId, 0, seq).map((body) => JSON.parse(body) as LogEntry),
      );
    },
    async list(): Promise<SessionSummary[]> {
      return retryBusy("list", () =>
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
      for (const timer of watchers) clearInterval(timer);
      await committer.idle(); // appends already called are written, then the file is closed
      db.close();
    },
  };
  rememberDatabase(store, db, retryBusy);
  rememberGroupCommit(store, committer);
  return store;
}

/**
 * Brings the file to {@link SCHEMA_VERSION} in one IMMEDIATE transaction (so two processes
 * opening an old file do not both migrate it, and a failure leaves the file as it was): creates
 * the tables of a new file; on a version 0/1 file drops the summary columns `sessions` no longer
 * keeps (their values are read from `entries` now); on a version 0–2 file rewrites the bodies of
 * entries written in log schema 2 (`upgradeEntryV2`) and drops the checkpoints. Throws a
 * `StoreError` naming the file when it cannot.
 */
function migrate(db: Database.Database, path: string): void {
  const SUMMARY = ["updated_at", "entries", "last_seq"];
  const run = db.transaction(() => {
    if (schemaVersion(db, path) === SCHEMA_VERSION) return; // another process just did it
    db.exec(SCHEMA);
    const columns = db.prepare("SELECT name FROM pragma_table_info('sessions')").pluck().all();
    for (const column of SUMMARY) {
      if (!columns.includes(column)) continue;
      try {
        db.exec(`ALTER TABLE sessions DROP COLUMN ${column}`);
      } catch (error) {
        throw new StoreError(
          "IO",
          `sqlite store ${path}: cannot migrate Keel's tables to schema version ${SCHEMA_VERSION}: dropping sessions.${column} failed (${(error as Error).message}); a view, trigger or index of yours that uses sessions.${SUMMARY.join("/")} must be dropped first`,
          { cause: error },
        );
      }
    }
    upgradeBodies(db);
    db.prepare(
      "INSERT INTO keel_meta (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    ).run(SCHEMA_VERSION);
  });
  try {
    run.immediate();
  } catch (error) {
    throw asStoreError(error, path, "open (schema)");
  }
}

/** Rewrites schema-2 entry bodies to schema 3 and drops the checkpoints; inside `migrate`'s transaction. */
function upgradeBodies(db: Database.Database): void {
  const rows = db
    .prepare<[], { session_id: string; seq: number; body: string }>(
      "SELECT session_id, seq, body FROM entries WHERE type IN ('assistant_message', 'attempt_end')",
    )
    .iterate();
  const update = db.prepare("UPDATE entries SET body = ? WHERE session_id = ? AND seq = ?");
  const changed: [string, string, number][] = [];
  for (const row of rows) {
    const upgraded = upgradeEntryV2(JSON.parse(row.body));
    if (upgraded) changed.push([JSON.stringify(upgraded), row.session_id, row.seq]);
  }
  for (const args of changed) update.run(...args);
  db.exec("DELETE FROM checkpoints");
}

/**
 * The version of Keel's tables in the file (0: none, or from before versions were kept). Reads
 * only. Throws a `StoreError` when a newer Keel wrote the file.
 */
function schemaVersion(db: Database.Database, path: string): number {
  const hasMeta = db
    .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'keel_meta'")
    .get();
  const value = hasMeta
    ? db.prepare("SELECT value FROM keel_meta WHERE key = 'schema_version'").pluck().get()
    : undefined;
  const version = typeof value === "number" ? value : 0;
  if (version > SCHEMA_VERSION) {
    throw new StoreError(
      "IO",
      `sqlite store ${path}: Keel's tables in this file are schema version ${version}, newer than this Keel's ${SCHEMA_VERSION}; open it with a newer Keel`,
    );
  }
  return version;
}

const require = createRequire(import.meta.url);

/** better-sqlite3, an optional peer: loaded when the first SQLite store opens. */
function betterSqlite3(): typeof Database {
  return loadPeer<typeof Database>(
    require,
    "better-sqlite3",
    "sqliteStore (the SQLite session store)",
  );
}

function openDatabase(path: string): Database.Database {
  const Sqlite = betterSqlite3(); // before anything is created: .keel/ included
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
    const db = new Sqlite(path);
    db.pragma("user_version"); // touches the file: fails now, not at the first append
    return db;
  } catch (error) {
    throw openError(error, path);
  }
}

/**
 * Opens an existing file read-only. SQLite reads a WAL file through its `-shm` companion, which
 * it must be able to create: in a folder this user cannot write, the file is read from a copy
 * in memory instead (complete when no `-wal` holds frames not yet in the file).
 */
function openReadOnly(path: string): Database.Database {
  const Sqlite = betterSqlite3();
  if (!existsSync(path)) {
    throw new StoreError("IO", `no session store at ${path}: pass the file a session was run with`);
  }
  try {
    const db = new Sqlite(path, { readonly: true, fileMustExist: true });
    db.pragma("user_version");
    return db;
  } catch (error) {
    const code = (error as { code?: string }).code ?? "";
    if (code !== "SQLITE_READONLY_DIRECTORY" && code !== "SQLITE_CANTOPEN") {
      throw openError(error, path);
    }
  }
  const wal = `${path}-wal`;
  if (existsSync(wal) && statSync(wal).size > 0) {
    throw new StoreError(
      "NOT_WRITABLE",
      `the session store ${path} cannot be read: its folder is read-only for this user and its write-ahead log (${wal}) holds changes not yet in the file; open it once as a user who can write the folder`,
    );
  }
  const bytes = readFileSync(path);
  // The header's read and write versions (bytes 18 and 19) say WAL (2); an in-memory copy
  // cannot use WAL, and with no -wal to read the file alone is the whole database.
  if (bytes.length >= 20 && bytes[18] === 2 && bytes[19] === 2) bytes[18] = bytes[19] = 1;
  try {
    const db = new Sqlite(bytes, { readonly: true });
    db.pragma("user_version");
    return db;
  } catch (error) {
    throw openError(error, path);
  }
}

/** A store file of an older version, opened read-only: it cannot be migrated. */
function notCurrent(path: string, version: number): StoreError {
  return new StoreError(
    "IO",
    version === 0
      ? `${path} holds no Keel sessions (it is a SQLite file without Keel's tables): pass the store file a session was run with`
      : `the session store ${path} is schema version ${version}, older than this Keel's ${SCHEMA_VERSION}: open it once for writing (e.g. keel run) to upgrade it`,
  );
}

/**
 * What went wrong opening the file, in one message that names the path and the fix for that
 * cause: corrupted (`CORRUPT`), locked by another process (`LOCKED`), or not writable
 * (`NOT_WRITABLE`). A `StoreError` passes through unchanged.
 */
function openError(error: unknown, path: string): unknown {
  if (error instanceof StoreError) return error;
  const code = (error as { code?: string }).code ?? "";
  const sqlite = `SQLite: ${(error as Error).message}`;
  if (code === "SQLITE_NOTADB" || code.startsWith("SQLITE_CORRUPT")) {
    return new StoreError(
      "CORRUPT",
      `the session store ${path} is not a SQLite database or is corrupted (${sqlite}): move it aside and run again to start a new store, or pass another store path`,
      { cause: error },
    );
  }
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) {
    return new StoreError(
      "LOCKED",
      `the session store ${path} is locked by another process (${sqlite}): wait for it to finish, or stop it`,
      { cause: error },
    );
  }
  if (
    code.startsWith("SQLITE_READONLY") ||
    code.startsWith("SQLITE_CANTOPEN") ||
    code === "SQLITE_PERM" ||
    code === "SQLITE_AUTH"
  ) {
    return new StoreError(
      "NOT_WRITABLE",
      `the session store ${path} cannot be opened for writing by this user (${sqlite}): make the file and its folder writable, or pass another store path`,
      { cause: error },
    );
  }
  if (code.startsWith("SQLITE_")) {
    return new StoreError("IO", `the session store ${path} cannot be opened (${sqlite})`, {
      cause: error,
    });
  }
  return error;
}

/** A refusal of one call's batch, which fails that call alone (see `appendGroup`). */
function isRefusal(error: unknown): boolean {
  if (!(error instanceof StoreError)) return false;
  return error.code === "FENCED" || error.code === "SEQ_CONFLICT" || error.code === "DUPLICATE_ID";
}

/** Another connection holds the lock this write needs (nothing of the try was written). */
function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && code.startsWith("SQLITE_BUSY");
}

function busy(path: string, what: string, ms: number, cause: unknown): StoreError {
  return new StoreError(
    "BUSY",
    `sqlite store ${path}: ${what}: the file stayed locked by other writing processes for ${ms} ms (busyTimeoutMs), so nothing was written. Processes writing one SQLite file take turns on its lock; past a few busy writers use PostgreSQL (postgresStore, docs/many-processes.md), or raise busyTimeoutMs`,
    { cause },
  );
}

/** The wait before retry `attempt` (0-based) of a write that found the file locked: 1 … 16 ms, jittered. */
function backoff(attempt: number): number {
  return 2 ** Math.min(attempt, 4) * (0.5 + Math.random());
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

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
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) {
    return new StoreError(
      "LOCKED",
      `sqlite store ${path}: ${what} failed: the file is locked by another process (${code}); wait for it to finish, or stop it`,
      { cause: error },
    );
  }
  if (code.startsWith("SQLITE_READONLY") || code === "SQLITE_CANTOPEN" || code === "SQLITE_PERM") {
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
