import type pg from "pg";
import { decodeEntry } from "../decode.ts";
import type { LogEntry } from "../entries.ts";
import { type Redaction, redactEntry } from "../redaction.ts";
import type { DeletedSession, Lease } from "../store.ts";
import { fenced, StoreError } from "../store-error.ts";
import { idempotencyKeys } from "./sqlite-erase.ts";

/**
 * Deletion and redaction in a PostgreSQL store's schema (`s`, quoted), each run by the store on
 * one client inside a transaction it opened. The session's lease row is locked `FOR UPDATE`
 * first, so a runner taking the lease, or appending with it, waits for the change. What the
 * server keeps of the old rows until VACUUM, and after: docs/stores.md.
 */

interface LeaseRow {
  owner: string;
  token: string;
  live: boolean;
}

async function liveLease(c: pg.PoolClient, s: string, sessionId: string) {
  const r = await c.query<LeaseRow>(
    `SELECT owner, token, NOT released AND expires_at > clock_timestamp() AS live
     FROM ${s}.leases WHERE session_id = $1 FOR UPDATE`,
    [sessionId],
  );
  const row = r.rows[0];
  return row?.live ? { owner: row.owner, token: Number(row.token) } : undefined;
}

/** Removes the session's rows from every table of Keel's schema, the ledger's included. */
export async function deletePostgresSession(
  c: pg.PoolClient,
  s: string,
  sessionId: string,
  where: string,
): Promise<DeletedSession> {
  const owner = await liveLease(c, s, sessionId);
  if (owner) {
    throw new StoreError(
      "FENCED",
      `${where}: session ${sessionId} is run by ${owner.owner}, which holds its lease (token ${owner.token}); close the session there, or wait until its lease expires, then delete it`,
    );
  }
  const calls = await c.query<{ body: string }>(
    `SELECT body FROM ${s}.entries WHERE session_id = $1 AND type = 'call_started'`,
    [sessionId],
  );
  const keys = [...idempotencyKeys(calls.rows.map((r) => r.body))];
  const ledger =
    keys.length === 0
      ? { rowCount: 0 }
      : await c.query(`DELETE FROM ${s}.ledger WHERE key = ANY($1::text[])`, [keys]);
  const remove = async (table: string) =>
    (await c.query(`DELETE FROM ${s}.${table} WHERE session_id = $1`, [sessionId])).rowCount ?? 0;
  const removed: DeletedSession = {
    sessionId,
    entries: await remove("entries"),
    checkpoints: await remove("checkpoints"),
    inputs: await remove("inbox"),
    leases: await remove("leases"),
    ledgerRows: ledger.rowCount ?? 0,
  };
  await remove("sessions"); // when it began: not counted
  return removed;
}

/** Rewrites the entries as their redacted copies (and their posted inputs); drops the checkpoint. */
export async function redactPostgresEntries(
  c: pg.PoolClient,
  s: string,
  sessionId: string,
  entryIds: readonly string[],
  redaction: Redaction,
  lease: Lease | undefined,
  where: string,
): Promise<LogEntry[]> {
  const owner = await liveLease(c, s, sessionId);
  if (lease ? !owner || owner.token !== lease.token : owner)
    throw fenced(sessionId, where, lease?.token);
  const ids = [...new Set(entryIds)];
  const r = await c.query<{ id: string; seq: string; body: string }>(
    `SELECT id, seq, body FROM ${s}.entries WHERE session_id = $1 AND id = ANY($2::text[]) FOR UPDATE`,
    [sessionId, ids],
  );
  const found = new Map(r.rows.map((row) => [row.id, row]));
  const missing = ids.find((id) => !found.has(id));
  if (missing !== undefined)
    throw new StoreError(
      "NOT_FOUND",
      `${where}: session ${sessionId} has no entry ${JSON.stringify(missing)}; nothing was redacted`,
    );
  const redacted = ids
    .map((id) => {
      const row = found.get(id)!;
      return redactEntry(
        decodeEntry(row.body, Number(row.seq), { store: where, sessionId }),
        redaction,
      );
    })
    .sort((a, b) => a.seq - b.seq);
  await c.query(
    `UPDATE ${s}.entries e SET body = x.body FROM unnest($2::bigint[], $3::text[]) AS x(seq, body)
     WHERE e.session_id = $1 AND e.seq = x.seq`,
    [sessionId, redacted.map((e) => e.seq), redacted.map((e) => JSON.stringify(e))],
  );
  const inputs: [string, string][] = [];
  for (const e of redacted) {
    if (e.type === "inbox" && e.inboxId) inputs.push([e.inboxId, e.body]);
    if (e.type === "user_message" && e.inboxId) inputs.push([e.inboxId, e.text]);
  }
  if (inputs.length > 0)
    await c.query(
      `UPDATE ${s}.inbox i SET body = x.body FROM unnest($2::text[], $3::text[]) AS x(id, body)
       WHERE i.session_id = $1 AND i.inbox_id = x.id`,
      [sessionId, inputs.map(([id]) => id), inputs.map(([, body]) => body)],
    );
  // The checkpoint holds the projection, and so the content: the next open replays the log.
  await c.query(`DELETE FROM ${s}.checkpoints WHERE session_id = $1`, [sessionId]);
  return redacted;
}
