// The SQLite session store: `sqliteStore` and its options and types, each operation one
// transaction over the file's statements, with group commit, lease fencing and the asynchronous
// wait for another process's lock. Opening and migrating the file is in session/stores/sqlite-open.ts,
// the SQL in session/stores/sqlite-statements.ts, the error mapping in session/stores/sqlite-errors.ts; this
// file stays the entry point the rest of Keel imports.
import { join, resolve } from "node:path";
import { durationOption } from "../../contracts/clock.ts";
import type { CheckpointLoad, CheckpointStore } from "../checkpoint.ts";
import { decodeEntries } from "../decode.ts";
import type { LogEntry } from "../entries.ts";
import type {
  AppendOptions,
  LeaseInfo,
  LeaseStore,
  SessionStore,
  SessionSummary,
} from "../store.ts";
import { checkBatch, fenced, StoreError } from "../store-error.ts";
import { type CommitOutcome, GroupCommit, rememberGroupCommit } from "./group-commit.ts";
import { sqliteEraser, truncateWal } from "./sqlite-erase.ts";
import {
  asStoreError,
  backoff,
  busy,
  isBusy,
  isRefusal,
  openError,
  sleep,
} from "./sqlite-errors.ts";
import { rememberDatabase } from "./sqlite-handle.ts";
import {
  migrate,
  notCurrent,
  openDatabase,
  openReadOnly,
  SCHEMA,
  SCHEMA_VERSION,
  schemaVersion,
} from "./sqlite-open.ts";
import { sqliteStatements } from "./sqlite-statements.ts";

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
 * `sqliteDatabase` (session/stores/sqlite-handle.ts), and an atomic ledger run hands it to the effect (`ctx.transact`).
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
 * Opens (creating it and its directory if needed) a SQLite session store: WAL journal, entries
 * stored as JSON with `session_id, seq, id, parent_id, type, at` columns, a `sessions` table of
 * when each began (an older file is migrated when opened).
 *
 * Group commit: the appends of every session of this store issued before the event loop's next
 * check phase (`setImmediate`) are written in one IMMEDIATE transaction, each call's batch in a
 * savepoint of its own: a call refused (fenced, seq conflict, duplicate id) writes nothing and
 * fails alone, the others commit. A session writing alone does not wait for the check phase,
 * but for once every 10 ms (session/stores/group-commit.ts). Each `append` resolves once the
 * transaction holding its batch has committed (durable to `durability`).
 *
 * Several processes may share the file: writes serialise on SQLite's lock. A write waits at most
 * `LOCK_SPIN_MS` inside SQLite, then retries from a timer until `busyTimeoutMs` and fails
 * with `BUSY` (nothing written), so waiting never stops the event loop (docs/many-processes.md).
 * Throws a `StoreError` naming the path and the fix when it cannot open it (`NOT_WRITABLE`) or a
 * newer Keel wrote it (`IO`).
 */
export function sqliteStore(path: string, options: SqliteStoreOptions = {}): SqliteSessionStore {
  if (typeof path !== "string" || path.length === 0) {
    throw new TypeError(
      `sqliteStore: the first argument is the database file's path, a non-empty string, and options come second: sqliteStore(".keel/sessions.db", { durability: "power" }); got ${path === null ? "null" : typeof path}`,
    );
  }
  const durability = options.durability ?? "process";
  const busyTimeoutMs = durationOption(
    "sqliteStore: `busyTimeoutMs`",
    options.busyTimeoutMs,
    5000,
    {
      min: 0,
    },
  );
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
  const sql = sqliteStatements(db);
  const site = (sessionId: string) => ({ store: `sqlite store ${path}`, sessionId });
  /** The session's entries with `from` < seq ≤ `to`, decoded (reads the file: inside a guard). */
  const loadRange = (sessionId: string, from: number, to: number) =>
    decodeEntries(sql.loadRange.all(sessionId, from, to), site(sessionId));
  // Leases use this host's wall clock (every process sharing the file is on this host).
  const now = options.now ?? (() => Date.now());
  // One call's batch. Called inside the group's transaction, so better-sqlite3 wraps it in a
  // savepoint: a refusal rolls back only this batch.
  const appendOne = db.transaction((req: AppendRequest) => {
    const { sessionId, entries, options: opts } = req;
    const lease = sql.leaseRow.get(sessionId);
    const live = lease !== undefined && !lease.released && lease.expires_at > now();
    if (opts.lease) {
      if (!live || lease.token !== opts.lease.token)
        throw fenced(sessionId, `sqlite store ${path}`, opts.lease.token);
    } else if (live) {
      throw fenced(sessionId, `sqlite store ${path}`, undefined);
    }
    const last = sql.lastSeq.get(sessionId) ?? 0;
    const error = checkBatch(sessionId, last, entries);
    if (error) throw error;
    sql.begin.run(sessionId, entries[0].at);
    for (const e of entries)
      sql.insert.run(sessionId, e.seq, e.id, e.parentId, e.type, e.at, JSON.stringify(e));
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
  const acquire = db.transaction(
    (sessionId: string, owner: string, ttlMs: number, ifToken: number) => {
      const t = now();
      const before = sql.leaseRow.get(sessionId);
      const row = sql.takeLease.get({ sessionId, owner, expiresAt: t + ttlMs, now: t, ifToken });
      if (!row) return null;
      return {
        sessionId,
        owner,
        token: row.token,
        takeover: before !== undefined && !before.released,
      };
    },
  );
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
  /** The latest checkpoint and the entries after it (reads the file: call inside a guard). */
  const checkpointLoad = (sessionId: string): CheckpointLoad | null => {
    const checkpoint = sql.loadCheckpoint.get(sessionId);
    if (!checkpoint) return null;
    const decode = (from: number, to: number) => loadRange(sessionId, from, to);
    return {
      seq: checkpoint.seq,
      body: checkpoint.body,
      tail: decode(checkpoint.seq, Number.MAX_SAFE_INTEGER),
      loadPrefix: () =>
        retryBusy("load (history before the checkpoint)", () => decode(0, checkpoint.seq)),
      loadPrefixSync: () =>
        guard("load (history before the checkpoint)", () => decode(0, checkpoint.seq)),
    };
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
        return sql.renew.run(t + ttlMs, lease.sessionId, lease.token, t).changes === 1;
      });
    },
    async releaseLease(lease, opts = {}) {
      await retryBusy("releaseLease", () =>
        sql.release.run(opts.pending ? 1 : 0, lease.sessionId, lease.token, now()),
      );
    },
    async readLease(sessionId): Promise<LeaseInfo | null> {
      return retryBusy("readLease", () => {
        const row = sql.leaseRow.get(sessionId);
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
        sql.post.run(sessionId, input.id, input.lane, input.source, input.body),
      );
    },
    async postedInputs(sessionId) {
      return retryBusy("postedInputs", () => sql.posted.all(sessionId));
    },
    async markTaken(sessionId, ids) {
      await retryBusy("markTaken", () =>
        db
          .transaction(() => {
            for (const id of ids) sql.take.run(sessionId, id);
          })
          .immediate(),
      );
    },
    async watchInputs(listener) {
      // SQLite has no notifications: the doorbell is a poll of the inbox table (the truth).
      const timer = setInterval(() => {
        if (closed) return;
        try {
          for (const id of sql.untaken.all()) listener(id);
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
        return sql.needing.all({ now: t, limit });
      });
    },
    async load(sessionId) {
      return retryBusy("load", () => decodeEntries(sql.load.all(sessionId), site(sessionId)));
    },
    async loadAfter(sessionId, afterSeq) {
      return guard("load (the log's tail)", () =>
        loadRange(sessionId, afterSeq, Number.MAX_SAFE_INTEGER),
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
      await retryBusy("saveCheckpoint", () => sql.saveCheckpoint.run(sessionId, seq, body));
    },
    async loadFromCheckpoint(sessionId) {
      return retryBusy("loadFromCheckpoint", () => checkpointLoad(sessionId));
    },
    loadFromCheckpointSync(sessionId) {
      return guard("loadFromCheckpoint", () => checkpointLoad(sessionId));
    },
    async loadUpTo(sessionId, seq) {
      return retryBusy("load (history up to a checkpoint)", () => loadRange(sessionId, 0, seq));
    },
    loadUpToSync(sessionId, seq) {
      return guard("load (history up to a checkpoint)", () => loadRange(sessionId, 0, seq));
    },
    async list(): Promise<SessionSummary[]> {
      return retryBusy("list", () =>
        sql.list.all().map((r) => ({
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
