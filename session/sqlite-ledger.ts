import type Database from "better-sqlite3";
import { createLedger, type Ledger, type LedgerOptions, type LedgerRecord } from "./ledger.ts";
import { sqliteDatabase } from "./sqlite-handle.ts";
import type { SqliteSessionStore } from "./sqlite-store.ts";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS ledger (
  caller TEXT NOT NULL,
  key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  status TEXT NOT NULL,
  result TEXT,
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL,
  PRIMARY KEY (caller, key)
);
CREATE INDEX IF NOT EXISTS ledger_by_age ON ledger (updated_at);
`;

interface Row {
  caller: string;
  key: string;
  fingerprint: string;
  status: "started" | "done";
  result: string | null;
  created_at: number;
  updated_at: number;
}

/**
 * An idempotency ledger in the session store's SQLite database (table `ledger`), so a ledger
 * row can commit in the same transaction as the change it guards: with `{ atomic: true }`,
 * `ctx.transact((db) => …)` runs the effect on `db` (the store's `better-sqlite3` handle) and
 * records the result in one IMMEDIATE transaction. Rows written by one process are seen by
 * every process sharing the file; `started` and `done` rows are committed (durable to the
 * store's durability level) before `run` proceeds. See {@link Ledger} for the full contract.
 */
export function sqliteLedger(store: SqliteSessionStore, options: LedgerOptions): Ledger {
  const db: Database.Database = sqliteDatabase(store);
  db.exec(SCHEMA);
  const read = db.prepare<[string, string], Row>(
    "SELECT * FROM ledger WHERE caller = ? AND key = ?",
  );
  const write = db.prepare(
    `INSERT INTO ledger (caller, key, fingerprint, status, result, created_at, updated_at)
     VALUES (@caller, @key, @fingerprint, @status, @result, @createdAt, @updatedAt)
     ON CONFLICT (caller, key) DO UPDATE SET fingerprint = excluded.fingerprint,
       status = excluded.status, result = excluded.result, updated_at = excluded.updated_at`,
  );
  const purge = db.prepare("DELETE FROM ledger WHERE updated_at < ?");
  return createLedger(
    {
      read(caller, key): LedgerRecord | undefined {
        const r = read.get(caller, key);
        if (!r) return undefined;
        return {
          caller: r.caller,
          key: r.key,
          fingerprint: r.fingerprint,
          status: r.status,
          ...(r.result === null ? {} : { result: JSON.parse(r.result) }),
          createdAt: r.created_at,
          updatedAt: r.updated_at,
        };
      },
      write(row) {
        write.run({ ...row, result: row.result === undefined ? null : JSON.stringify(row.result) });
      },
      purgeBefore: (at) => purge.run(at).changes,
      transaction: (fn) => store.transaction(fn),
      handle: db,
      supportsAtomic: true,
    },
    options,
  );
}
