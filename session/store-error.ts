import type { TurnFailureCode } from "../contracts/status.ts";
import type { LogEntry } from "./entries.ts";

/** Why a store refused an operation. */
export type StoreErrorCode =
  | "SEQ_CONFLICT"
  | "DUPLICATE_ID"
  | "CLOSED"
  | "NOT_WRITABLE"
  /**
   * The file is not a database of the store's kind, or is damaged; or a stored entry is not one
   * this Keel can read (not JSON, an unknown type, a field missing or of the wrong type).
   */
  | "CORRUPT"
  /** A newer Keel wrote the session in a newer log schema: upgrade Keel to open it. */
  | "NEWER_SCHEMA"
  /** Another process holds a lock the store needed. */
  | "LOCKED"
  | "IO"
  /** The store's file stayed locked by other writing processes past the store's busy timeout. */
  | "BUSY"
  /** The writer does not hold the session's live lease (it expired, or another runner took it). */
  | "FENCED"
  /** An entry the operation names is not in the session (nothing was changed). */
  | "NOT_FOUND";

/** A store operation's failure (stores reject with it at the async boundary). */
export class StoreError extends Error {
  override readonly name = "StoreError";
  readonly code: StoreErrorCode;

  constructor(code: StoreErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/**
 * Checks that a batch continues a session whose last stored seq is `lastSeq`: seqs strictly
 * increasing and after `lastSeq`, ids unique within the batch. Returns the error, or null.
 * This is a pure function.
 */
export function checkBatch(
  sessionId: string,
  lastSeq: number,
  entries: readonly LogEntry[],
): StoreError | null {
  let prev = lastSeq;
  const ids = new Set<string>();
  for (const e of entries) {
    if (!(e.seq > prev)) {
      return new StoreError(
        "SEQ_CONFLICT",
        `session ${sessionId}: entry ${e.id} has seq ${e.seq}, not after seq ${prev}; another writer appended to this session (one SessionLog per session at a time: reopen it to continue)`,
      );
    }
    if (ids.has(e.id)) {
      return new StoreError(
        "DUPLICATE_ID",
        `session ${sessionId}: entry id ${e.id} appears twice in one batch`,
      );
    }
    ids.add(e.id);
    prev = e.seq;
  }
  return null;
}

/** The refusal of a write from a runner that does not hold the session's live lease. */
export function fenced(sessionId: string, store: string, token: number | undefined): StoreError {
  return new StoreError(
    "FENCED",
    token === undefined
      ? `${store}: session ${sessionId} is owned by a runner holding its lease; an append without that lease is refused (send inputs with postInput, or take the lease when it is released or expires)`
      : `${store}: session ${sessionId}: lease token ${token} is no longer the session's live lease (it expired or another runner took the session over); this runner must stop writing and reopen the session`,
  );
}

/**
 * What a refused write means for the runner that made it: `LEASE_LOST` when another runner
 * writes the session now (the store fenced the write, or another writer's entries came first:
 * this runner's log is stale and it must stop), `STORE_FAILED` for anything else (the store
 * could not write: the entries stay queued for the next flush). This is a pure function.
 */
export function refusalCode(error: unknown): TurnFailureCode {
  return error instanceof StoreError && (error.code === "FENCED" || error.code === "SEQ_CONFLICT")
    ? "LEASE_LOST"
    : "STORE_FAILED";
}
