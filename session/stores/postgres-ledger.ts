import type pg from "pg";
import {
  type AtomicClaim,
  createLedger,
  decodeLedgerRow,
  type Ledger,
  type LedgerOptions,
  type LedgerRecord,
  type LedgerRow,
} from "./ledger.ts";
import type { PostgresSessionStore } from "./postgres-store.ts";

/**
 * An idempotency ledger in the PostgreSQL store's schema (table `ledger`). A key is claimed by
 * ONE statement, `INSERT … ON CONFLICT DO UPDATE … WHERE expired RETURNING`: of any number of
 * processes racing a key, exactly one gets the row back and runs the effect; the others read the
 * row the winner wrote (waiting for its transaction, if it is still open). With
 * `{ atomic: true }`, `ctx.transact(async (client) => …)` runs the effect on the transaction's
 * `pg` client: claim, effect and `done` row commit together. See {@link Ledger}.
 */
export function postgresLedger(store: PostgresSessionStore, options: LedgerOptions): Ledger {
  const s = store.schema;
  const claimSql = `INSERT INTO ${s}.ledger AS l (caller, key, fingerprint, status, result, created_at, updated_at)
    VALUES ($1, $2, $3, $4, NULL, $5, $6)
    ON CONFLICT (caller, key) DO UPDATE SET fingerprint = excluded.fingerprint, status = excluded.status,
      result = NULL, created_at = excluded.created_at, updated_at = excluded.updated_at
    WHERE l.updated_at < $7
    RETURNING caller`;
  const readSql = `SELECT * FROM ${s}.ledger WHERE caller = $1 AND key = $2`;
  const finishSql = `UPDATE ${s}.ledger SET fingerprint = $3, status = $4, result = $5, updated_at = $6
    WHERE caller = $1 AND key = $2`;
  const claimOrGet = async (
    q: pg.Pool | pg.PoolClient,
    row: LedgerRecord,
    liveAfter: number,
  ): Promise<LedgerRecord | null> => {
    const claimed = await q.query(claimSql, [
      row.caller,
      row.key,
      row.fingerprint,
      row.status,
      row.createdAt,
      row.updatedAt,
      liveAfter,
    ]);
    if (claimed.rowCount === 1) return null;
    // Lost: the winner's row is committed (ON CONFLICT waited for its transaction).
    const existing = await q.query<LedgerRow>(readSql, [row.caller, row.key]);
    if (!existing.rows[0]) throw new Error(`ledger ${row.caller}/${row.key}: claim found no row`);
    return decodeLedgerRow(existing.rows[0]);
  };
  const finish = (q: pg.Pool | pg.PoolClient, row: LedgerRecord) =>
    q.query(finishSql, [
      row.caller,
      row.key,
      row.fingerprint,
      row.status,
      row.result === undefined ? null : JSON.stringify(row.result),
      row.updatedAt,
    ]);
  return createLedger(
    {
      claim: (row, liveAfter) => claimOrGet(store.pool, row, liveAfter),
      async finish(row) {
        await finish(store.pool, row);
      },
      async read(caller, key) {
        const r = await store.pool.query<LedgerRow>(readSql, [caller, key]);
        return r.rows[0] ? decodeLedgerRow(r.rows[0]) : undefined;
      },
      async purgeBefore(at) {
        const r = await store.pool.query(`DELETE FROM ${s}.ledger WHERE updated_at < $1`, [at]);
        return r.rowCount ?? 0;
      },
      async atomic<R>(
        row: LedgerRecord,
        liveAfter: number,
        effect: (handle: unknown) => R | Promise<R>,
      ): Promise<AtomicClaim<R>> {
        const client = await store.pool.connect();
        try {
          await client.query("BEGIN");
          const existing = await claimOrGet(client, row, liveAfter);
          if (existing) {
            await client.query("ROLLBACK");
            return { claimed: false, row: existing };
          }
          const result = await effect(client);
          await finish(client, { ...row, status: "done", result, updatedAt: options.clock.now() });
          await client.query("COMMIT");
          return { claimed: true, result };
        } catch (error) {
          await client.query("ROLLBACK").catch(() => {});
          throw error;
        } finally {
          client.release();
        }
      },
    },
    options,
  );
}
