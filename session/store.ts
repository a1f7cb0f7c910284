import type { LogEntry } from "./entries.ts";

/** A stored session as `list()` gives it. */
export interface SessionSummary {
  sessionId: string;
  /** How many log entries it has. */
  entries: number;
  /** When its first entry was written (ms). */
  createdAt: number;
  /** When its last entry was written (ms). */
  updatedAt: number;
}

/**
 * Where session logs live. Implementations: memory (tests), SQLite (embedded default),
 * Postgres (many processes). One conformance suite runs against each.
 */
export interface SessionStore {
  readonly kind: string;
  /**
   * Contract: appends in order; resolves only once the entries are durable to the store's
   * durability level; rejects (and writes nothing of the batch) on failure.
   */
  append(sessionId: string, entries: readonly LogEntry[]): Promise<void>;
  /** Contract: every entry of the session in `seq` order; [] for an unknown session. */
  load(sessionId: string): Promise<LogEntry[]>;
  /** Every session it holds. */
  list(): Promise<SessionSummary[]>;
  /** Releases the store; no call may follow. */
  close(): Promise<void>;
}
