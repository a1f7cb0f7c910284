import type pg from "pg";
import type { RetryBudget } from "./retry-budget.ts";

/** Options of {@link postgresRetryBudget}. */
export interface PostgresRetryBudgetOptions {
  /** Tokens added per second per provider key (≥ 0). */
  ratePerSec: number;
  /** Bucket size, and the tokens each key starts with (≥ 1). */
  burst: number;
  /** Schema of Keel's tables (default `keel`; `postgresStore` creates the `retry_budget` table). */
  schema?: string;
  /** Tokens each process takes at once into its local reserve (default 1). */
  reserve?: number;
}

/** A retry budget shared by every process on one database; see {@link postgresRetryBudget}. */
export interface PostgresRetryBudget extends RetryBudget {
  /**
   * Takes `n` tokens for `providerKey` in ONE statement (refill by elapsed time, then decrement
   * if enough): resolves true when taken, false (nothing taken) when the bucket has fewer.
   */
  take(providerKey: string, n?: number): Promise<boolean>;
  /** Tokens in the shared row now (refilled to this moment), without taking any. */
  available(providerKey: string): Promise<number>;
}

/**
 * The shared token bucket (docs/providers.md, "Retries") across processes and hosts: one row per provider key in
 * `<schema>.retry_budget`, refilled continuously at `ratePerSec` up to `burst` by the database's
 * clock, and taken atomically by one `INSERT … ON CONFLICT DO UPDATE … RETURNING` (row lock, no
 * read-modify-write race).
 *
 * `tryAcquire` is synchronous (the retry policy asks it mid-decision), so each process answers it
 * from a small local reserve taken from the row ahead of need: a token in reserve answers true,
 * an empty reserve answers false and takes more in the background. The runtime calls `warm` as
 * each model request starts, which fills an empty reserve then, so a process's first retry on a
 * provider finds its token (the request's own round trip is time enough for the one statement).
 * Reserved tokens are out of the shared row: with P processes the others see at most
 * `burst − P·reserve` at once. `take` is the exact, asynchronous form.
 * Throws a RangeError on invalid options.
 */
export function postgresRetryBudget(
  pool: pg.Pool,
  options: PostgresRetryBudgetOptions,
): PostgresRetryBudget {
  const { ratePerSec, burst } = options;
  if (!Number.isFinite(ratePerSec) || ratePerSec < 0)
    throw new RangeError(
      `postgresRetryBudget: ratePerSec must be a finite number ≥ 0, got ${ratePerSec}`,
    );
  if (!Number.isInteger(burst) || burst < 1)
    throw new RangeError(`postgresRetryBudget: burst must be an integer ≥ 1, got ${burst}`);
  const reserveSize = options.reserve ?? 1;
  const s = `"${options.schema ?? "keel"}"`;
  // refilled = min(burst, tokens + elapsed·rate); take n when refilled ≥ n. One statement.
  const takeSql = `INSERT INTO ${s}.retry_budget AS b (provider, tokens, updated_at)
    VALUES ($1, $2::float8 - $4::float8, clock_timestamp())
    ON CONFLICT (provider) DO UPDATE SET
      tokens = least($2::float8, b.tokens + extract(epoch FROM clock_timestamp() - b.updated_at) * $3::float8) - $4::float8,
      updated_at = clock_timestamp()
    WHERE least($2::float8, b.tokens + extract(epoch FROM clock_timestamp() - b.updated_at) * $3::float8) >= $4::float8 - 1e-9
    RETURNING tokens`;
  const reserve = new Map<string, number>();
  const refilling = new Set<string>();
  const take = async (providerKey: string, n = 1) => {
    const r = await pool.query(takeSql, [providerKey, burst, ratePerSec, n]);
    return r.rowCount === 1;
  };
  const refill = (key: string) => {
    if (refilling.has(key)) return;
    refilling.add(key);
    take(key, reserveSize)
      .then((ok) => {
        if (ok) reserve.set(key, (reserve.get(key) ?? 0) + reserveSize);
      })
      .catch(() => {}) // a lost connection: no tokens, so no retries (fail safe)
      .finally(() => refilling.delete(key));
  };
  return {
    tryAcquire(providerKey) {
      const have = reserve.get(providerKey) ?? 0;
      if (have >= 1) {
        reserve.set(providerKey, have - 1);
        if (have - 1 < 1) refill(providerKey);
        return true;
      }
      refill(providerKey);
      return false;
    },
    warm(providerKey) {
      if ((reserve.get(providerKey) ?? 0) < 1) refill(providerKey);
    },
    take,
    async available(providerKey) {
      const r = await pool.query<{ tokens: number }>(
        `SELECT least($2::float8, tokens + extract(epoch FROM clock_timestamp() - updated_at) * $3::float8) AS tokens
         FROM ${s}.retry_budget WHERE provider = $1`,
        [providerKey, burst, ratePerSec],
      );
      return r.rows[0] ? Number(r.rows[0].tokens) : burst;
    },
  };
}
