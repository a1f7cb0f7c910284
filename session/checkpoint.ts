import type { InboxSnapshot } from "../machines/policies/inbox.ts";
import type { EntryWriter, LogEntry } from "./entries.ts";
import type { ProjectionSnapshot } from "./projection.ts";
import type { SessionStore } from "./store.ts";

/** A persisted projection: everything a log needs to reopen without decoding its history. */
export interface LogCheckpoint {
  v: 1;
  /** Covers every entry with `seq` ≤ this. */
  seq: number;
  leafId: string | null;
  projection: ProjectionSnapshot;
  /**
   * The session's inbox (every branch) at `seq`. Absent in checkpoints written before it was
   * added: the log then folds the inbox from its history when first asked.
   */
  inbox?: InboxSnapshot;
  /**
   * The Keel that last stamped the session's log (`EntryBase.writer`) at `seq`; absent in
   * checkpoints written before sessions recorded it.
   */
  writer?: EntryWriter;
}

/** What a checkpointing store returns to reopen a session quickly. */
export interface CheckpointLoad {
  /** The latest checkpoint's JSON (a {@link LogCheckpoint}) and its seq. */
  seq: number;
  body: string;
  /** Entries after the checkpoint, in seq order. */
  tail: LogEntry[];
  /**
   * Contract: resolves to the entries with seq ≤ `seq` in seq order. Called at most once,
   * lazily, while the store is still open (when the log is asked to load its history).
   */
  loadPrefix(): Promise<LogEntry[]>;
  /**
   * Optional, for stores that read synchronously (memory, SQLite). Contract: as `loadPrefix`,
   * returning the entries at once. With it, a log's synchronous readers load history on first
   * need; without it (PostgreSQL), they need `await log.loadHistory()` first.
   */
  loadPrefixSync?(): LogEntry[];
}

/** A store that can persist projection checkpoints (SQLite does). */
export interface CheckpointStore {
  /** Contract: replaces the session's checkpoint; entries up to `seq` are already stored. */
  saveCheckpoint(sessionId: string, seq: number, body: string): Promise<void>;
  /** Contract: null when the session has no checkpoint. */
  loadFromCheckpoint(sessionId: string): Promise<CheckpointLoad | null>;
  /**
   * Optional: `loadFromCheckpoint`, synchronously (stores that read synchronously). With it, a
   * session that sleeps after a quiet spell (`dormantAfterMs`) lets its log go and reopens it at
   * the next read or input without an `await`.
   */
  loadFromCheckpointSync?(sessionId: string): CheckpointLoad | null;
  /**
   * Optional. Contract: resolves to the session's entries with seq ≤ `seq`, in seq order, while
   * the store is open. With it, a log drops the history a checkpoint covers from memory and
   * reloads it only when asked for it (see `SessionLog.loadHistory`).
   */
  loadUpTo?(sessionId: string, seq: number): Promise<LogEntry[]>;
  /** Optional: `loadUpTo`, synchronously (stores that read synchronously). */
  loadUpToSync?(sessionId: string, seq: number): LogEntry[];
}

/**
 * When a log writes a checkpoint after a flush: once `minEntries` entries have been written
 * since the last one AND at least `growth` × the last checkpoint's seq, so the O(n) cost of
 * writing a checkpoint stays O(1) amortised per entry and a crash leaves a tail of at most
 * `growth / (1 + growth)` of the log to decode. `false` disables automatic checkpoints.
 */
export interface CheckpointPolicy {
  minEntries: number;
  growth: number;
}

export const defaultCheckpointPolicy: CheckpointPolicy = { minEntries: 2000, growth: 0.25 };

export function hasCheckpoints(store: SessionStore): store is SessionStore & CheckpointStore {
  const s = store as Partial<CheckpointStore>;
  return typeof s.saveCheckpoint === "function" && typeof s.loadFromCheckpoint === "function";
}

/** Whether `store` reads checkpoints and history synchronously (memory, SQLite): a log over it can sleep. */
export function reopensSync(
  store: SessionStore,
): store is SessionStore &
  CheckpointStore &
  Required<Pick<CheckpointStore, "loadFromCheckpointSync" | "loadUpToSync">> {
  const s = store as Partial<CheckpointStore>;
  return (
    hasCheckpoints(store) &&
    typeof s.loadFromCheckpointSync === "function" &&
    typeof s.loadUpToSync === "function"
  );
}

/** Whether a checkpoint is due at `seq`. This is a pure function. */
export function checkpointDue(policy: CheckpointPolicy, seq: number, lastSeq: number): boolean {
  return seq - lastSeq >= Math.max(policy.minEntries, policy.growth * lastSeq);
}
