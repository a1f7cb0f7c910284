import { type ChatMessage, toChatMessages } from "../contracts/chat.ts";
import type { Clock } from "../contracts/clock.ts";
import type { IdGenerator } from "../contracts/ids.ts";
import type { Message } from "../contracts/messages.ts";
import { emptyInbox, type Inbox, inboxSnapshot, restoreInbox } from "../machines/policies/inbox.ts";
import { activeLeaf, pathTo, replayInto } from "./active-path.ts";
import {
  type CheckpointLoad,
  type CheckpointPolicy,
  checkpointDue,
  defaultCheckpointPolicy,
  hasCheckpoints,
  type LogCheckpoint,
  reopensSync,
} from "./checkpoint.ts";
import { decodeCheckpoint, sameWriter, THIS_WRITER } from "./decode.ts";
import type { EntryInput, EntryOf, EntryWriter, LogEntry } from "./entries.ts";
import { checkEntryRefs, stampEntry } from "./entry-input.ts";
import { applyInboxEntry, inboxFromEntries } from "./inbox-log.ts";
import { UnloadedHistory } from "./log-history.ts";
import { type AskedCall, type OpenWork, Projection } from "./projection.ts";
import { type Redaction, redactDurable, replaceBySeq } from "./redaction.ts";
import type { Lease, SessionStore } from "./store.ts";
import { WriteQueue } from "./write-queue.ts";

export interface SessionLogOptions {
  sessionId: string;
  store: SessionStore;
  /** Contract: `now()` is monotonic; it stamps each entry's `at`. */
  clock: Clock;
  /** Contract: returns a fresh id on every call; called as `ids("e")` for entry ids. */
  ids: IdGenerator;
  /** Automatic projection checkpoints, when the store supports them (SQLite); `false`: none. */
  checkpoints?: CheckpointPolicy | false;
}

/**
 * The in-memory view of one session's append-only log over a {@link SessionStore}.
 *
 * - `append` is synchronous and O(1) amortised: it stamps the entry (id, parentId = the active
 *   leaf, seq, at), updates the projection incrementally and queues the entry for the store.
 * - `flush` makes everything appended so far durable (see its TSDoc for failure semantics).
 * - `messages()` is the model's view of the active leaf's path (see `Projection`, session/projection.ts).
 * - With a checkpointing store, `open` restores the projection from the latest checkpoint plus
 *   the entries after it; older entries are decoded only when first needed (`entries()`,
 *   `path()`, `get()`, a leaf move or a projection rebuild). Each checkpoint the log writes
 *   puts it back in that state (when the store has `loadUpTo`): memory holds the projection and
 *   the entries since the last checkpoint, not the whole history.
 *
 * One writer per session: two logs appending to the same session make the store reject the
 * second writer's batch (its `seq` is not after the stored one).
 */
export class SessionLog {
  readonly sessionId: string;
  /** The store the log writes to. */
  readonly store: SessionStore;
  private readonly clock: Clock;
  private readonly ids: IdGenerator;
  private readonly policy: CheckpointPolicy | false;
  private all: LogEntry[] = [];
  private byId = new Map<string, LogEntry>();
  private readonly queue: WriteQueue;
  private seq = 0;
  private leaf: string | null = null;
  private pathEntries: LogEntry[] = [];
  private projection = new Projection();
  private dirty = false;
  /** The history a checkpoint or a rest let go (session/log-history.ts). */
  private unloaded: UnloadedHistory | null = null;
  /** The lease every append carries (a shared store's fencing token), if any. */
  private lease: Lease | undefined;
  private checkpointSeq = 0;
  /** The inbox folded from every entry so far; null: not known yet (an old checkpoint). */
  private inboxState: Inbox | null = emptyInbox();
  /** History released at rest was read back: later rests keep it (see `rest`). */
  private historyRead = false;
  private refusals = new Set<(error: unknown) => void>();
  /** The Keel that last stamped the log (`EntryBase.writer`); null: none known. */
  private writer: EntryWriter | null = null;

  private constructor(options: SessionLogOptions) {
    this.sessionId = options.sessionId;
    this.store = options.store;
    this.clock = options.clock;
    this.ids = options.ids;
    this.policy = options.checkpoints ?? defaultCheckpointPolicy;
    this.queue = new WriteQueue((batch) =>
      this.lease
        ? this.store.append(this.sessionId, batch, { lease: this.lease })
        : this.store.append(this.sessionId, batch),
    );
  }

  /**
   * Opens a session: restores the active leaf (the last `leaf` entry, or the last entry after
   * it), settings, baseline and projection — from the store's checkpoint when it has one (then
   * replaying only the entries after it), else by replaying every entry. An unknown session
   * opens empty. Nothing is written.
   */
  static async open(options: SessionLogOptions): Promise<SessionLog> {
    const log = new SessionLog(options);
    const { store, sessionId } = options;
    const load = hasCheckpoints(store) ? await store.loadFromCheckpoint(sessionId) : null;
    if (!load || !log.restore(load)) log.replay(await store.load(sessionId));
    else {
      // A tail that reads the history (targets, a rebuild) or an inbox-less checkpoint: load it.
      if (!log.inboxState || load.tail.some((e) => e.type === "leaf" || e.type === "context_edit"))
        await log.loadHistory();
      for (const e of load.tail) log.place(Object.freeze(e));
      if (log.dirty) await log.loadHistory();
    }
    log.queue.startAt(log.seq);
    return log;
  }

  /**
   * `open`, synchronously, over a store that reads synchronously (memory, SQLite; else null): a
   * session that slept reopens its log so, from the checkpoint it wrote going to sleep.
   */
  static openSync(options: SessionLogOptions): SessionLog | null {
    const { store, sessionId } = options;
    if (!reopensSync(store)) return null;
    const load = store.loadFromCheckpointSync(sessionId);
    const log = new SessionLog(options);
    if (load?.loadPrefixSync && log.restore(load)) {
      for (const e of load.tail) log.place(Object.freeze(e)); // history read as needed
    } // No checkpoint (no entries yet), or one this Keel cannot read: every entry, as `open`.
    else log.replay(store.loadUpToSync(sessionId, Number.MAX_SAFE_INTEGER));
    log.queue.startAt(log.seq);
    return log;
  }

  /** Takes a checkpoint's state (false: unreadable, replay the entries instead). */
  private restore(load: CheckpointLoad): boolean {
    const site = { store: `${this.store.kind} store`, sessionId: this.sessionId };
    const checkpoint = decodeCheckpoint(load.body, site);
    const projection = checkpoint ? Projection.restore(checkpoint.projection) : null;
    if (!checkpoint || !projection) return false;
    this.projection = projection;
    this.seq = this.checkpointSeq = checkpoint.seq;
    this.leaf = checkpoint.leafId;
    this.unloaded = new UnloadedHistory(load.loadPrefix, load.loadPrefixSync ?? null);
    this.inboxState = checkpoint.inbox ? restoreInbox(checkpoint.inbox) : null;
    this.writer = checkpoint.writer ?? null;
    return true;
  }

  /** Makes later flushes carry `lease` (the store refuses them once it is lost); `undefined`: none. */
  fence(lease: Lease | undefined): void {
    this.lease = lease;
  }

  /** The lease appends carry, if any. */
  get heldLease(): Lease | undefined {
    return this.lease;
  }

  /**
   * Loads the history a checkpoint let `open` (or a later checkpoint) skip, so the synchronous
   * readers that need it (`entries()`, `path()`, `get()` of an old id, a leaf move, a rebuild)
   * can run. Store reads are asynchronous, so callers that need history await this first; those
   * readers throw when it was not loaded. Cheap when nothing is missing.
   */
  async loadHistory(): Promise<void> {
    await this.unloaded?.fetch();
  }

  /** Whether the next projection read rebuilds from unloaded history: await {@link loadHistory} first. */
  get needsHistory(): boolean {
    return this.dirty && !this.historyLoaded;
  }

  /** Whether the synchronous readers can run without `loadHistory` first. */
  get historyLoaded(): boolean {
    return !this.unloaded || this.unloaded.readable;
  }

  /** The seq of the last entry (0: none): how many entries the session has, on every branch. */
  get lastSeq(): number {
    return this.seq;
  }

  /**
   * The session's inbox as its entries left it (docs/architecture.md, "Inbox lanes"), on every
   * branch; kept incrementally and in checkpoints (reopening does not decode history for it).
   */
  inbox(): Inbox {
    if (!this.inboxState) {
      this.materialize();
      this.inboxState = inboxFromEntries(this.all);
    }
    return this.inboxState;
  }

  /** The id of the active leaf (null: the empty root). */
  get leafId(): string | null {
    return this.leaf;
  }

  /**
   * Appends one entry at the active leaf and returns it (frozen). Synchronous; the entry is
   * durable only after a later {@link flush} resolves. A `leaf` entry moves the active leaf to
   * its `leafId`; every other entry becomes the new leaf. `own` (an input's entry): a refused
   * write takes it back if it is the last one, else calls `keep` (`OwnWrite`, write-queue.ts).
   * Throws a `TypeError` on input that would corrupt the log (unknown target ids).
   * Input the store could not encode (a `BigInt`, nesting deeper than the JSON limit, a cycle,
   * a throwing `toJSON`) is stored as an encodable copy with `encodingProblem` saying what was
   * replaced: one bad value never makes a flush fail, which would lose every entry queued with it.
   */
  append<T extends EntryInput>(input: T, own?: { keep(): void }): EntryOf<T["type"]> {
    // A leaf move rebuilds the path from all history: loaded first (a failed load changes nothing).
    if (input.type === "leaf") this.materialize();
    checkEntryRefs(
      input,
      this.sessionId,
      (id) => this.get(id),
      () => this.path(),
    );
    const writer = sameWriter(this.writer, THIS_WRITER) ? undefined : THIS_WRITER;
    const entry = stampEntry(input, this.seq + 1, this.leaf, this.clock.now(), this.ids(), writer);
    const inbox = this.inboxState; // what `unplace` restores if its own write is refused
    this.place(entry);
    this.queue.push(entry, own && { withdraw: () => this.unplace(entry, inbox), keep: own.keep });
    return entry as EntryOf<T["type"]>;
  }

  /** Takes back the last entry, which the store refused: nothing of it was written. */
  private unplace(entry: LogEntry, inbox: Inbox | null): void {
    if (this.all.at(-1) !== entry) return;
    this.all.pop();
    this.byId.delete(entry.id);
    [this.seq, this.leaf, this.inboxState] = [entry.seq - 1, entry.parentId, inbox];
    if (entry.writer) this.writer = null; // its stamp went with it: the next entry carries one
    if (!this.unloaded) this.pathEntries.pop();
  }

  /**
   * Writes every queued entry to the store in one `store.append` call; resolves once they are
   * durable. Concurrent calls coalesce: a flush while another is in flight waits for it, then
   * writes what is still queued (one follow-up write however many callers wait).
   * On a store failure it rejects with the store's error and the entries STAY QUEUED, in order:
   * the next `flush` retries them (a rejected batch wrote nothing). When the policy says so it
   * then writes a projection checkpoint (O(projection), rare by design); a failed checkpoint
   * does not fail the flush (the entries are durable; open replays more).
   */
  async flush(): Promise<void> {
    try {
      await this.queue.flush();
    } catch (error) {
      for (const listener of this.refusals) listener(error);
      throw error;
    }
    if (this.policy && checkpointDue(this.policy, this.seq, this.checkpointSeq)) {
      await this.checkpoint().catch(() => {});
    }
  }

  /**
   * Persists a projection checkpoint at the current seq, if the store supports it and every
   * entry is durable (call after `flush`); resolves to whether one is at the last entry now.
   */
  async checkpoint(): Promise<boolean> {
    if (!hasCheckpoints(this.store) || this.queue.size > 0) return false;
    if (this.seq === this.checkpointSeq) return true;
    const seq = this.seq;
    const body: LogCheckpoint = {
      v: 1,
      seq,
      leafId: this.leaf,
      projection: this.fresh().snapshot(),
      inbox: inboxSnapshot(this.inbox()),
      ...(this.writer ? { writer: this.writer } : {}),
    };
    await this.store.saveCheckpoint(this.sessionId, seq, JSON.stringify(body));
    this.checkpointSeq = Math.max(this.checkpointSeq, seq);
    this.release(seq);
    return this.checkpointSeq === this.seq;
  }

  /**
   * Drops the entries with seq ≤ `seq` from memory: a checkpoint covers them and the store has
   * them, so the log is in the state `open` leaves it in (projection and recent entries in
   * memory, history decoded again on first need). Keeps a long session's memory at its
   * projection plus the entries since the last checkpoint, not its whole history.
   */
  private release(seq: number, byRest = false): void {
    const store = this.store;
    if (!hasCheckpoints(store) || !store.loadUpTo) return;
    let k = 0;
    while (k < this.all.length && this.all[k].seq <= seq) k++;
    if (k === 0) return;
    const tail = this.all.slice(k);
    this.all = tail;
    this.byId = new Map();
    for (const e of tail) this.byId.set(e.id, e);
    this.pathEntries = [];
    const sessionId = this.sessionId;
    this.unloaded = new UnloadedHistory(
      () => store.loadUpTo!(sessionId, seq),
      store.loadUpToSync ? () => store.loadUpToSync!(sessionId, seq) : null,
      byRest,
    );
  }

  /**
   * The session is idle: when every entry is durable and the store reads them back
   * synchronously (memory, SQLite), drops them from memory as a checkpoint's release does; the
   * projection stays. A log whose history was read back after a rest keeps it at later rests
   * (something reads it; decoding it every turn would cost O(history)). PostgreSQL: they stay.
   */
  rest(): void {
    const store = this.store;
    if (this.historyRead || !hasCheckpoints(store) || !store.loadUpToSync || this.dirty) return;
    if (this.queue.size > 0 || this.queue.durableSeq !== this.seq) return;
    this.release(this.seq, true);
  }

  /** Flushes, then writes a checkpoint so the next open is fast. The store stays open. */
  async close(): Promise<void> {
    await this.flush();
    await this.checkpoint();
  }

  /** How many appended entries are not yet durable. */
  pendingCount(): number {
    return this.queue.size;
  }

  /**
   * The seq of the last entry known to be durable: every entry up to it is in the store (the
   * store held them at open, or a flush wrote them). Entries after it are queued.
   */
  get durableSeq(): number {
    return this.queue.durableSeq;
  }

  /**
   * Calls `listener` with the store's error each time a flush is refused (before the flush's
   * promise rejects), whoever called it; returns the unsubscribe. Contract: it must not throw.
   */
  onRefused(listener: (error: unknown) => void): () => void {
    this.refusals.add(listener);
    return () => this.refusals.delete(listener);
  }

  /**
   * The projection of the active leaf's path, as neutral messages (contracts/messages.ts). The
   * array is OWNED BY THE LOG and live: later appends extend it in place (fill patched tool
   * slots, apply context-edit text replacements), a rebuild (leaf move, omission edit,
   * compaction, failed attempt) replaces it with a new array. Callers must not mutate it or its
   * (frozen) messages; `slice()` it to keep a snapshot.
   */
  history(): readonly Message[] {
    return this.fresh().messages;
  }

  /**
   * The projection in OpenAI Chat Completions shape (contracts/chat.ts): a new array each call,
   * O(messages) with each message rendered once.
   */
  messages(): ChatMessage[] {
    return toChatMessages(this.fresh().messages);
  }

  /** Messages of {@link history} replaced in place since the last call, or "all" (`Projection.takeChanges`). */
  takeChanges(): readonly number[] | "all" {
    return this.fresh().takeChanges();
  }

  /** Each message's source entry id (the assistant entry for a patched tool slot). Live. */
  messageSources(): readonly string[] {
    return this.fresh().sources;
  }

  /** The settings in force: the last `settings` entry on the active path ({} if none). */
  settings(): Readonly<Record<string, unknown>> {
    return this.fresh().settings;
  }

  /** The compaction the projection starts from (the last one on the path), or null. */
  baseline(): EntryOf<"compaction"> | null {
    return this.fresh().baseline;
  }

  /** Calls, attempts and the turn begun but not finished on the active path. */
  openWork(): OpenWork {
    return this.fresh().openWork();
  }

  /** Calls of the last tool-asking message on the active path that never started (see `Projection.unstartedCalls`). */
  unstartedCalls(): AskedCall[] {
    return this.fresh().unstartedCalls();
  }

  /**
   * Every entry of the log (all branches) in `seq` order. Live until the log next releases the
   * history a checkpoint covers, or the session rests (then call again); do not mutate.
   */
  entries(): readonly LogEntry[] {
    this.materialize();
    return this.all;
  }

  /** The active path, root → leaf. Live until the next leaf move or release; do not mutate. */
  path(): readonly LogEntry[] {
    this.materialize();
    return this.pathEntries;
  }

  /** The entry with this id, if any. */
  get(id: string): LogEntry | undefined {
    const e = this.byId.get(id);
    if (e || !this.unloaded) return e;
    this.materialize();
    return this.byId.get(id);
  }

  /**
   * Replaces the entries `ids` in memory with their redacted copies (`redactEntry`,
   * session/redaction.ts) after the store has redacted them (`store.redactEntries`); the next
   * read rebuilds the projection, and the next {@link checkpoint} is written afresh (the store
   * dropped the one that held the content). Synchronous; returns the redacted entries.
   * Throws when history is not loaded (await {@link loadHistory} first), when entries are still
   * not yet written (flush first: the queue would write the old content), or for an unknown id.
   */
  redact(ids: readonly string[], redaction: Redaction): LogEntry[] {
    this.materialize();
    const swapped = redactDurable(ids, redaction, {
      sessionId: this.sessionId,
      get: (id) => this.byId.get(id),
      durableSeq: this.queue.durableSeq,
    });
    for (const e of swapped) {
      this.byId.set(e.id, e);
      replaceBySeq(this.all, e);
    }
    this.pathEntries = pathTo(this.leaf, this.byId);
    this.dirty = true;
    if (this.inboxState) this.inboxState = inboxFromEntries(this.all);
    this.checkpointSeq = 0;
    return swapped;
  }

  /** Records an entry (appended or replayed) and advances leaf, path and projection. */
  private place(entry: LogEntry): void {
    this.seq = entry.seq;
    if (entry.writer) this.writer = entry.writer;
    if (this.inboxState && (entry.type === "inbox" || entry.type === "inbox_consumed")) {
      this.inboxState = applyInboxEntry(this.inboxState, entry);
    }
    this.all.push(entry);
    this.byId.set(entry.id, entry);
    if (entry.type === "leaf") {
      this.materialize();
      this.leaf = entry.leafId;
      this.pathEntries = pathTo(entry.leafId, this.byId);
      this.dirty = true;
      return;
    }
    this.leaf = entry.id;
    if (!this.unloaded) this.pathEntries.push(entry);
    if (this.dirty) return; // the next read rebuilds from the path
    const target = entry.type === "context_edit" ? this.get(entry.targetId) : undefined;
    if (!this.projection.apply(entry, target)) this.dirty = true;
  }

  private fresh(): Projection {
    if (this.dirty) {
      this.materialize();
      this.projection = Projection.fromPath(this.pathEntries);
      this.dirty = false;
    }
    return this.projection;
  }

  /** Decodes the history a checkpoint let `open` skip (once). */
  private materialize(): void {
    const unloaded = this.unloaded;
    if (!unloaded) return;
    const prefix = unloaded.take(this.sessionId, this.checkpointSeq);
    this.unloaded = null;
    if (unloaded.byRest) this.historyRead = true;
    for (const e of prefix) this.byId.set(e.id, Object.freeze(e));
    this.all = prefix.concat(this.all);
    this.pathEntries = pathTo(this.leaf, this.byId);
  }

  private replay(entries: readonly LogEntry[]): void {
    this.seq = replayInto(this.sessionId, this.seq, entries, this.all, this.byId);
    for (const e of entries) if (e.writer) this.writer = e.writer;
    this.leaf = activeLeaf(this.all, this.byId);
    this.pathEntries = pathTo(this.leaf, this.byId);
    this.projection = Projection.fromPath(this.pathEntries);
    this.inboxState = inboxFromEntries(this.all);
  }
}
