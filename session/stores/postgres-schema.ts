/**
 * Keel's tables in PostgreSQL, as the DDL of each migration step: the tables, then the functions
 * that make an append one statement, and the SQLSTATEs those functions raise. Kept apart from
 * postgres-store.ts so the store reads as its methods, not as DDL; the store keeps the version
 * number and runs the steps (`migrate`), so that what it exports is defined where it is imported.
 */

/**
 * The SQLSTATE `append_entries` raises when the lease refuses the writer (not PostgreSQL's:
 * class K is free).
 */
export const FENCED_STATE = "KF001";
/**
 * The SQLSTATE `append_entries` raises when the batch does not continue the stored seq; its
 * message is the stored last seq.
 */
export const SEQ_STATE = "KS001";

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

/**
 * What takes a schema of each version to the next: index v migrates version v to v + 1, so one
 * more step here means one more `POSTGRES_SCHEMA_VERSION` in postgres-store.ts.
 */
export const migrations = [schemaSql, appendFunctionSql, groupFunctionSql];
