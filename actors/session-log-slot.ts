import type { SessionLog } from "../session/log.ts";
import type { SessionChart } from "./session-chart.ts";
import type { CarriedDeps, SessionOptions } from "./session-options.ts";
import type { TurnDeps } from "./turn-scope.ts";

/** What the slot reads of its session (actors/session-scope.ts). */
interface SlotOwner {
  readonly id: string;
  readonly options: SessionOptions;
  readonly closing: Promise<void> | undefined;
  readonly chart: SessionChart;
}

/**
 * Where a session keeps its log and the per-turn dependencies built on it, awake or asleep. A
 * session that has been quiet for `dormantAfterMs` lets both go (`sleep`); the next read of
 * `log` or `deps` reopens the log synchronously from the store's checkpoint and wires it again
 * (`rewire`). What the dependencies learned (`CarriedDeps`) is kept across the sleep. When to
 * sleep and when to reopen is the session chart's to decide (its residency region): a read while
 * asleep sends it `rouse`, and its `reopen` effect comes back here; an edit of the log between
 * turns (`edit`) is its edits region, which keeps the session awake and no turn starting.
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
  /** Takes a log reopened after a sleep as the session's state (set by `Session`). */
  rewire!: (log: SessionLog) => void;

  constructor(private readonly owner: SlotOwner) {}

  /** The log (undefined before it is open); reopened here when the session slept. */
  get log(): SessionLog {
    return this.live ?? (this.asleep ? this.rouse() : (undefined as unknown as SessionLog));
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
      if (this.asleep) this.rouse();
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
   * instructions) inside the session chart's edits region: no turn starts and no sleep begins
   * while it runs, and a sleep being written is called off, so the edit never writes through a
   * log the session let go. The chart refuses an edit while a turn runs: `run` then runs
   * outside the region, and its own check (`SessionScope.turnOpen`) refuses it.
   */
  async edit<T>(run: () => T | Promise<T>): Promise<T> {
    const { owner } = this;
    if (owner.closing) {
      throw new Error(
        `session ${owner.id} is closed: its log is not edited any more; reopen it with \`await agent.openSession(${JSON.stringify(owner.id)})\` and edit that`,
      );
    }
    const before = owner.chart.snapshot().context.edits;
    owner.chart.send({ type: "edit.begin" });
    const held = owner.chart.snapshot().context.edits > before;
    try {
      return await run();
    } finally {
      if (held) owner.chart.send({ type: "edit.end" });
    }
  }

  /** Effect `reopen`: the log the session let go, reopened from the store's checkpoint. */
  reopen(): void {
    if (this.live || !this.asleep) return;
    const { owner } = this;
    const log = owner.options.openLogSync?.();
    if (!log) {
      throw new Error(
        `session ${owner.id}: its log was let go while it was idle and the store cannot reopen it synchronously now; close the session and open it again with \`await agent.openSession(${JSON.stringify(owner.id)})\``,
      );
    }
    this.rewire(log);
  }

  /** A read while asleep: the chart reopens the log (its `reopen` effect). */
  private rouse(): SessionLog {
    this.owner.chart.send({ type: "rouse" });
    // Sent from inside another effect the chart takes it after the current step: reopen now.
    if (!this.live) this.reopen();
    return this.live as SessionLog;
  }
}
