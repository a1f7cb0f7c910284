import type { LogEntry } from "./entries.ts";

/**
 * What becomes of an entry whose own write must succeed or never happen (an input's `inbox`
 * entry: its caller is told the store refused it, so it must not run later). Both are called
 * synchronously in the refused write's handler, before any other write can start.
 */
export interface OwnWrite {
  /** It was the last entry queued: it left the queue; the log takes it back. */
  withdraw(): void;
  /** Entries were appended after it: it stays queued; the caller makes sure it never runs. */
  keep(): void;
}

/**
 * The entries appended but not yet durable, and the one write in flight.
 * `flush` writes the whole queue in one `write` call. Concurrent flushes coalesce: a flush
 * while a write is in flight waits for it, then writes what is still queued (one follow-up
 * write however many callers wait). A rejected write leaves its entries queued, in order, but
 * for the entries pushed with an {@link OwnWrite} (invariant 15 of docs/architecture.md): those
 * at the end of the queue leave it, the others are kept and told so.
 */
export class WriteQueue {
  private queue: LogEntry[] = [];
  private readonly own = new Map<LogEntry, OwnWrite>();
  private inflight: Promise<void> | null = null;
  private next: Promise<void> | null = null;
  private durable = 0;

  /** Contract: writes the batch all-or-nothing; resolves once durable, rejects having written nothing. */
  constructor(private readonly write: (batch: readonly LogEntry[]) => Promise<void>) {}

  /** Queues `entry`; `own`: its refusal withdraws it (see {@link OwnWrite}). */
  push(entry: LogEntry, own?: OwnWrite): void {
    this.queue.push(entry);
    if (own) this.own.set(entry, own);
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
        if (this.own.size > 0) for (const e of batch) this.own.delete(e);
      },
      (error: unknown) => {
        this.inflight = null;
        if (this.own.size > 0) this.refuse(batch);
        throw error;
      },
    );
    this.inflight = done;
    return done;
  }

  /**
   * The own entries of a refused batch: from the end of the queue, each one leaves it
   * (`withdraw`); the rest stay queued (`keep`). Synchronous, so no follow-up write holds them.
   */
  private refuse(batch: readonly LogEntry[]): void {
    const refused = new Set(batch.filter((e) => this.own.has(e)));
    if (refused.size === 0) return;
    while (this.queue.length > 0 && refused.has(this.queue[this.queue.length - 1])) {
      const entry = this.queue.pop()!;
      const own = this.own.get(entry)!;
      this.own.delete(entry);
      refused.delete(entry);
      own.withdraw();
    }
    for (const entry of refused) {
      const own = this.own.get(entry)!;
      this.own.delete(entry);
      own.keep();
    }
  }
}
