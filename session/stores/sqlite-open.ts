// Opening a SQLite store's file and bringing Keel's tables in it to the current schema: the
// schema text, the version check that refuses a newer Keel's file, the migrations of older ones,
// and the read-only open that copies a file out of a folder this user cannot write. Kept apart
// from session/stores/sqlite-store.ts, which runs the store's statements over the file once open;
// `sqliteStore` decides in which order these run (the version check before any pragma).
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, resolve } from "node:path";
import type Database from "better-sqlite3";
import { loadPeer } from "../../contracts/optional-peer.ts";
import { parseObject } from "../decode.ts";
import { LOG_SCHEMA_VERSION } from "../entries.ts";
import { StoreError } from "../store-error.ts";
import { upgradeEntryV2 } from "../upgrade-entry.ts";
import { asStoreError, openError } from "./sqlite-errors.ts";

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
export const SCHEMA_VERSION = LOG_SCHEMA_VERSION;

/** Keel's tables, each created only if missing: run on every writable open of a current file. */
export const SCHEMA = `
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
 * Brings the file to {@link SCHEMA_VERSION} in one IMMEDIATE transaction (so two processes
 * opening an old file do not both migrate it, and a failure leaves the file as it was): creates
 * the tables of a new file; on a version 0/1 file drops the summary columns `sessions` no longer
 * keeps (their values are read from `entries` now); on a version 0–2 file rewrites the bodies of
 * entries written in log schema 2 (`upgradeEntryV2`) and drops the checkpoints. Throws a
 * `StoreError` naming the file when it cannot.
 */
export function migrate(db: Database.Database, path: string): void {
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
    // A body that is not an object is left as it is: loading it reports it, naming its seq.
    const value = parseObject(row.body);
    const upgraded = value && upgradeEntryV2(value);
    if (upgraded) changed.push([JSON.stringify(upgraded), row.session_id, row.seq]);
  }
  for (const args of changed) update.run(...args);
  db.exec("DELETE FROM checkpoints");
}

/**
 * The version of Keel's tables in the file (0: none, or from before versions were kept). Reads
 * only. Throws a `StoreError` when a newer Keel wrote the file.
 */
export function schemaVersion(db: Database.Database, path: string): number {
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

/**
 * Opens the file for writing, creating it and its directory if needed; touches it at once, so a
 * file that cannot be opened fails here (a `StoreError` naming the path and the fix), not at the
 * first append.
 */
export function openDatabase(path: string): Database.Database {
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
export function openReadOnly(path: string): Database.Database {
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
export function notCurrent(path: string, version: number): StoreError {
  return new StoreError(
    "IO",
    version === 0
      ? `${path} holds no Keel sessions (it is a SQLite file without Keel's tables): pass the store file a session was run with`
      : `the session store ${path} is schema version ${version}, older than this Keel's ${SCHEMA_VERSION}: open it once for writing (e.g. keel run) to upgrade it`,
  );
}
