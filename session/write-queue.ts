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

  /** Contract: writes the batch all-or-nothing; resolves once durable, rejects having written nothing. */
  constructor(private readonly write: (batch: readonly LogEntry[]) => Promise<void>) {}

  push(entry: LogEntry): void {
    this.queue.push(entry);
  }

  get size(): number {
    return this.queue.length;
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
