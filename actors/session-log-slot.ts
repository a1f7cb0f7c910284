import type { SessionLog } from "../session/log.ts";
import type { CarriedDeps, SessionOptions } from "./session-options.ts";
import type { TurnDeps } from "./turn-scope.ts";

/** What the slot reads of its session (actors/session-scope.ts). */
interface SlotOwner {
  readonly id: string;
  readonly options: SessionOptions;
  readonly closing: Promise<void> | undefined;
}

/**
 * Where a session keeps its log and the per-turn dependencies built on it, awake or asleep. A
 * session that has been quiet for `dormantAfterMs` lets both go (`sleep`); the next read of
 * `log` or `deps` reopens the log synchronously from the store's checkpoint and wires it again
 * (`rewire`). What the dependencies learned (`CarriedDeps`) is kept across the sleep, and an
 * edit of the log between turns (`edit`) holds the session awake.
 */
export class SessionLogSlot {
  private live: SessionLog | undefined;
  /** The log was let go after a quiet spell: the next read reopens it. */
  private asleep = false;
  /** Builds the per-turn dependencies on the adopted log (`depsFrom`), at their first read. */
  private makeDeps: (() => TurnDeps) | undefined;
  private madeDeps: TurnDeps | undefined;
  /** What the dependencies dropped at a sleep had learned, for the next ones (`takeCarried`). */
  private carried: CarriedDeps | undefined;
  /** Edits of the log in progress (`edit`): the session does not sleep under one. */
  private edits = 0;
  /** The checkpoint a sleep is writing: an edit starts once it is written. */
  sleeping: Promise<unknown> | undefined;
  /** Takes a log reopened after a sleep as the session's state (set by `Session`). */
  rewire!: (log: SessionLog) => void;

  constructor(private readonly owner: SlotOwner) {}

  /** The log (undefined before it is open); reopened here when the session slept. */
  get log(): SessionLog {
    return this.live ?? (this.asleep ? this.wake() : (undefined as unknown as SessionLog));
  }

  /** Takes `log` as the session's (at open, at a takeover, at a wake). */
  set(log: SessionLog): void {
    this.live = log;
    this.asleep = false;
  }

  /** Whether the log is in memory now (false before it is open and while the session sleeps). */
  get awake(): boolean {
    return this.live !== undefined;
  }

  /** The per-turn dependencies, built at their first read (reopening a log that slept). */
  get deps(): TurnDeps {
    if (this.madeDeps === undefined) {
      if (this.asleep) this.wake();
      if (this.makeDeps !== undefined) this.madeDeps = this.makeDeps();
    }
    return this.madeDeps as TurnDeps;
  }

  /** How `deps` is built on a newly adopted log; the ones built on the previous log are dropped. */
  depsFrom(make: () => TurnDeps): void {
    this.makeDeps = make;
    this.madeDeps = undefined;
  }

  /** What the dependencies let go at the last sleep learned (once: the next build takes it). */
  takeCarried(): CarriedDeps | undefined {
    const carried = this.carried;
    this.carried = undefined;
    return carried;
  }

  /**
   * Lets the log and the dependencies built on it go (the caller checked the session is quiet
   * and its log checkpointed at its last entry), keeping what the dependencies learned.
   */
  sleep(): void {
    this.live = undefined;
    this.asleep = true;
    const d = this.madeDeps;
    if (d) {
      // Kept without the log they were built on: the sleep lets that go.
      d.context.detach();
      d.budgets?.detach();
      const { context, budgets, permissions } = d;
      this.carried = { context, budgets, permissions, seq: d.log.lastSeq };
    }
    this.makeDeps = undefined;
    this.madeDeps = undefined;
  }

  /**
   * Runs an edit of the log between turns (a compaction, a redaction, a branch move, new
   * instructions): the session does not sleep while it runs, so the edit never writes through a
   * log the session let go; once the last one ends the session may sleep again.
   */
  async edit<T>(run: () => T | Promise<T>): Promise<T> {
    while (this.sleeping) await this.sleeping;
    if (this.owner.closing) {
      throw new Error(
        `session ${this.owner.id} is closed: its log is not edited any more; reopen it with \`await agent.openSession(${JSON.stringify(this.owner.id)})\` and edit that`,
      );
    }
    this.edits++;
    try {
      return await run();
    } finally {
      if (--this.edits === 0 && !this.owner.closing) this.owner.options.rested?.();
    }
  }

  /** Whether an edit of the log runs (`edit`). */
  get editing(): boolean {
    return this.edits > 0;
  }

  private wake(): SessionLog {
    const { owner } = this;
    const log = owner.options.openLogSync?.();
    if (!log) {
      throw new Error(
        `session ${owner.id}: its log was let go while it was idle and the store cannot reopen it synchronously now; close the session and open it again with \`await agent.openSession(${JSON.stringify(owner.id)})\``,
      );
    }
    this.rewire(log);
    // Woken by a read, it may sleep again; an input's turn re-arms it when it ends.
    if (!owner.closing) owner.options.rested?.();
    return log;
  }
}
