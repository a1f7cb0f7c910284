import type { LogEntry } from "./entries.ts";

/**
 * The entries appended but not yet durable, and the one write in flight.
 * `flush` writes the whole queue in one `write` call. Concurrent flushes coalesce: a flush
 * while a write is in flight waits for it, then writes what is still queued (one follow-up
 * write however many callers wait). A rejected write leaves its entries queued, in order.
 */
export class WriteQueue {
  private queue: LogEntry[] = [];
  private inflight: Promise<void> | null = null;
  private next: Promise<void> | null = null;
  private durable = 0;

  /** Contract: writes the batch all-or-nothing; resolves once durable, rejects having written nothing. */
  constructor(private readonly write: (batch: readonly LogEntry[]) => Promise<void>) {}

  push(entry: LogEntry): void {
    this.queue.push(entry);
  }

  get size(): number {
    return this.queue.length;
  }

  /** The seq of the last entry a write made durable (0: none yet); set by `startAt` on open. */
  get durableSeq(): number {
    return this.durable;
  }

  /** Entries up to `seq` are durable already (the log was opened from the store at `seq`). */
  startAt(seq: number): void {
    this.durable = Math.max(this.durable, seq);
  }

  flush(): Promise<void> {
    if (!this.inflight) return this.start();
    if (!this.next) {
      this.next = this.inflight
        .catch(() => {})
        .then(() => {
          this.next = null;
          return this.flush();
        });
    }
    return this.next;
  }

  private start(): Promise<void> {
    if (this.queue.length === 0) return Promise.resolve();
    const batch = this.queue.slice();
    const done = this.write(batch).then(
      () => {
        this.queue = this.queue.slice(batch.length);
        this.inflight = null;
        this.durable = Math.max(this.durable, batch[batch.length - 1].seq);
      },
      (error: unknown) => {
        this.inflight = null;
        throw error;
      },
    );
    this.inflight = done;
    return done;
  }
}
