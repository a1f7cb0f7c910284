/**
 * A session's events as one ordered feed with ids, for the HTTP transport's `events` stream.
 * Two kinds of item, in the order the feed dispatched them:
 * - `entry` items: the session's log entries, read from the store once they are durable, id
 *   `<seq>` (the entry's `seq`). The store is the truth: a reader that resumes from any id gets
 *   every later entry once, also after the server restarted.
 * - live items: the session's events as `subscribe` emits them, id `<seq>.<n>` (the n-th event
 *   after entry `seq`). They are kept in memory (the last `maxRingBytes` of the feed), so a
 *   reader that resumes in the same process gets the ones it missed; after a restart they are
 *   gone (what they said that lasts is in the entries).
 */

import type { Session } from "../actors/session.ts";
import type { AgentEvent } from "../contracts/events.ts";
import type { LogEntry } from "../session/entries.ts";
import type { SessionStore } from "../session/store.ts";
import { HttpError } from "./http-error.ts";

/** One item of a {@link SessionFeed}: `event` is `entry` or the live event's `type`. */
export interface FeedItem {
  id: string;
  event: string;
  /** The item's JSON text (an entry, or an `AgentEvent`). */
  json: string;
}

/** Events that say nothing was written: they do not make the feed read the store. */
const STREAMED = new Set(["text.streamed", "call.previewed", "context.measured"]);
/** Events the feed leaves out: argument previews can be megabytes each (docs/web-apps.md). */
const LEFT_OUT = new Set(["call.previewed"]);
/** How often a resuming reader reads the store again to catch up with the feed. */
const CATCH_UP_READS = 8;

/** The parsed form of a feed id: entry `seq`, live index `n` (0 for an entry). */
export function parseEventId(id: string): { seq: number; n: number } {
  const m = /^(\d{1,15})(?:\.(\d{1,15}))?$/.exec(id);
  if (!m) {
    throw new HttpError(
      400,
      "INVALID_EVENT_ID",
      `Last-Event-ID ${JSON.stringify(id.slice(0, 64))} is not an id of this feed ("<seq>" or "<seq>.<n>"); reconnect without it to start from now`,
    );
  }
  return { seq: Number(m[1]), n: m[2] === undefined ? 0 : Number(m[2]) };
}

/** See the file's comment. Made by the handler once per open session. */
export class SessionFeed {
  private lastSeq = 0;
  private n = 0;
  private readonly ring: FeedItem[] = [];
  private ringBytes = 0;
  private readonly listeners = new Set<(item: FeedItem) => void>();
  private pulling: Promise<void> | undefined;
  private dirty = false;
  private readonly unsubscribe: () => void;
  /** Resolves once the feed knows the store's last entry (it starts from there). */
  readonly ready: Promise<void>;

  constructor(
    private readonly session: Session,
    private readonly store: SessionStore,
    private readonly maxRingBytes: number,
  ) {
    this.unsubscribe = session.subscribe((event) => this.onEvent(event));
    this.ready = this.read(0).then((entries) => {
      this.lastSeq = Math.max(this.lastSeq, entries.at(-1)?.seq ?? 0);
    });
    this.ready.catch(() => {});
  }

  /** Stops following the session (its readers' streams stay open until they close). */
  close(): void {
    this.unsubscribe();
  }

  /**
   * Starts a reader: items after `after` (an id this feed or an earlier process of it wrote;
   * absent: from now) go to `write`, then every new one. Returns the function that stops it.
   * Contract of `write`: must not throw; returns false once its stream closed.
   */
  async attach(after: string | undefined, write: (item: FeedItem) => boolean): Promise<() => void> {
    await this.ready;
    const stop = () => this.listeners.delete(listener);
    const listener = (item: FeedItem) => {
      if (!write(item)) stop();
    };
    if (after === undefined) {
      this.listeners.add(listener);
      return stop;
    }
    const from = parseEventId(after);
    const at = this.ring.findIndex((item) => item.id === after);
    if (at >= 0) {
      for (const item of this.ring.slice(at + 1)) if (!write(item)) return stop;
      this.listeners.add(listener);
      return stop;
    }
    if (from.seq > this.lastSeq) {
      throw new HttpError(
        400,
        "INVALID_EVENT_ID",
        `Last-Event-ID ${after} is ahead of session ${this.session.id}'s log (last entry ${this.lastSeq}); reconnect without it`,
      );
    }
    // Not in memory (older, or written by an earlier process): the entries after it from the
    // store, read until they reach what the feed has dispatched, then live from here on.
    let entries: LogEntry[] = [];
    let seq = from.seq;
    for (let i = 0; i < CATCH_UP_READS && seq < this.lastSeq; i++) {
      const more = await this.read(seq);
      entries = entries.concat(more);
      seq = entries.at(-1)?.seq ?? seq;
    }
    const upTo = this.lastSeq;
    for (const entry of entries) {
      if (entry.seq <= upTo && !write(entryItem(entry))) return stop;
    }
    this.listeners.add(listener);
    return stop;
  }

  private onEvent(event: AgentEvent): void {
    if (!LEFT_OUT.has(event.type)) {
      this.dispatch({
        id: `${this.lastSeq}.${++this.n}`,
        event: event.type,
        json: JSON.stringify(event),
      });
    }
    if (!STREAMED.has(event.type)) void this.pull();
  }

  /** Reads the entries the store made durable since the last read; one read at a time. */
  private pull(): Promise<void> {
    if (this.pulling) {
      this.dirty = true;
      return this.pulling;
    }
    this.pulling = (async () => {
      try {
        await this.ready;
        do {
          this.dirty = false;
          for (const entry of await this.read(this.lastSeq)) {
            if (entry.seq <= this.lastSeq) continue;
            this.lastSeq = entry.seq;
            this.n = 0;
            this.dispatch(entryItem(entry));
          }
        } while (this.dirty);
      } catch {
        // A failed read is retried at the next event; the entries stay in the store.
      } finally {
        this.pulling = undefined;
      }
    })();
    return this.pulling;
  }

  private async read(afterSeq: number): Promise<LogEntry[]> {
    const { store } = this;
    const id = this.session.id;
    if (store.loadAfter) return store.loadAfter(id, afterSeq);
    return (await store.load(id)).filter((e) => e.seq > afterSeq);
  }

  private dispatch(item: FeedItem): void {
    this.ring.push(item);
    this.ringBytes += item.json.length;
    while (this.ringBytes > this.maxRingBytes && this.ring.length > 1) {
      this.ringBytes -= this.ring.shift()!.json.length;
    }
    for (const listener of [...this.listeners]) listener(item);
  }
}

const entryItem = (entry: LogEntry): FeedItem => ({
  id: String(entry.seq),
  event: "entry",
  json: JSON.stringify(entry),
});
