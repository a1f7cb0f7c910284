// Every SQL statement a SQLite store runs over Keel's tables (session/stores/sqlite-open.ts `SCHEMA`),
// prepared once per connection when the store opens. Kept apart from session/stores/sqlite-store.ts so
// that the store reads as what each operation does (fencing, group commit, retries), and the SQL
// it runs, with the index each query relies on, reads in one place.
import type Database from "better-sqlite3";
import type { PostedInput } from "../store.ts";

type Statement<P extends unknown[], R = unknown> = Database.Statement<P, R>;

/**
 * The prepared statements of one store's connection. Named in full (not inferred) because a
 * shipped declaration cannot name `better-sqlite3`'s inner statement type.
 */
export interface SqliteStatements {
  lastSeq: Statement<[string], number | null>;
  insert: Statement<unknown[]>;
  begin: Statement<unknown[]>;
  /** `[seq, body]` rows: the seq names the entry when its body cannot be decoded. */
  load: Statement<[string], [number, string]>;
  loadRange: Statement<[string, number, number], [number, string]>;
  saveCheckpoint: Statement<unknown[]>;
  loadCheckpoint: Statement<[string], { seq: number; body: string }>;
  list: Statement<
    [],
    { session_id: string; entries: number; created_at: number; updated_at: number }
  >;
  leaseRow: Statement<
    [string],
    { owner: string; token: number; expires_at: number; released: number; pending: number }
  >;
  takeLease: Statement<
    [{ sessionId: string; owner: string; expiresAt: number; now: number; ifToken: number }],
    { token: number }
  >;
  renew: Statement<unknown[]>;
  release: Statement<unknown[]>;
  post: Statement<unknown[]>;
  posted: Statement<[string], PostedInput>;
  take: Statement<unknown[]>;
  untaken: Statement<[], string>;
  needing: Statement<[{ now: number; limit: number }], string>;
}

/**
 * Prepares the store's statements on `db`, whose tables must already be current; `sqliteStore`
 * destructures them.
 */
export function sqliteStatements(db: Database.Database): SqliteStatements {
  // The last seq of a session: the end of its primary key's range, O(log n).
  const lastSeq = db
    .prepare<[string], number | null>("SELECT max(seq) FROM entries WHERE session_id = ?")
    .pluck();
  const insert = db.prepare(
    "INSERT INTO entries (session_id, seq, id, parent_id, type, at, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
  );
  // Every append (a lookup, and no write once the row exists): a session whose row went
  // missing gets it back rather than staying out of list().
  const begin = db.prepare(
    "INSERT INTO sessions (session_id, created_at) VALUES (?, ?) ON CONFLICT (session_id) DO NOTHING",
  );
  const load = db
    .prepare<[string], [number, string]>(
      "SELECT seq, body FROM entries WHERE session_id = ? ORDER BY seq",
    )
    .raw();
  const loadRange = db
    .prepare<[string, number, number], [number, string]>(
      "SELECT seq, body FROM entries WHERE session_id = ? AND seq > ? AND seq <= ? ORDER BY seq",
    )
    .raw();
  const saveCheckpoint = db.prepare(
    `INSERT INTO checkpoints (session_id, seq, body) VALUES (?, ?, ?)
     ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, body = excluded.body WHERE excluded.seq >= checkpoints.seq`,
  );
  const loadCheckpoint = db.prepare<[string], { seq: number; body: string }>(
    "SELECT seq, body FROM checkpoints WHERE session_id = ?",
  );
  const list = db.prepare<
    [],
    { session_id: string; entries: number; created_at: number; updated_at: number }
  >(
    `SELECT s.session_id, s.created_at,
       (SELECT count(*) FROM entries e WHERE e.session_id = s.session_id) AS entries,
       coalesce((SELECT e.at FROM entries e WHERE e.session_id = s.session_id
         ORDER BY e.seq DESC LIMIT 1), s.created_at) AS updated_at
     FROM sessions s ORDER BY s.created_at, s.session_id`,
  );
  const leaseRow = db.prepare<
    [string],
    { owner: string; token: number; expires_at: number; released: number; pending: number }
  >("SELECT owner, token, expires_at, released, pending FROM leases WHERE session_id = ?");
  const takeLease = db.prepare<
    [{ sessionId: string; owner: string; expiresAt: number; now: number; ifToken: number }],
    { token: number }
  >(
    `INSERT INTO leases AS l (session_id, owner, token, expires_at, released, pending)
     VALUES (@sessionId, @owner, 1, @expiresAt, 0, 0)
     ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, token = l.token + 1,
       expires_at = excluded.expires_at, released = 0, pending = 0
     WHERE l.released OR l.expires_at <= @now OR l.token = @ifToken
     RETURNING token`,
  );
  const renew = db.prepare(
    "UPDATE leases SET expires_at = ? WHERE session_id = ? AND token = ? AND NOT released AND expires_at > ?",
  );
  const release = db.prepare(
    "UPDATE leases SET released = 1, pending = ? WHERE session_id = ? AND token = ? AND NOT released AND expires_at > ?",
  );
  const post = db.prepare(
    "INSERT INTO inbox (session_id, inbox_id, lane, source, body) VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, inbox_id) DO NOTHING",
  );
  const posted = db.prepare<[string], PostedInput>(
    "SELECT inbox_id AS id, lane, source, body FROM inbox WHERE session_id = ? AND NOT taken ORDER BY n",
  );
  const take = db.prepare("UPDATE inbox SET taken = 1 WHERE session_id = ? AND inbox_id = ?");
  const untaken = db
    .prepare<[], string>("SELECT DISTINCT session_id FROM inbox WHERE NOT taken")
    .pluck();
  const needing = db
    .prepare<[{ now: number; limit: number }], string>(
      `SELECT session_id FROM (
         SELECT DISTINCT session_id FROM inbox WHERE NOT taken
         UNION
         SELECT session_id FROM leases WHERE (released AND pending) OR (NOT released AND expires_at <= @now)
       ) need
       WHERE NOT EXISTS (SELECT 1 FROM leases l WHERE l.session_id = need.session_id
         AND NOT l.released AND l.expires_at > @now)
       LIMIT @limit`,
    )
    .pluck();
  return {
    lastSeq,
    insert,
    begin,
    load,
    loadRange,
    saveCheckpoint,
    loadCheckpoint,
    list,
    leaseRow,
    takeLease,
    renew,
    release,
    post,
    posted,
    take,
    untaken,
    needing,
  };
}
