import { createRequire } from "node:module";
import type pg from "pg";
import { loadPeer } from "../../contracts/optional-peer.ts";
import type { CheckpointStore } from "../checkpoint.ts";
import { decodeEntries } from "../decode.ts";
import type {
  AppendOptions,
  LeaseInfo,
  LeaseStore,
  PostedInput,
  SessionStore,
  SessionSummary,
} from "../store.ts";
import { checkBatch, StoreError } from "../store-error.ts";
import { rememberGroupCommit } from "./group-commit.ts";
import { postgresCommitter } from "./postgres-append.ts";
import { deletePostgresSession, redactPostgresEntries } from "./postgres-erase.ts";
import { asStoreError, redact } from "./postgres-errors.ts";
import { migrations } from "./postgres-schema.ts";

/**
 * The PostgreSQL session store: `postgresStore` opens it and each of its methods is one round
 * trip (or one transaction) over Keel's schema, and this file is the entry point every importer
 * uses. Its parts live beside it: the schema's DDL (postgres-schema.ts), the group-committed
 * append path (postgres-append.ts), deletion and redaction (postgres-erase.ts) and how pg's
 * errors are reported (postgres-errors.ts).
 */

const require = createRequire(import.meta.url);

/** pg, an optional peer: loaded when a PostgreSQL store opens on a URL. */
const pgModule = (): typeof pg =>
  loadPeer<typeof pg>(require, "pg", "postgresStore (the PostgreSQL session store)");

/** Options of {@link postgresStore}. */
export interface PostgresStoreOptions {
  /** The schema Keel's tables live in (default `keel`), so they can share a database. */
  schema?: string;
  /** Pool size when given a URL (default 10). */
  max?: number;
}

/** A PostgreSQL-backed session store; `pool` is exposed so a ledger, budget or worker can share it. */
export interface PostgresSessionStore extends SessionStore, CheckpointStore, LeaseStore {
  readonly kind: "postgres";
  readonly pool: pg.Pool;
  /** The schema name, quoted for SQL (`"keel"`). */
  readonly schema: string;
  /** The NOTIFY channel inputs ring. */
  readonly channel: string;
}

/**
 * The version of Keel's tables in the schema, kept in `<schema>.keel_meta` like SQLite's.
 * 1: sessions, entries, checkpoints, inbox, leases, ledger, retry_budget.
 * 2: `append_entries`, an append in one statement (fencing, seq check, inserts).
 * 3: `append_group`, the appends of many sessions in one statement (group commit).
 */
export const POSTGRES_SCHEMA_VERSION = 3;

/** `name` as a quoted SQL identifier; throws a TypeError naming the rule when it is not a plain name. */
export function quoteSchema(name: string): string {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) {
    throw new TypeError(
      `postgresStore: schema must be a lowercase SQL name (letters, digits, _; at most 63), got ${JSON.stringify(name)}`,
    );
  }
  return `"${name}"`;
}

/**
 * Opens a PostgreSQL session store on `urlOrPool` (a `postgres://` URL, or a `pg.Pool` the
 * caller owns and closes). Creates or migrates Keel's tables in their own schema (default
 * `keel`) under an advisory lock, so processes starting together migrate once.
 *
 * Group commit: an append sent while none is in flight goes at once, in one statement (a function
 * of the schema checks the lease's fencing token and the expected seq and inserts the rows); the
 * appends of other sessions that arrive while it is in flight go together in the next one
 * (`append_group`: one round trip and one commit for the group, each session's token, seq and
 * ids still checked on its own). A refused append fails alone, having written nothing; each
 * resolves once the statement that holds it has committed. Durability is the server's:
 * `synchronous_commit` decides whether a resolved append survives a server crash.
 * Throws a `StoreError` (`IO`) naming the server and the fix when it cannot connect or a newer
 * Keel created the schema.
 */
export async function postgresStore(
  urlOrPool: string | pg.Pool,
  options: PostgresStoreOptions = {},
): Promise<PostgresSessionStore> {
  const name = options.schema ?? "keel";
  const s = quoteSchema(name);
  const ownsPool = typeof urlOrPool === "string";
  const pool =
    typeof urlOrPool === "string"
      ? new (pgModule().Pool)({ connectionString: urlOrPool, max: options.max ?? 10 })
      : urlOrPool;
  if (ownsPool) {
    // An idle client's lost connection: the next query reports it.
    pool.on("error", () => {});
    pool.on("connect", (client) => client.on("error", () => {}));
  }
  const where = typeof urlOrPool === "string" ? redact(urlOrPool) : "the given pool";
  try {
    await migrate(pool, s, name, where);
  } catch (error) {
    if (ownsPool) await pool.end().catch(() => {});
    throw asStoreError(error, where, "open (schema)");
  }
  const channel = `keel_inbox_${name}`;
  let closed = false;
  const listeners = new Set<pg.Client>();

  const refuseClosed = (what: string) =>
    new StoreError("CLOSED", `postgres store ${where}: ${what} after close(); open a new store`);
  const guard = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    if (closed) throw refuseClosed(what);
    try {
      return await fn();
    } catch (error) {
      throw asStoreError(error, where, what);
    }
  };
  const tx = async <T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> => {
    const client = await pool.connect();
    try {
      await client.query("BEGIN");
      const out = await fn(client);
      await client.query("COMMIT");
      return out;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  };
  const committer = postgresCommitter(pool, s, name, where);
  /** Rows of `seq, body` (seq a bigint: pg returns its text), decoded. */
  const decode = (sessionId: string, rows: { seq: string; body: string }[]) =>
    decodeEntries(
      rows.map((r) => [Number(r.seq), r.body] as const),
      { store: `postgres store ${where}`, sessionId },
    );
  const loadRange = async (sessionId: string, from: number, to: number) =>
    decode(
      sessionId,
      (
        await pool.query(
          `SELECT seq, body FROM ${s}.entries WHERE session_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq`,
          [sessionId, from, to],
        )
      ).rows,
    );

  const store: PostgresSessionStore = {
    kind: "postgres",
    pool,
    schema: s,
    channel,
    async append(sessionId, entries, opts: AppendOptions = {}) {
      if (closed) throw refuseClosed("append");
      if (entries.length === 0) return;
      // What the batch alone decides (seqs increasing, ids unique) needs no round trip.
      const local = checkBatch(sessionId, 0, entries);
      if (local) throw local;
      return committer.submit({ sessionId, entries, options: opts });
    },
    async load(sessionId) {
      return guard("load", async () =>
        decode(
          sessionId,
          (
            await pool.query(
              `SELECT seq, body FROM ${s}.entries WHERE session_id = $1 ORDER BY seq`,
              [sessionId],
            )
          ).rows,
        ),
      );
    },
    async loadAfter(sessionId, afterSeq) {
      return guard("load (the log's tail)", () =>
        loadRange(sessionId, afterSeq, Number.MAX_SAFE_INTEGER),
      );
    },
    async deleteSession(sessionId) {
      // Appends already called are written first: they must not recreate what is deleted.
      await committer.idle();
      return guard("deleteSession", () =>
        tx((c) => deletePostgresSession(c, s, sessionId, `postgres store ${where}`)),
      );
    },
    async redactEntries(sessionId, entryIds, redaction, opts: AppendOptions = {}) {
      await committer.idle();
      return guard("redactEntries", () =>
        tx((c) =>
          redactPostgresEntries(
            c,
            s,
            sessionId,
            entryIds,
            redaction,
            opts.lease,
            `postgres store ${where}`,
          ),
        ),
      );
    },
    async saveCheckpoint(sessionId, seq, body) {
      await guard("saveCheckpoint", () =>
        pool.query(
          `INSERT INTO ${s}.checkpoints (session_id, seq, body) VALUES ($1, $2, $3)
           ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, body = excluded.body
           WHERE excluded.seq >= checkpoints.seq`,
          [sessionId, seq, body],
        ),
      );
    },
    async loadFromCheckpoint(sessionId) {
      return guard("loadFromCheckpoint", async () => {
        const r = await pool.query<{ seq: string; body: string }>(
          `SELECT seq, body FROM ${s}.checkpoints WHERE session_id = $1`,
          [sessionId],
        );
        const checkpoint = r.rows[0];
        if (!checkpoint) return null;
        const seq = Number(checkpoint.seq);
        return {
          seq,
          body: checkpoint.body,
          tail: await loadRange(sessionId, seq, Number.MAX_SAFE_INTEGER),
          loadPrefix: () =>
            guard("load (history before the checkpoint)", () => loadRange(sessionId, 0, seq)),
        };
      });
    },
    async loadUpTo(sessionId, seq) {
      return guard("load (history up to a checkpoint)", () => loadRange(sessionId, 0, seq));
    },
    async list(): Promise<SessionSummary[]> {
      return guard("list", async () => {
        const r = await pool.query<{
          session_id: string;
          created_at: number;
          entries: string;
          updated_at: number;
        }>(
          `SELECT s.session_id, s.created_at,
             (SELECT count(*) FROM ${s}.entries e WHERE e.session_id = s.session_id) AS entries,
             coalesce((SELECT e.at FROM ${s}.entries e WHERE e.session_id = s.session_id
               ORDER BY e.seq DESC LIMIT 1), s.created_at) AS updated_at
           FROM ${s}.sessions s ORDER BY s.created_at, s.session_id`,
        );
        return r.rows.map((row) => ({
          sessionId: row.session_id,
          entries: Number(row.entries),
          createdAt: row.created_at,
          updatedAt: row.updated_at,
        }));
      });
    },
    async acquireLease(sessionId, owner, ttlMs, opts = {}) {
      return guard("acquireLease", async () => {
        const r = await pool.query<{ token: string; takeover: boolean }>(
          `WITH prev AS (SELECT released FROM ${s}.leases WHERE session_id = $1)
           INSERT INTO ${s}.leases AS l (session_id, owner, token, expires_at, released, pending)
           VALUES ($1, $2, 1, clock_timestamp() + $3 * interval '1 millisecond', false, false)
           ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, token = l.token + 1,
             expires_at = excluded.expires_at, released = false, pending = false
           WHERE l.released OR l.expires_at <= clock_timestamp() OR l.token = $4
           RETURNING token, coalesce((SELECT NOT released FROM prev), false) AS takeover`,
          [sessionId, owner, ttlMs, opts.ifToken ?? -1],
        );
        const row = r.rows[0];
        return row ? { sessionId, owner, token: Number(row.token), takeover: row.takeover } : null;
      });
    },
    async renewLease(lease, ttlMs) {
      return guard("renewLease", async () => {
        const r = await pool.query(
          `UPDATE ${s}.leases SET expires_at = clock_timestamp() + $3 * interval '1 millisecond'
           WHERE session_id = $1 AND token = $2 AND NOT released AND expires_at > clock_timestamp()`,
          [lease.sessionId, lease.token, ttlMs],
        );
        return r.rowCount === 1;
      });
    },
    async releaseLease(lease, opts = {}) {
      await guard("releaseLease", () =>
        pool.query(
          `UPDATE ${s}.leases SET released = true, pending = $3
           WHERE session_id = $1 AND token = $2 AND NOT released AND expires_at > clock_timestamp()`,
          [lease.sessionId, lease.token, opts.pending === true],
        ),
      );
    },
    async readLease(sessionId): Promise<LeaseInfo | null> {
      return guard("readLease", async () => {
        const r = await pool.query<{
          owner: string;
          token: string;
          ms: number;
          released: boolean;
          pending: boolean;
        }>(
          `SELECT owner, token, released, pending,
             extract(epoch FROM expires_at - clock_timestamp()) * 1000 AS ms
           FROM ${s}.leases WHERE session_id = $1`,
          [sessionId],
        );
        const row = r.rows[0];
        if (!row) return null;
        return {
          sessionId,
          owner: row.owner,
          token: Number(row.token),
          expiresInMs: Number(row.ms),
          released: row.released,
          pending: row.pending,
        };
      });
    },
    async postInput(sessionId, input: PostedInput) {
      await guard("postInput", () =>
        tx(async (c) => {
          await c.query(
            `INSERT INTO ${s}.inbox (session_id, inbox_id, lane, source, body) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (session_id, inbox_id) DO NOTHING`,
            [sessionId, input.id, input.lane, input.source, input.body],
          );
          // Delivered at commit, after the row is visible: a hint that never outruns the truth.
          await c.query("SELECT pg_notify($1, $2)", [channel, sessionId]);
        }),
      );
    },
    async postedInputs(sessionId) {
      return guard("postedInputs", async () => {
        const r = await pool.query<PostedInput>(
          `SELECT inbox_id AS id, lane, source, body FROM ${s}.inbox
           WHERE session_id = $1 AND NOT taken ORDER BY n`,
          [sessionId],
        );
        return r.rows;
      });
    },
    async markTaken(sessionId, ids) {
      if (ids.length === 0) return;
      await guard("markTaken", () =>
        pool.query(
          `UPDATE ${s}.inbox SET taken = true WHERE session_id = $1 AND inbox_id = ANY($2::text[])`,
          [sessionId, ids],
        ),
      );
    },
    async watchInputs(listener) {
      return guard("watchInputs", async () => {
        // A dedicated connection: LISTEN lives on one session, not on a pooled client.
        const client = new (pgModule().Client)(pool.options);
        client.on("error", () => {}); // a lost connection only loses hints; owners also poll
        await client.connect();
        client.on("notification", (msg) => {
          if (msg.channel === channel && msg.payload) listener(msg.payload);
        });
        await client.query(`LISTEN "${channel}"`);
        listeners.add(client);
        return async () => {
          listeners.delete(client);
          await client.end().catch(() => {});
        };
      });
    },
    async sessionsNeedingRunner(limit) {
      return guard("sessionsNeedingRunner", async () => {
        const r = await pool.query<{ session_id: string }>(
          `SELECT session_id FROM (
             SELECT DISTINCT i.session_id FROM ${s}.inbox i WHERE NOT i.taken
             UNION
             SELECT l.session_id FROM ${s}.leases l
             WHERE (l.released AND l.pending) OR (NOT l.released AND l.expires_at <= clock_timestamp())
           ) need
           WHERE NOT EXISTS (SELECT 1 FROM ${s}.leases l WHERE l.session_id = need.session_id
             AND NOT l.released AND l.expires_at > clock_timestamp())
           LIMIT $1`,
          [limit],
        );
        return r.rows.map((row) => row.session_id);
      });
    },
    async close() {
      if (closed) return;
      closed = true;
      await committer.idle(); // appends already called are written before the pool ends
      for (const client of listeners) await client.end().catch(() => {});
      listeners.clear();
      if (ownsPool) await pool.end();
    },
  };
  rememberGroupCommit(store, committer);
  return store;
}

/**
 * Creates or migrates Keel's schema to {@link POSTGRES_SCHEMA_VERSION} in one transaction,
 * serialised across processes by a transaction-scoped advisory lock on the schema's name.
 */
async function migrate(pool: pg.Pool, s: string, name: string, where: string): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`keel schema ${name}`]);
    const exists = await client.query<{ t: string | null }>("SELECT to_regclass($1) AS t", [
      `${s}.keel_meta`,
    ]);
    const meta = exists.rows[0].t
      ? await client.query<{ value: number }>(
          `SELECT value FROM ${s}.keel_meta WHERE key = 'schema_version'`,
        )
      : { rows: [] as { value: number }[] };
    const version = Number(meta.rows[0]?.value ?? 0);
    if (version > POSTGRES_SCHEMA_VERSION) {
      throw new StoreError(
        "IO",
        `postgres store ${where}: Keel's tables in schema ${name} are version ${version}, newer than this Keel's ${POSTGRES_SCHEMA_VERSION}; open it with a newer Keel`,
      );
    }
    if (version < POSTGRES_SCHEMA_VERSION) {
      for (const step of migrations.slice(version)) await client.query(step(s));
      await client.query(
        `INSERT INTO ${s}.keel_meta (key, value) VALUES ('schema_version', to_jsonb($1::int))
         ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
        [POSTGRES_SCHEMA_VERSION],
      );
    }
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}
