/**
 * One caller's part of a group: `undefined` when its entries are durable, or the error that
 * refused it (nothing of it was written).
 */
export type CommitOutcome = Error | undefined;

/** How a {@link GroupCommit} writes and when it starts a group. */
export interface GroupCommitOptions<T> {
  /**
   * Writes `group` in one transaction (one round trip for a server). Contract: resolves to one
   * outcome per item, in order, once the accepted items are durable at the store's setting; an
   * item refused alone (fenced, seq conflict, duplicate id) wrote nothing. Rejects, or throws,
   * when nothing of the group was written: every item is then refused with that error.
   */
  commit(group: readonly T[]): Promise<readonly CommitOutcome[]> | readonly CommitOutcome[];
  /**
   * The item's session. Contract: pure. Items of one key commit in arrival order, at most one
   * per group, so a group never holds two appends of one session.
   */
  key(item: T): string;
  /**
   * When a group starts once an item arrives at an idle committer. `"microtask"`: at the end of
   * the current job (a server's round trip: what arrives while it is in flight forms the next
   * group). `"immediate"`: at the event loop's next check phase (`setImmediate`), for an engine
   * whose commit is synchronous and so is never in flight: every append issued before then joins.
   * A lone writer (no append of another key arrived while one was queued or in flight for
   * {@link LONE_WRITER_MS}) starts at the microtask even so: nobody would join, and the wait for
   * the check phase was most of its append's time. It still waits for the check phase once every
   * {@link LONE_WRITER_YIELD_MS}, so a run of instant steps lets timers (a lease's heartbeat) and
   * I/O in.
   */
  start: "microtask" | "immediate";
}

/** What a committer did so far (tests, benchmarks: the mean group size is `items / groups`). */
export interface GroupCommitStats {
  groups: number;
  items: number;
  largest: number;
}

/**
 * How long after the last sign of concurrent writers (an append of another key arriving while one
 * was queued or in flight) an `"immediate"` committer still waits for the check phase:
 * concurrent sessions' appends overlap every few milliseconds, so a quiet 50 ms means one
 * session writes alone (one after another, as sessions that run in turn do, is alone too).
 */
export const LONE_WRITER_MS = 50;

/** The longest a lone writer's appends go without letting the event loop turn (see `start`). */
export const LONE_WRITER_YIELD_MS = 10;

interface Waiting<T> {
  item: T;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit (docs/stores.md): appends from many sessions share one transaction.
 *
 * Lifecycle: `submit` queues an item and returns the caller's promise; at most one group is in
 * flight; when none is, a group starts (see `start`) with everything queued, taking each key's
 * oldest item only; when it ends, each caller's promise settles with its own outcome and the
 * next group starts with what queued meanwhile.
 *
 * Invariants: a caller's promise resolves only after the commit that holds its item resolved
 * (its entries are durable); one item's refusal settles only that item; items of one key commit
 * in submission order.
 */
export class GroupCommit<T> {
  readonly stats: GroupCommitStats = { groups: 0, items: 0, largest: 0 };
  private queue: Waiting<T>[] = [];
  /** A group is scheduled or in flight. */
  private busy = false;
  private drained: (() => void)[] = [];
  /** The key of the last item submitted, and when one of another key last overlapped it. */
  private lastKey: string | undefined;
  private concurrentAt = Number.NEGATIVE_INFINITY;
  /** When a group last started at the check phase (the event loop turned before it). */
  private turnedAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: GroupCommitOptions<T>) {}

  /** Queues `item`; resolves once it is durable, rejects with what refused it. */
  submit(item: T): Promise<void> {
    const gather = this.options.start === "immediate" && this.gathers(this.options.key(item));
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (this.busy) return;
      this.busy = true;
      if (gather)
        setImmediate(() => {
          this.turnedAt = performance.now();
          this.run();
        });
      else queueMicrotask(() => this.run());
    });
  }

  /**
   * Whether an `"immediate"` group for `key` waits for the check phase: writers are concurrent
   * (see {@link LONE_WRITER_MS}), or a lone writer has not let the loop turn for
   * {@link LONE_WRITER_YIELD_MS}.
   */
  private gathers(key: string): boolean {
    const now = performance.now();
    if (key !== this.lastKey) {
      if (this.busy) this.concurrentAt = now;
      this.lastKey = key;
    }
    return now - this.concurrentAt <= LONE_WRITER_MS || now - this.turnedAt > LONE_WRITER_YIELD_MS;
  }

  /** Items queued or in flight. */
  get pending(): number {
    return this.queue.length + (this.busy ? 1 : 0);
  }

  /** Resolves once nothing is queued or in flight (what `close()` waits for before closing). */
  idle(): Promise<void> {
    if (!this.busy) return Promise.resolve();
    return new Promise((resolve) => this.drained.push(resolve));
  }

  private run(): void {
    const group = this.take();
    let outcomes: Promise<readonly CommitOutcome[]>;
    try {
      outcomes = Promise.resolve(this.options.commit(group.map((w) => w.item)));
    } catch (error) {
      outcomes = Promise.reject(error);
    }
    outcomes.then(
      (results) => {
        for (let i = 0; i < group.length; i++) {
          const error = results[i];
          if (error === undefined) group[i].resolve();
          else group[i].reject(error);
        }
        this.next();
      },
      (error: unknown) => {
        for (const w of group) w.reject(error);
        this.next();
      },
    );
  }

  /** The next group: the oldest queued item of each key, in queue order; the rest stay queued. */
  private take(): Waiting<T>[] {
    const queue = this.queue;
    let group: Waiting<T>[];
    if (queue.length === 1) {
      group = queue;
      this.queue = [];
    } else {
      const keys = new Set<string>();
      const rest: Waiting<T>[] = [];
      group = [];
      for (const w of queue) {
        const key = this.options.key(w.item);
        if (keys.has(key)) rest.push(w);
        else {
          keys.add(key);
          group.push(w);
        }
      }
      this.queue = rest;
    }
    this.stats.groups++;
    this.stats.items += group.length;
    if (group.length > this.stats.largest) this.stats.largest = group.length;
    return group;
  }

  private next(): void {
    if (this.queue.length > 0) {
      this.run();
      return;
    }
    this.busy = false;
    const drained = this.drained;
    this.drained = [];
    for (const resolve of drained) resolve();
  }
}

const committers = new WeakMap<object, GroupCommitStats>();

/** Called once by a store with its committer (see {@link groupCommitStats}). */
export function rememberGroupCommit<T>(store: object, committer: GroupCommit<T>): void {
  committers.set(store, committer.stats);
}

/** The store's group-commit counters, or undefined for a store that commits each append alone. */
export function groupCommitStats(store: object): Readonly<GroupCommitStats> | undefined {
  return committers.get(store);
}
