import type { LogEntry } from "./entries.ts";

/**
 * The part of a log's history that is not in memory (session/log.ts): what the checkpoint it
 * opened from, a later checkpoint, or a rest let go. Read back from the store at its first
 * need: by `fetch` ahead of a synchronous read (stores that read asynchronously, PostgreSQL), or
 * at the read itself when the store reads synchronously (memory, SQLite).
 */
export class UnloadedHistory {
  /** What `fetch` read, taken at the next synchronous read. */
  private fetched: LogEntry[] | null = null;

  constructor(
    /** Contract: the entries let go, in seq order. */
    private readonly load: () => Promise<LogEntry[]>,
    /** The same, synchronously, when the store can. */
    private readonly loadSync: (() => LogEntry[]) | null,
    /** Let go by a rest, not a checkpoint: a read of it means someone follows the history. */
    readonly byRest = false,
  ) {}

  /** Reads the entries from the store now, for the next synchronous read. */
  async fetch(): Promise<void> {
    if (this.fetched) return;
    const entries = await this.load();
    this.fetched ??= entries;
  }

  /** Whether a synchronous read can take the entries now. */
  get readable(): boolean {
    return this.fetched !== null || this.loadSync !== null;
  }

  /**
   * The entries, in seq order. Throws, saying to `await log.loadHistory()` first, when they
   * were not fetched and the store cannot read synchronously.
   */
  take(sessionId: string, beforeSeq: number): LogEntry[] {
    const entries = this.fetched ?? this.loadSync?.();
    if (!entries) {
      throw new Error(
        `session ${sessionId}: the history before seq ${beforeSeq} is not loaded (the log opened from a checkpoint); await log.loadHistory() before reading entries(), path(), old entries, or moving the leaf`,
      );
    }
    return entries;
  }
}
