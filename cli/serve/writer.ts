import type { Writable } from "node:stream";
import type { EventFrame, ServerFrame } from "../../contracts/protocol.ts";

/** A queued frame: a serialised line, or a text event kept as an object while it may grow. */
type Queued = { line: string; bytes: number } | { text: TextFrame; bytes: number };

type TextFrame = EventFrame & { event: { type: "text.streamed" } };

const isText = (frame: ServerFrame): frame is TextFrame =>
  frame.type === "event" && frame.event.type === "text.streamed";

export interface FrameWriterOptions {
  out: Writable;
  /**
   * Bytes that may wait (in this queue plus the stream's own buffer) before `congested` turns
   * true and the sessions' model streams stop being read.
   */
  maxBufferedBytes: number;
  /** Called once when the stream breaks (EPIPE, closed by the reader). Contract: must not throw. */
  onBroken: (reason: string) => void;
}

/**
 * The server's one writer of stdout: one JSON object per line, in the order sent. Frames wait in
 * a queue while the stream needs draining; there, consecutive `text.streamed` events of the same
 * attempt are merged into one frame (the only frames ever coalesced). `congested` says when the
 * reader is behind by more than the bound; `whenWritable()` resolves when it caught up. After the
 * stream broke, frames are dropped.
 */
export class FrameWriter {
  private readonly out: Writable;
  private readonly bound: number;
  private readonly queue: Queued[] = [];
  private queuedBytes = 0;
  private brokenReason: string | undefined;
  private waiters: (() => void)[] = [];
  /** Text frames merged into an earlier one (observability, tests). */
  coalesced = 0;

  constructor(options: FrameWriterOptions) {
    this.out = options.out;
    this.bound = options.maxBufferedBytes;
    this.out.on("drain", () => this.flush());
    this.out.on("error", (err: NodeJS.ErrnoException) => {
      this.broke(
        err.code === "EPIPE"
          ? "the client closed its reader (EPIPE on stdout)"
          : `stdout failed: ${err.code ?? err.message}`,
      );
      options.onBroken(this.brokenReason!);
    });
    this.out.on("close", () => {
      if (this.brokenReason) return;
      this.broke("stdout was closed");
      options.onBroken(this.brokenReason!);
    });
  }

  /** Writes (or queues) one frame. Never throws. */
  send(frame: ServerFrame): void {
    if (this.brokenReason) return;
    const tail = this.queue[this.queue.length - 1];
    if (isText(frame) && tail && "text" in tail) {
      const last = tail.text;
      if (last.sessionId === frame.sessionId && last.event.attemptId === frame.event.attemptId) {
        tail.text = { ...last, event: { ...last.event, text: last.event.text + frame.event.text } };
        tail.bytes += frame.event.text.length;
        this.queuedBytes += frame.event.text.length;
        this.coalesced++;
        return;
      }
    }
    // Sizes are UTF-16 lengths: close enough to bytes for a bound.
    const entry: Queued = isText(frame)
      ? { text: frame, bytes: 128 + frame.event.text.length }
      : { line: `${JSON.stringify(frame)}\n`, bytes: 0 };
    if ("line" in entry) entry.bytes = entry.line.length;
    this.queue.push(entry);
    this.queuedBytes += entry.bytes;
    this.flush();
  }

  /** True when more than the bound waits to be read by the client. */
  get congested(): boolean {
    return this.queuedBytes + this.out.writableLength > this.bound;
  }

  /** Bytes waiting here and in the stream's buffer. */
  get buffered(): number {
    return this.queuedBytes + this.out.writableLength;
  }

  /** Resolves when not congested (at once if not), or when the stream broke. */
  whenWritable(): Promise<void> {
    if (!this.congested || this.brokenReason) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  get broken(): string | undefined {
    return this.brokenReason;
  }

  /**
   * Writes what is queued and ends the stream; resolves when it is flushed, broken, or after
   * `deadlineMs` (a client that stopped reading must not hold the exit).
   */
  end(deadlineMs: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.brokenReason) return resolve();
      const timer = setTimeout(resolve, deadlineMs);
      timer.unref();
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      const finish = () => {
        if (this.queue.length > 0 && !this.brokenReason) return;
        this.out.end(done);
      };
      this.out.on("drain", finish);
      this.out.once("error", done);
      finish();
    });
  }

  private flush(): void {
    while (this.queue.length > 0 && !this.out.writableNeedDrain && !this.brokenReason) {
      const entry = this.queue.shift()!;
      this.queuedBytes -= entry.bytes;
      this.out.write("line" in entry ? entry.line : `${JSON.stringify(entry.text)}\n`);
    }
    if (!this.congested) this.release();
  }

  private broke(reason: string): void {
    this.brokenReason = reason;
    this.queue.length = 0;
    this.queuedBytes = 0;
    this.release();
  }

  private release(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }
}
