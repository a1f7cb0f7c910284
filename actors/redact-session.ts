import { rm } from "node:fs/promises";
import path from "node:path";
import { type Clock, systemClock } from "../contracts/clock.ts";
import { type Refusal, refuse } from "../contracts/refusal.ts";
import { SessionLog } from "../session/log.ts";
import {
  checkReason,
  type Redaction,
  redactionTargets,
  spilledFilesOf,
} from "../session/redaction.ts";
import { canErase, type SessionStore } from "../session/store.ts";
import { sessionFolderName } from "./spill-output.ts";

/** `session.redact(entryIds, options)`. */
export interface RedactOptions {
  /** Why: the marker `[redacted: <reason>]` shows it in place of the content. One line, ≤ 200 chars. */
  reason: string;
}

/**
 * What a redaction did: the entries it redacted (those asked for and the entries holding a copy
 * of their content, see `redactionTargets` in session/redaction.ts) and the spilled output files
 * it removed; or why it did nothing.
 */
export type RedactResult =
  | { ok: true; redacted: string[]; files: string[] }
  | Refusal<"UNKNOWN_ENTRY" | "NOT_REDACTABLE">;

/**
 * Redacts entries of a session's log: in the store first (`store.redactEntries`: the raw log,
 * the posted inputs, the checkpoint dropped), then in the live log (`log.redact`: the entries
 * swapped, the projection rebuilt), then a fresh checkpoint, then the spilled output files of
 * redacted tool results (those in the session's own spill folder). What the model is sent next
 * shows `[redacted: <reason>]` where the content was.
 *
 * Lifecycle: the caller makes sure no turn runs (the session refuses with `TURN_OPEN`); the
 * log's queued entries are flushed first. Refuses (nothing changed) an unknown id, an entry that
 * holds no content, and an input still queued (it would still run with its content: clear it or
 * let it run first). A store that refuses (`FENCED`: another runner owns the session) rejects.
 * Throws a TypeError for a bad `entryIds` or `reason`, or a store that cannot redact.
 */
export async function redactSession(
  log: SessionLog,
  entryIds: readonly string[],
  options: RedactOptions,
  now: () => number,
): Promise<RedactResult> {
  const reason = checkReason(options?.reason);
  if (
    !Array.isArray(entryIds) ||
    entryIds.length === 0 ||
    entryIds.some((id) => typeof id !== "string")
  ) {
    throw new TypeError(
      "redact: entryIds must be a non-empty array of entry ids (session.entries() lists them)",
    );
  }
  const store = log.store;
  if (!canErase(store)) {
    throw new TypeError(
      `redact: the session's store (${store.kind}) cannot redact (it has no redactEntries); Keel's memory, SQLite and PostgreSQL stores can`,
    );
  }
  await log.flush();
  await log.loadHistory();
  const targets = redactionTargets(log.entries(), entryIds);
  if (!targets.ok) return targets;
  const queued = new Set(log.inbox().queue.map((e) => e.id));
  for (const id of targets.ids) {
    const e = log.get(id);
    const input = e?.type === "inbox" || e?.type === "user_message" ? e.inboxId : undefined;
    if (input !== undefined && queued.has(input)) {
      return refuse(
        "NOT_REDACTABLE",
        `input ${input} (entry ${id}) is still queued and would run with its content: clear it (session.clearQueue()) or let it run, then redact it`,
      );
    }
  }
  const files = targets.ids.flatMap((id) => spilledFilesOf(log.get(id)!));
  const redaction: Redaction = { reason, at: now() };
  const lease = log.heldLease;
  await store.redactEntries(log.sessionId, targets.ids, redaction, lease ? { lease } : undefined);
  log.redact(targets.ids, redaction);
  // The store dropped the checkpoint that held the content; a failed write only slows the next open.
  await log.checkpoint().catch(() => {});
  const removed: string[] = [];
  for (const file of files) {
    if (!inSpillFolder(file, log.sessionId)) continue;
    try {
      await rm(file);
      removed.push(file); // only what was there and is gone now
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
  }
  return { ok: true, redacted: targets.ids, files: removed };
}

/** Whether `file` is in a spill folder of this session (`…/sessions/<folder>/spill/<file>`). */
function inSpillFolder(file: string, sessionId: string): boolean {
  const dir = path.dirname(path.resolve(file));
  return (
    path.basename(dir) === "spill" &&
    path.basename(path.dirname(dir)) === sessionFolderName(sessionId) &&
    path.basename(path.dirname(path.dirname(dir))) === "sessions"
  );
}

/**
 * Redacts entries of a stored session that no session object of this process holds open (what
 * `keel redact` does): opens its log, redacts as `redactSession`, and leaves it closed.
 * A session another process runs is refused by the store (`FENCED`): redact it there.
 */
export async function redactStoredSession(
  store: SessionStore,
  sessionId: string,
  entryIds: readonly string[],
  options: RedactOptions & { clock?: Clock },
): Promise<RedactResult> {
  const clock = options.clock ?? systemClock;
  const log = await SessionLog.open({
    sessionId,
    store,
    clock,
    ids: () => {
      throw new Error("redactStoredSession: a redaction appends nothing to the log");
    },
  });
  try {
    return await redactSession(log, entryIds, { reason: options.reason }, () => clock.now());
  } finally {
    await log.close().catch(() => {}); // nothing of its own to write: a redaction appends nothing
  }
}
