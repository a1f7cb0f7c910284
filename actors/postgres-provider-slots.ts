import { randomUUID } from "node:crypto";
import type pg from "pg";
import { durationOption } from "../contracts/clock.ts";
import {
  checkConcurrency,
  type ProviderSlots,
  SlotLostError,
  type SlotRelease,
} from "./provider-slots.ts";

/** Options of {@link postgresProviderSlots}. */
export interface PostgresProviderSlotsOptions {
  /** Requests in flight per provider key, across every process (`{ openai: 8 }`). */
  limits: Readonly<Record<string, number>>;
  /** Schema of Keel's tables (default `keel`); the `provider_slots` table is created on first use. */
  schema?: string;
  /**
   * How long a slot row lives without renewal (default 30 000 ms): a killed process's slots
   * come back after it. A holder renews its rows every third of it.
   */
  leaseMs?: number;
  /** How often a waiting process looks for a free slot without a notification (default 250 ms). */
  pollMs?: number;
}

/** Provider slots shared through PostgreSQL; see {@link postgresProviderSlots}. */
export interface PostgresProviderSlots extends ProviderSlots {
  /** Live slot rows of `providerKey` now (held and not expired), across every process. */
  held(providerKey: string): Promise<number>;
  /** Stops listening and renewing; slots still held expire after `leaseMs`. */
  close(): Promise<void>;
}

interface Waiter {
  resolve: (release: SlotRelease) => void;
  reject: (reason: unknown) => void;
  signal: AbortSignal;
  onAbort: () => void;
  onQueued?: (position: number) => void;
  /** Whether it was told it waits (once). */
  queued: boolean;
}

/**
 * Provider slots shared by every process on one database (docs/many-processes.md): slot `i`
 * of a provider is the row `(provider, i)` of `<schema>.provider_slots`, leased to one holder
 * until `expires_at`. A request takes a free or expired row of `0 … limit−1` in ONE
 * `INSERT … ON CONFLICT DO UPDATE … WHERE expired` statement (the row lock decides between
 * two takers, never two live holders), renews it while its stream runs, and deletes it when
 * it ends, with a `NOTIFY` so waiting processes look at once (they also poll every `pollMs`;
 * the notification is only a hint).
 *
 * Waiters queue FIFO within a process (only the head asks the database); between processes,
 * the first to ask after a slot frees gets it. Every process must be given the same limits.
 * Throws a TypeError on a bad limit, a RangeError on a bad duration (`durationOption`: one over
 * 2^31 − 1 ms is clamped, with a warning).
 */
export function postgresProviderSlots(
  pool: pg.Pool,
  options: PostgresProviderSlotsOptions,
): PostgresProviderSlots {
  const bounds = checkConcurrency("postgresProviderSlots: `limits`", options.limits);
  const leaseMs = durationOption("postgresProviderSlots: `leaseMs`", options.leaseMs, 30_000);
  const pollMs = durationOption("postgresProviderSlots: `pollMs`", options.pollMs, 250);
  const schema = options.schema ?? "keel";
  const s = `"${schema}"`;
  const channel = `keel_provider_slots_${schema}`.slice(0, 63);
  const takeSql = `INSERT INTO ${s}.provider_slots AS p (provider, slot, holder, expires_at)
    SELECT $1, g, $2, clock_timestamp() + $4::float8 * interval '1 millisecond'
    FROM generate_series(0, $3::int - 1) AS g
    WHERE NOT EXISTS (SELECT 1 FROM ${s}.provider_slots q
      WHERE q.provider = $1 AND q.slot = g AND q.expires_at > clock_timestamp())
    ORDER BY random() LIMIT 1
    ON CONFLICT (provider, slot) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
      WHERE p.expires_at <= clock_timestamp()
    RETURNING slot`;

  let ready: Promise<void> | undefined;
  let listener: pg.PoolClient | undefined;
  let closed = false;
  const queues = new Map<string, Set<Waiter>>();
  const pumping = new Set<string>();
  const wakeups = new Map<string, () => void>();
  /**
   * Holders of live rows in this process, renewed together: when their lease was last sent
   * (`performance.now()` as the take or renewal left: the row lives at least `leaseMs` past it),
   * and the signal that ends their request if the row is lost.
   */
  const holding = new Map<string, { sentAt: number; lost: AbortController }>();
  let renewTimer: ReturnType<typeof setInterval> | undefined;

  const setup = () => {
    ready ??= (async () => {
      // Several processes start together: DDL under a transaction-level advisory lock.
      // On a client of its own: a failed statement must not hand the pool a connection left
      // inside an aborted transaction.
      const ddl = await pool.connect();
      try {
        await ddl.query(`BEGIN;
          SELECT pg_advisory_xact_lock(hashtext('keel provider_slots ${schema.replaceAll("'", "''")}'));
          CREATE SCHEMA IF NOT EXISTS ${s};
          CREATE TABLE IF NOT EXISTS ${s}.provider_slots (
            provider text NOT NULL, slot int NOT NULL, holder text NOT NULL,
            expires_at timestamptz NOT NULL, PRIMARY KEY (provider, slot));
          COMMIT;`);
        ddl.release();
      } catch (err) {
        await ddl.query("ROLLBACK").catch(() => {});
        ddl.release(true);
        throw err;
      }
      const client = await pool.connect();
      client.on("error", () => {}); // a lost connection only loses hints: waiters also poll
      client.on("notification", (msg) => {
        if (msg.channel === channel && msg.payload) wakeups.get(msg.payload)?.();
      });
      try {
        await client.query(`LISTEN "${channel}"`);
      } catch (err) {
        client.release(true); // not back to the pool the store shares: the next setup retries
        throw err;
      }
      if (closed) client.release(true);
      else listener = client;
    })();
    ready.catch(() => {
      ready = undefined; // the next request tries again
    });
    return ready;
  };

  /** The row of `holder` may be another process's now: its request is told to end. */
  const lose = (holder: string, why: string) => {
    const held = holding.get(holder);
    if (!held) return;
    holding.delete(holder);
    held.lost.abort(new SlotLostError(`the provider slot was lost: ${why}`));
  };

  // A row is renewed only while it is live: one that expired (this process was stopped past
  // its lease) may be another holder's, so its request ends instead of running over the limit.
  const renew = () => {
    if (holding.size === 0) return;
    const sentAt = performance.now();
    for (const [holder, held] of holding)
      if (sentAt - held.sentAt > leaseMs) lose(holder, `its lease of ${leaseMs} ms ran out`);
    const holders = [...holding.keys()];
    if (holders.length === 0) return;
    pool
      .query<{ holder: string }>(
        `UPDATE ${s}.provider_slots SET expires_at = clock_timestamp() + $2::float8 * interval '1 millisecond'
         WHERE holder = ANY($1::text[]) AND expires_at > clock_timestamp() RETURNING holder`,
        [holders, leaseMs],
      )
      .then(({ rows }) => {
        const renewed = new Set(rows.map((r) => r.holder));
        for (const holder of holders) {
          const held = holding.get(holder);
          if (held && renewed.has(holder)) held.sentAt = Math.max(held.sentAt, sentAt);
          else lose(holder, "its row expired or was taken by another process");
        }
      })
      .catch(() => {}); // missed: the rows may expire; the next renewal finds out
  };

  const hold = (key: string, slot: number, holder: string, sentAt: number): SlotRelease => {
    const lost = new AbortController();
    holding.set(holder, { sentAt, lost });
    if (!renewTimer) {
      renewTimer = setInterval(renew, leaseMs / 3);
      renewTimer.unref();
    }
    let released = false;
    return Object.assign(
      () => {
        if (released) return;
        released = true;
        holding.delete(holder);
        if (holding.size === 0 && renewTimer) {
          clearInterval(renewTimer);
          renewTimer = undefined;
        }
        pool
          .query(
            `WITH d AS (DELETE FROM ${s}.provider_slots WHERE provider = $1 AND slot = $2 AND holder = $3 RETURNING provider)
           SELECT pg_notify($4, $1) FROM d`,
            [key, slot, holder, channel],
          )
          .catch(() => {}) // not deleted: the row expires after leaseMs
          .finally(() => wakeups.get(key)?.());
      },
      { lost: lost.signal },
    );
  };

  /** Takes a row for `key`: its slot number, or undefined when none is free now. */
  const take = async (key: string, limit: number, holder: string) => {
    const r = await pool.query<{ slot: number }>(takeSql, [key, holder, limit, leaseMs]);
    return r.rows[0]?.slot;
  };

  /** Serves this process's queue for `key`, head first, until it is empty. One pump per key. */
  const pump = async (key: string, limit: number) => {
    if (pumping.has(key)) return;
    pumping.add(key);
    const queue = queues.get(key)!;
    try {
      while (queue.size > 0 && !closed) {
        const holder = randomUUID();
        let slot: number | undefined;
        let sentAt = 0;
        try {
          await setup();
          sentAt = performance.now();
          slot = await take(key, limit, holder);
        } catch {
          slot = undefined; // the database is unreachable: wait and ask again
        }
        if (slot !== undefined) {
          const release = hold(key, slot, holder, sentAt);
          const head = first(queue);
          if (!head) {
            release(); // everyone left while the statement ran
            continue;
          }
          queue.delete(head);
          head.signal.removeEventListener("abort", head.onAbort);
          head.resolve(release);
          continue;
        }
        // Full: whoever had not been told yet waits now (its place in this process's queue).
        let position = 0;
        for (const w of queue) {
          position++;
          if (!w.queued) {
            w.queued = true;
            w.onQueued?.(position);
          }
        }
        // Wait for a release here or a notification from elsewhere, or poll.
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, pollMs);
          timer.unref?.();
          function done() {
            clearTimeout(timer);
            if (wakeups.get(key) === done) wakeups.delete(key);
            resolve();
          }
          wakeups.set(key, done);
        });
      }
    } finally {
      pumping.delete(key);
    }
  };

  return {
    limitOf: (key) => bounds.get(key),
    acquire(key, { signal, onQueued }) {
      const limit = bounds.get(key);
      if (limit === undefined) return Promise.resolve(() => {});
      if (signal.aborted) return Promise.reject(signal.reason);
      if (closed) return Promise.reject(new Error("postgresProviderSlots: closed"));
      let queue = queues.get(key);
      if (!queue) {
        queue = new Set();
        queues.set(key, queue);
      }
      const q = queue;
      return new Promise<SlotRelease>((resolve, reject) => {
        const waiter: Waiter = {
          resolve,
          reject,
          signal,
          onAbort: () => {
            if (q.delete(waiter)) reject(signal.reason);
          },
          onQueued,
          queued: q.size > 0,
        };
        q.add(waiter);
        signal.addEventListener("abort", waiter.onAbort, { once: true });
        // Every request asks the database once; it is queued at once only behind others here.
        if (waiter.queued) onQueued?.(q.size);
        void pump(key, limit);
      });
    },
    async held(key) {
      await setup();
      const r = await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${s}.provider_slots WHERE provider = $1 AND expires_at > clock_timestamp()`,
        [key],
      );
      return r.rows[0]?.n ?? 0;
    },
    async close() {
      closed = true;
      if (renewTimer) clearInterval(renewTimer);
      for (const queue of queues.values()) {
        for (const w of queue) {
          w.signal.removeEventListener("abort", w.onAbort);
          w.reject(new Error("postgresProviderSlots: closed while this request waited for a slot"));
        }
        queue.clear();
      }
      for (const wake of [...wakeups.values()]) wake();
      await ready?.catch(() => {});
      listener?.release(true);
      listener = undefined;
    },
  };
}

const first = <T>(set: Set<T>): T | undefined => {
  for (const v of set) return v;
  return undefined;
};
