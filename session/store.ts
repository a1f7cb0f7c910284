import type { LogEntry } from "./entries.ts";
import type { Redaction } from "./redaction.ts";

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

/** What `deleteSession` removed: how many of each (0 for an unknown session). */
export interface DeletedSession {
  sessionId: string;
  entries: number;
  checkpoints: number;
  /** Inputs other processes posted to it (taken or not). */
  inputs: number;
  leases: number;
  /** Idempotency ledger rows of its calls. */
  ledgerRows: number;
}

/** What a fenced writer passes with each append (see {@link LeaseStore}). */
export interface AppendOptions {
  /**
   * The lease the writer holds. The store checks, in the transaction of the append, that this is
   * the session's current lease and that it has not expired; otherwise it rejects the whole batch
   * with `FENCED`. Without it, an append to a session whose lease is held (not released) is
   * refused too: a session with an owner has one writer.
   */
  lease?: Lease;
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
  append(sessionId: string, entries: readonly LogEntry[], options?: AppendOptions): Promise<void>;
  /** Contract: every entry of the session in `seq` order; [] for an unknown session. */
  load(sessionId: string): Promise<LogEntry[]>;
  /**
   * Optional: the entries with seq greater than `afterSeq`, in `seq` order (a follower reads
   * its owner's log as a tail). Without it, readers filter `load`.
   */
  loadAfter?(sessionId: string, afterSeq: number): Promise<LogEntry[]>;
  /** Every session it holds. */
  list(): Promise<SessionSummary[]>;
  /**
   * Optional (Keel's memory, SQLite and PostgreSQL stores have it). Removes the session and
   * everything the store keeps for it: its entries, its checkpoint, the inputs posted to it, its
   * lease, and the idempotency ledger rows of its calls (keyed by the `idempotencyKey` of its
   * `call_started` entries; SQLite's only when its file has a ledger table). Files the session
   * wrote beside its log are not the store's: `agent.deleteSession(id)` removes those too.
   * Contract: all or nothing, in one transaction; refused with `FENCED` while a runner holds
   * the session's live lease (close the session first); an unknown session resolves with every
   * count 0. SQLite: when it resolves, the removed bytes are gone from the file and from its
   * write-ahead log (docs/stores.md says how, and what PostgreSQL keeps until VACUUM).
   */
  deleteSession?(sessionId: string): Promise<DeletedSession>;
  /**
   * Optional (as `deleteSession`). Replaces each entry with its redacted copy (`redactEntry`,
   * session/redaction.ts: content fields become `[redacted: <reason>]`, ids and types are kept),
   * rewrites the posted-input rows of redacted `inbox` and `user_message` entries the same way,
   * and drops the session's checkpoint (it holds the projection, and so the content). Resolves
   * with the redacted entries in `seq` order.
   * Contract: all or nothing; rejects with `NOT_FOUND` naming an id that is not an entry of the
   * session, a `TypeError` for an entry type that holds no content, `FENCED` as `append` does
   * (pass the writer's `lease`). SQLite: the replaced bytes are gone from the file and the WAL
   * when it resolves.
   */
  redactEntries?(
    sessionId: string,
    entryIds: readonly string[],
    redaction: Redaction,
    options?: AppendOptions,
  ): Promise<LogEntry[]>;
  /** Releases the store; no call may follow. */
  close(): Promise<void>;
}

/** A session lease: who may write the session, and the fencing token every append carries. */
export interface Lease {
  sessionId: string;
  owner: string;
  /** Grows by one at every change of owner: an older holder's token is refused. */
  token: number;
}

/** An input written by any process for a session's owner (docs/architecture.md, docs/many-processes.md). */
export interface PostedInput {
  id: string;
  lane: "interrupt" | "next-step" | "next-turn";
  source: "user" | "tool" | "job" | "system";
  body: string;
}

/** A lease as stored, for inspection and tests. */
export interface LeaseInfo extends Lease {
  /** Milliseconds until it expires by the store's clock (≤ 0: expired). */
  expiresInMs: number;
  released: boolean;
  /** Set at a clean release: the owner left inputs queued that a worker should run. */
  pending: boolean;
}

/**
 * A store shared by several processes: one runner per session through a lease with a fencing
 * token (docs/stores.md, docs/many-processes.md, invariant 13 of docs/architecture.md), and a shared inbox with a doorbell.
 *
 * Time is the STORE's clock (the database's, for a server), so processes with skewed clocks
 * agree on expiry.
 */
export interface LeaseStore {
  /**
   * Takes the session's lease for `ttlMs` if nobody holds it, its holder released it, or it
   * expired (a takeover: the token grows). Contract: resolves null when a live lease is held by
   * another holder (even with the same owner name); never waits for it.
   * `takeover` is true when the previous holder neither released the lease nor is alive: the
   * log may hold a crashed runner's open work (run recovery). `ifToken`: also take a live lease
   * whose token is this one (a holder known to be dead, e.g. a process of this host that no
   * longer exists): a compare-and-set, so a lease renewed by a new holder meanwhile is not taken.
   */
  acquireLease(
    sessionId: string,
    owner: string,
    ttlMs: number,
    options?: { ifToken?: number },
  ): Promise<(Lease & { takeover: boolean }) | null>;
  /** Extends a live lease by `ttlMs` from now. Contract: false (nothing changed) when it was lost or expired. */
  renewLease(lease: Lease, ttlMs: number): Promise<boolean>;
  /**
   * Gives the lease up. `pending`: inputs are still queued in the log (a worker should take
   * the session over). Contract: a lease already lost is left as it is.
   */
  releaseLease(lease: Lease, options?: { pending?: boolean }): Promise<void>;
  /** The session's lease as stored (null: never leased), for inspection and tests. */
  readLease(sessionId: string): Promise<LeaseInfo | null>;
  /**
   * Records an input for the session's owner (deduplicated by `input.id`) and rings the
   * doorbell. Durable when it resolves: this is the acknowledgement.
   */
  postInput(sessionId: string, input: PostedInput): Promise<void>;
  /** Inputs posted and not yet marked taken, in posting order. */
  postedInputs(sessionId: string): Promise<PostedInput[]>;
  /** Marks posted inputs as moved into the session's log (after the log append is durable). */
  markTaken(sessionId: string, ids: readonly string[]): Promise<void>;
  /**
   * Calls `listener(sessionId)` when an input may have been posted for the session. A hint
   * only: it may be late, doubled or missed, so callers also re-read `postedInputs` on their own
   * schedule. Resolves to an unsubscribe function.
   */
  watchInputs(listener: (sessionId: string) => void): Promise<() => Promise<void>>;
  /**
   * Sessions that need a runner: posted inputs not taken, a lease released with `pending`, or
   * a lease expired without release (a crashed owner). Never a session with a live lease.
   */
  sessionsNeedingRunner(limit: number): Promise<string[]>;
}

/** Whether `store` can delete sessions and redact entries (every store of Keel's can). */
export function canErase(
  store: SessionStore,
): store is SessionStore & Required<Pick<SessionStore, "deleteSession" | "redactEntries">> {
  return typeof store.deleteSession === "function" && typeof store.redactEntries === "function";
}

/** Whether `store` is shared by processes: it has leases and an inbox (SQLite and PostgreSQL do). */
export function hasLeases(store: SessionStore): store is SessionStore & LeaseStore {
  const s = store as Partial<LeaseStore>;
  return typeof s.acquireLease === "function" && typeof s.postInput === "function";
}
