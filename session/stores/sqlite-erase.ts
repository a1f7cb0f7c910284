import type Database from "better-sqlite3";
import { decodeEntry, storedString } from "../decode.ts";
import type { LogEntry } from "../entries.ts";
import { type Redaction, redactEntry } from "../redaction.ts";
import type { DeletedSession, Lease } from "../store.ts";
import { fenced, StoreError } from "../store-error.ts";

/**
 * Deletion and redaction in a SQLite store's file (docs/stores.md), each one synchronous
 * function to run in an IMMEDIATE transaction. What makes the bytes leave the file is the
 * connection's `secure_delete` (set by `sqliteStore` when it opens the file: SQLite then
 * overwrites with zeros the space every deleted or rewritten row frees) and an emptied
 * write-ahead log afterwards (`wal_checkpoint(TRUNCATE)`, see `truncateWal`).
 */
export interface SqliteEraser {
  /** Removes the session's rows from every table of Keel's (and the ledger's, if present). */
  deleteSession(sessionId: string): DeletedSession;
  /** Rewrites the entries as their redacted copies; returns them in `seq` order. */
  redactEntries(
    sessionId: string,
    entryIds: readonly string[],
    redaction: Redaction,
    lease: Lease | undefined,
  ): LogEntry[];
}

interface LeaseRow {
  owner: string;
  token: number;
  expires_at: number;
  released: number;
}

export function sqliteEraser(
  db: Database.Database,
  options: { path: string; now: () => number },
): SqliteEraser {
  const { path, now } = options;
  const where = `sqlite store ${path}`;
  const leaseOf = db.prepare<[string], LeaseRow>(
    "SELECT owner, token, expires_at, released FROM leases WHERE session_id = ?",
  );
  const hasLedger = db
    .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ledger'")
    .pluck();
  const callBodies = db
    .prepare<[string], string>(
      "SELECT body FROM entries WHERE session_id = ? AND type = 'call_started'",
    )
    .pluck();
  const byId = db.prepare<[string, string], { seq: number; body: string }>(
    "SELECT seq, body FROM entries WHERE session_id = ? AND id = ?",
  );
  const rewrite = db.prepare("UPDATE entries SET body = ? WHERE session_id = ? AND seq = ?");
  const rewriteInput = db.prepare(
    "UPDATE inbox SET body = ? WHERE session_id = ? AND inbox_id = ?",
  );
  const dropCheckpoint = db.prepare("DELETE FROM checkpoints WHERE session_id = ?");
  const remove = (table: string) => db.prepare(`DELETE FROM ${table} WHERE session_id = ?`);
  const removeEntries = remove("entries");
  const removeInputs = remove("inbox");
  const removeLeases = remove("leases");
  const removeSession = remove("sessions");

  const live = (sessionId: string) => {
    const row = leaseOf.get(sessionId);
    return row !== undefined && !row.released && row.expires_at > now() ? row : undefined;
  };

  return {
    deleteSession(sessionId) {
      const owner = live(sessionId);
      if (owner) {
        throw new StoreError(
          "FENCED",
          `${where}: session ${sessionId} is run by ${owner.owner}, which holds its lease (token ${owner.token}); close the session there, or wait until its lease expires, then delete it`,
        );
      }
      let ledgerRows = 0;
      if (hasLedger.get() !== undefined) {
        const forget = db.prepare("DELETE FROM ledger WHERE key = ?");
        for (const key of idempotencyKeys(callBodies.all(sessionId)))
          ledgerRows += forget.run(key).changes;
      }
      const removed: DeletedSession = {
        sessionId,
        entries: removeEntries.run(sessionId).changes,
        checkpoints: dropCheckpoint.run(sessionId).changes,
        inputs: removeInputs.run(sessionId).changes,
        leases: removeLeases.run(sessionId).changes,
        ledgerRows,
      };
      removeSession.run(sessionId); // when it began: not counted
      return removed;
    },
    redactEntries(sessionId, entryIds, redaction, lease) {
      const owner = live(sessionId);
      if (lease ? !owner || owner.token !== lease.token : owner)
        throw fenced(sessionId, where, lease?.token);
      const out: LogEntry[] = [];
      for (const id of new Set(entryIds)) {
        const row = byId.get(sessionId, id);
        if (!row)
          throw new StoreError(
            "NOT_FOUND",
            `${where}: session ${sessionId} has no entry ${JSON.stringify(id)}; nothing was redacted`,
          );
        const entry = decodeEntry(row.body, row.seq, { store: where, sessionId });
        const redacted = redactEntry(entry, redaction);
        rewrite.run(JSON.stringify(redacted), sessionId, row.seq);
        if (redacted.type === "inbox" || redacted.type === "user_message") {
          const input = redacted.inboxId;
          if (input)
            rewriteInput.run(
              redacted.type === "inbox" ? redacted.body : redacted.text,
              sessionId,
              input,
            );
        }
        out.push(redacted);
      }
      // The checkpoint holds the projection, and so the content: the next open replays the log.
      dropCheckpoint.run(sessionId);
      return out.sort((a, b) => a.seq - b.seq);
    },
  };
}

/**
 * The idempotency keys of a session's calls, from its `call_started` bodies; a damaged body is
 * skipped (deleting a session must not need every entry readable). This is a pure function.
 */
export function idempotencyKeys(bodies: readonly string[]): Set<string> {
  const keys = new Set<string>();
  for (const body of bodies) {
    const key = storedString(body, "idempotencyKey");
    if (key) keys.add(key);
  }
  return keys;
}

/** What `PRAGMA wal_checkpoint(TRUNCATE)` returns. */
interface CheckpointRow {
  busy: number;
  log: number;
  checkpointed: number;
}

/**
 * Copies every page of the write-ahead log into the database file and truncates the log to
 * zero bytes, so no earlier version of a page (holding deleted content) stays in `<file>-wal`.
 * Returns false when another connection's reader or writer kept it from completing (nothing
 * was lost: call again).
 */
export function truncateWal(db: Database.Database): boolean {
  try {
    const [row] = db.pragma("wal_checkpoint(TRUNCATE)") as CheckpointRow[];
    return row === undefined || row.busy === 0;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === "string" && code.startsWith("SQLITE_BUSY")) return false;
    throw error;
  }
}
