import { createRequire } from "node:module";
import type pg from "pg";
import { loadPeer } from "../contracts/optional-peer.ts";
import type { CheckpointStore } from "./checkpoint.ts";
import type { LogEntry } from "./entries.ts";
import { type CommitOutcome, GroupCommit, rememberGroupCommit } from "./group-commit.ts";
import { deletePostgresSession, redactPostgresEntries } from "./postgres-erase.ts";
import type {
  AppendOptions,
  LeaseInfo,
  LeaseStore,
  PostedInput,
  SessionStore,
  SessionSummary,
} from "./store.ts";
import { checkBatch, fenced, StoreError } from "./store-error.ts";

/** Options of {@link postgresStore}. */

const require = createRequire(import.meta.url);

/** pg, an optional peer: loaded when a PostgreSQL store opens on a URL. */
const pgModule = (): typeof pg =>
  loadPeer<typeof pg>(require, "pg", "postgresStore (the PostgreSQL session store)");

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

/** SQLSTATEs `append_entries` raises (not PostgreSQL's: class K is free). */
const FENCED_STATE = "KF001";
const SEQ_STATE = "KS001";

const schemaSql = (s: string) => `
CREATE SCHEMA IF NOT EXISTS ${s};
CREATE TABLE IF NOT EXISTS ${s}.keel_meta (key text PRIMARY KEY, value jsonb);
CREATE TABLE IF NOT EXISTS ${s}.sessions (
  session_id text PRIMARY KEY,
  created_at double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS ${s}.entries (
  session_id text NOT NULL,
  seq bigint NOT NULL,
  id text NOT NULL,
  parent_id text,
  type text NOT NULL,
  at double precision NOT NULL,
  body text NOT NULL,
  PRIMARY KEY (session_id, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS entries_by_id ON ${s}.entries (session_id, id);
CREATE TABLE IF NOT EXISTS ${s}.checkpoints (
  session_id text PRIMARY KEY,
  seq bigint NOT NULL,
  body text NOT NULL
);
CREATE TABLE IF NOT EXISTS ${s}.inbox (
  session_id text NOT NULL,
  inbox_id text NOT NULL,
  n bigserial,
  lane text NOT NULL,
  source text NOT NULL,
  body text NOT NULL,
  posted_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  taken boolean NOT NULL DEFAULT false,
  PRIMARY KEY (session_id, inbox_id)
);
CREATE INDEX IF NOT EXISTS inbox_untaken ON ${s}.inbox (session_id, n) WHERE NOT taken;
CREATE TABLE IF NOT EXISTS ${s}.leases (
  session_id text PRIMARY KEY,
  owner text NOT NULL,
  token bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  released boolean NOT NULL DEFAULT false,
  pending boolean NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS ${s}.ledger (
  caller text NOT NULL,
  key text NOT NULL,
  fingerprint text NOT NULL,
  status text NOT NULL,
  result text,
  created_at double precision NOT NULL,
  updated_at double precision NOT NULL,
  PRIMARY KEY (caller, key)
);
CREATE INDEX IF NOT EXISTS ledger_by_age ON ${s}.ledger (updated_at);
CREATE TABLE IF NOT EXISTS ${s}.retry_budget (
  provider text PRIMARY KEY,
  tokens double precision NOT NULL,
  updated_at timestamptz NOT NULL
);
`;

/**
 * Version 2: one append in one statement, so one round trip instead of six (BEGIN, the lease
 * check, the seq check, two inserts, COMMIT). The lease row is locked FOR SHARE until the
 * statement's transaction commits: a takeover waits for this append, and a lost lease refuses
 * the whole batch. Raises KF001 when the lease (or its absence) refuses the writer, KS001 with
 * the stored last seq when the batch does not continue it.
 */
const appendFunctionSql = (s: string) => `
CREATE OR REPLACE FUNCTION ${s}.append_entries(
  p_session text, p_fenced boolean, p_token bigint,
  p_seq bigint[], p_id text[], p_parent text[], p_type text[], p_at float8[], p_body text[]
) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
  v_token bigint;
  v_live boolean;
  v_last bigint;
BEGIN
  SELECT token, NOT released AND expires_at > clock_timestamp() INTO v_token, v_live
    FROM ${s}.leases WHERE session_id = p_session FOR SHARE;
  IF (p_fenced AND (v_live IS NOT TRUE OR v_token <> p_token)) OR (NOT p_fenced AND v_live) THEN
    RAISE EXCEPTION 'the lease refuses this append' USING ERRCODE = '${FENCED_STATE}';
  END IF;
  SELECT coalesce(max(seq), 0) INTO v_last FROM ${s}.entries WHERE session_id = p_session;
  IF p_seq[1] <= v_last THEN
    RAISE EXCEPTION '%', v_last USING ERRCODE = '${SEQ_STATE}';
  END IF;
  INSERT INTO ${s}.sessions (session_id, created_at) VALUES (p_session, p_at[1])
    ON CONFLICT (session_id) DO NOTHING;
  INSERT INTO ${s}.entries (session_id, seq, id, parent_id, type, at, body)
    SELECT p_session, * FROM unnest(p_seq, p_id, p_parent, p_type, p_at, p_body);
END $fn$;
`;

/**
 * Version 3: the appends of a group (one per session) in one statement, so one round trip and
 * one commit for the group. Every session's checks are those of `append_entries` (its lease row
 * locked FOR SHARE, the fencing token, the expected seq) plus ids already stored, all made before
 * anything is written: a refused append writes nothing and the others are inserted. Returns one
 * verdict per append: NULL (written), 'fenced', 'seq:<stored last seq>' or 'dup:<id>'. Entries
 * come flattened, `p_of` naming each one's append (1-based); `p_start` is each append's first
 * entry. No subtransaction per append: a group of more than 64 would overflow the server's
 * subtransaction cache and slow every other session's snapshots.
 */
const groupFunctionSql = (s: string) => `
CREATE OR REPLACE FUNCTION ${s}.append_group(
  p_session text[], p_fenced boolean[], p_token bigint[], p_start int[],
  p_of int[], p_seq bigint[], p_id text[], p_parent text[], p_type text[], p_at float8[], p_body text[]
) RETURNS text[] LANGUAGE plpgsql AS $fn$
DECLARE
  v_dup_of int[];
  v_dup_id text[];
  v_out text[];
BEGIN
  PERFORM 1 FROM ${s}.leases WHERE session_id = ANY(p_session) ORDER BY session_id FOR SHARE;
  SELECT array_agg(d.o), array_agg(d.id) INTO v_dup_of, v_dup_id FROM (
    SELECT x.o, min(x.id) AS id FROM unnest(p_of, p_id) AS x(o, id)
    JOIN ${s}.entries e ON e.session_id = p_session[x.o] AND e.id = x.id GROUP BY x.o
  ) d;
  SELECT array_agg(CASE
      WHEN (c.fenced AND (l.token IS NULL OR l.released OR l.expires_at <= clock_timestamp()
              OR l.token <> c.token))
        OR (NOT c.fenced AND l.token IS NOT NULL AND NOT l.released
              AND l.expires_at > clock_timestamp()) THEN 'fenced'
      WHEN p_seq[c.start] <= m.last THEN 'seq:' || m.last
      WHEN c.i = ANY(v_dup_of) THEN 'dup:' || v_dup_id[array_position(v_dup_of, c.i::int)]
    END ORDER BY c.i) INTO v_out
  FROM unnest(p_session, p_fenced, p_token, p_start) WITH ORDINALITY AS c(sid, fenced, token, start, i)
  LEFT JOIN ${s}.leases l ON l.session_id = c.sid
  CROSS JOIN LATERAL (
    SELECT coalesce(max(e.seq), 0) AS last FROM ${s}.entries e WHERE e.session_id = c.sid
  ) m;
  INSERT INTO ${s}.sessions (session_id, created_at)
    SELECT c.sid, p_at[c.start] FROM unnest(p_session, p_start) WITH ORDINALITY AS c(sid, start, i)
    WHERE v_out[c.i] IS NULL
    ON CONFLICT (session_id) DO NOTHING;
  INSERT INTO ${s}.entries (session_id, seq, id, parent_id, type, at, body)
    SELECT p_session[x.o], x.seq, x.id, x.parent, x.type, x.at, x.body
    FROM unnest(p_of, p_seq, p_id, p_parent, p_type, p_at, p_body)
      AS x(o, seq, id, parent, type, at, body)
    WHERE v_out[x.o] IS NULL;
  RETURN v_out;
END $fn$;
`;

/** What takes a schema of each version to the next: index v migrates version v to v + 1. */
const migrations = [schemaSql, appendFunctionSql, groupFunctionSql];

/** One `append` call waiting for its group. */
interface AppendRequest {
  sessionId: string;
  entries: readonly LogEntry[];
  options: AppendOptions;
}

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
  /** One append in one statement (`append_entries`); rejects with what refused it. */
  const appendOne = async ({ sessionId, entries, options: opts }: AppendRequest) => {
    try {
      await pool.query({
        name: `keel_append_${name}`,
        text: `SELECT ${s}.append_entries($1, $2, $3, $4::bigint[], $5::text[], $6::text[], $7::text[], $8::float8[], $9::text[])`,
        values: [
          sessionId,
          opts.lease !== undefined,
          opts.lease?.token ?? 0,
          entries.map((e) => e.seq),
          entries.map((e) => e.id),
          entries.map((e) => e.parentId),
          entries.map((e) => e.type),
          entries.map((e) => e.at),
          entries.map((e) => JSON.stringify(e)),
        ],
      });
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === FENCED_STATE)
        throw fenced(sessionId, `postgres store ${where}`, opts.lease?.token);
      if (code === SEQ_STATE) {
        const last = Number((error as { message?: string }).message);
        throw checkBatch(sessionId, last, entries) ?? error;
      }
      throw asStoreError(error, where, "append");
    }
  };
  /** Several sessions' appends in one statement (`append_group`): one verdict each. */
  const appendGroup = async (group: readonly AppendRequest[]): Promise<CommitOutcome[]> => {
    const start: number[] = [];
    const of: number[] = [];
    const cols = { seq: [] as number[], id: [] as string[], parent: [] as (string | null)[] };
    const more = { type: [] as string[], at: [] as number[], body: [] as string[] };
    group.forEach((req, i) => {
      start.push(of.length + 1);
      for (const e of req.entries) {
        of.push(i + 1);
        cols.seq.push(e.seq);
        cols.id.push(e.id);
        cols.parent.push(e.parentId);
        more.type.push(e.type);
        more.at.push(e.at);
        more.body.push(JSON.stringify(e));
      }
    });
    const r = await pool.query<{ verdicts: (string | null)[] }>({
      name: `keel_append_group_${name}`,
      text: `SELECT ${s}.append_group($1::text[], $2::boolean[], $3::bigint[], $4::int[], $5::int[], $6::bigint[], $7::text[], $8::text[], $9::text[], $10::float8[], $11::text[]) AS verdicts`,
      values: [
        group.map((req) => req.sessionId),
        group.map((req) => req.options.lease !== undefined),
        group.map((req) => req.options.lease?.token ?? 0),
        start,
        of,
        cols.seq,
        cols.id,
        cols.parent,
        more.type,
        more.at,
        more.body,
      ],
    });
    const verdicts = r.rows[0].verdicts;
    return group.map((req, i) => refusal(req, verdicts[i]));
  };
  const refusal = (req: AppendRequest, verdict: string | null): CommitOutcome => {
    if (verdict === null) return undefined;
    const { sessionId, entries } = req;
    if (verdict === "fenced")
      return fenced(sessionId, `postgres store ${where}`, req.options.lease?.token);
    if (verdict.startsWith("seq:")) {
      const last = Number(verdict.slice(4));
      return (
        checkBatch(sessionId, last, entries) ??
        new StoreError("SEQ_CONFLICT", `session ${sessionId}: stored seq ${last} (${verdict})`)
      );
    }
    return new StoreError(
      "DUPLICATE_ID",
      `postgres store ${where}: append: session ${sessionId}: an entry with id ${verdict.slice(4)} is already stored`,
    );
  };
  /**
   * Commits a group. Alone: `append_entries`, as a lone append always went. Together: one
   * `append_group`; should the statement fail as a whole (a unique violation or deadlock raced
   * with another process's writer of the same unleased session, after its checks passed), the
   * group wrote nothing and each append is retried alone, so only the one that conflicts fails.
   */
  const commitGroup = async (group: readonly AppendRequest[]): Promise<CommitOutcome[]> => {
    const alone = (req: AppendRequest) =>
      appendOne(req).then(
        () => undefined,
        (error: unknown) => error as Error,
      );
    if (group.length === 1) return [await alone(group[0])];
    try {
      return await appendGroup(group);
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code !== "23505" && code !== "40P01") throw asStoreError(error, where, "append");
      const outcomes: CommitOutcome[] = [];
      for (const req of group) outcomes.push(await alone(req));
      return outcomes;
    }
  };
  const committer = new GroupCommit<AppendRequest>({
    start: "microtask",
    key: (req) => req.sessionId,
    commit: commitGroup,
  });
  const decode = (rows: { body: string }[]) => rows.map((r) => JSON.parse(r.body) as LogEntry);
  const loadRange = async (sessionId: string, from: number, to: number) =>
    decode(
      (
        await pool.query(
          `SELECT body FROM ${s}.entries WHERE session_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq`,
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
          (
            await pool.query(`SELECT body FROM ${s}.entries WHERE session_id = $1 ORDER BY seq`, [
              sessionId,
            ])
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

/** A URL without its password, for messages. */
function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(unparseable URL)";
  }
}

function asStoreError(error: unknown, where: string, what: string): unknown {
  if (error instanceof StoreError) return error;
  const e = error as { code?: string; constraint?: string; message?: string };
  if (e.code === "23505") {
    const seq = e.constraint === "entries_pkey";
    return new StoreError(
      seq ? "SEQ_CONFLICT" : "DUPLICATE_ID",
      seq
        ? `postgres store ${where}: ${what}: another writer appended the same seq to this session first (one writer per session: reopen it to continue)`
        : `postgres store ${where}: ${what}: an entry with this id is already stored (${e.message})`,
      { cause: error },
    );
  }
  if (
    e.code === "ECONNREFUSED" ||
    e.code === "ENOTFOUND" ||
    e.code === "28P01" ||
    e.code === "3D000"
  ) {
    return new StoreError(
      "IO",
      `postgres store ${where}: ${what} failed (${e.code}: ${e.message}): check that the server runs, the URL (host, port, database, user, password) and that this user may connect`,
      { cause: error },
    );
  }
  if (typeof e.code === "string" && /^[0-9A-Z]{5}$/.test(e.code)) {
    return new StoreError(
      "IO",
      `postgres store ${where}: ${what} failed (${e.code}: ${e.message})`,
      {
        cause: error,
      },
    );
  }
  return error;
}
