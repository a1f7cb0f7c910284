import type Database from "better-sqlite3";
import {
  type AtomicClaim,
  createLedger,
  decodeLedgerRow,
  type Ledger,
  type LedgerOptions,
  type LedgerRecord,
  type LedgerRow,
} from "./ledger.ts";
import { sqliteDatabase, sqliteTransaction } from "./sqlite-handle.ts";
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

const encode = (row: LedgerRecord) => ({
  ...row,
  result: row.result === undefined ? null : JSON.stringify(row.result),
});

/**
 * An idempotency ledger in the session store's SQLite database (table `ledger`), so a ledger
 * row can commit in the same transaction as the change it guards: with `{ atomic: true }`,
 * `ctx.transact((db) => …)` runs the effect on `db` (the store's `better-sqlite3` handle; the
 * effect must be synchronous) and records the result in one IMMEDIATE transaction. A key is
 * claimed by one statement (`INSERT … ON CONFLICT … DO UPDATE … WHERE expired RETURNING`), so
 * two processes sharing the file never both run it. See {@link Ledger} for the full contract.
 */
export function sqliteLedger(store: SqliteSessionStore, options: LedgerOptions): Ledger {
  const db: Database.Database = sqliteDatabase(store);
  db.exec(SCHEMA);
  const read = db.prepare<[string, string], LedgerRow>(
    "SELECT * FROM ledger WHERE caller = ? AND key = ?",
  );
  // Claim-or-get: a new row, or an expired one replaced; nothing (no row returned) when live.
  const claim = db
    .prepare(
      `INSERT INTO ledger (caller, key, fingerprint, status, result, created_at, updated_at)
       VALUES (@caller, @key, @fingerprint, @status, @result, @createdAt, @updatedAt)
       ON CONFLICT (caller, key) DO UPDATE SET fingerprint = excluded.fingerprint,
         status = excluded.status, result = excluded.result, created_at = excluded.created_at,
         updated_at = excluded.updated_at
       WHERE ledger.updated_at < @liveAfter
       RETURNING caller`,
    )
    .pluck();
  const finish = db.prepare(
    `UPDATE ledger SET fingerprint = @fingerprint, status = @status, result = @result,
       updated_at = @updatedAt WHERE caller = @caller AND key = @key`,
  );
  const purge = db.prepare("DELETE FROM ledger WHERE updated_at < ?");
  const claimOrGet = (row: LedgerRecord, liveAfter: number): LedgerRecord | null => {
    if (claim.get({ ...encode(row), liveAfter }) !== undefined) return null;
    const existing = read.get(row.caller, row.key);
    if (!existing) throw new Error(`ledger ${row.caller}/${row.key}: claim found no row`);
    return decodeLedgerRow(existing);
  };
  return createLedger(
    {
      async claim(row, liveAfter) {
        return sqliteTransaction(store, () => claimOrGet(row, liveAfter));
      },
      async finish(row) {
        await sqliteTransaction(store, () => finish.run(encode(row)));
      },
      async read(caller, key) {
        const r = read.get(caller, key);
        return r ? decodeLedgerRow(r) : undefined;
      },
      purgeBefore: (at) => sqliteTransaction(store, () => purge.run(at).changes),
      async atomic<R>(
        row: LedgerRecord,
        liveAfter: number,
        effect: (handle: unknown) => R | Promise<R>,
      ): Promise<AtomicClaim<R>> {
        return sqliteTransaction(store, () => {
          const existing = claimOrGet(row, liveAfter);
          if (existing) return { claimed: false, row: existing };
          const result = effect(db);
          if (result && typeof (result as { then?: unknown }).then === "function") {
            throw new TypeError(
              `ledger ${row.caller}/${row.key}: a SQLite atomic effect must be synchronous (better-sqlite3 cannot hold a transaction across an await); do the async part before or after ctx.transact`,
            );
          }
          finish.run(encode({ ...row, status: "done", result, updatedAt: options.clock.now() }));
          return { claimed: true, result: result as R };
        });
      },
    },
    options,
  );
}
