import { textOf } from "../contracts/messages.ts";
import { addUsage, type TurnResult } from "../contracts/turn-result.ts";
import type { EntryOf, LogEntry } from "./entries.ts";

/**
 * One turn's result as its log entries say it: the one rule for what a turn reports
 * (invariant 15 of docs/architecture.md, nothing is reported that the log does not hold). The runner that owns the
 * session feeds it every entry the turn appends; a follower feeds it the entries it reads from
 * the store; both report the same thing for the same log.
 *
 * - status, reason, code: the turn's LAST `turn_end` (a second one, failed, follows when the
 *   store refused the first: see `turn_end` in session/entries.ts); none yet: not ended;
 * - text: the text of its last `assistant_message`;
 * - usage: the sum of its assistant messages' usage;
 * - steps: its `attempt_start` entries (every model request, retries included).
 */
export class TurnTally {
  private text = "";
  private usage = { inputTokens: 0, outputTokens: 0 };
  private steps = 0;
  private cost: number | undefined;
  private estimated = false;
  private end: EntryOf<"turn_end"> | undefined;

  constructor(readonly turnId: string) {}

  /** Takes one entry into account; entries of other turns change nothing. */
  add(entry: LogEntry): void {
    switch (entry.type) {
      case "attempt_start":
        if (entry.turnId === this.turnId) this.steps++;
        return;
      case "assistant_message":
        if (entry.turnId !== this.turnId) return;
        this.text = textOf(entry.content);
        if (entry.usage) addUsage(this.usage, entry.usage);
        if (entry.usageEstimated) this.estimated = true;
        if (entry.cost !== undefined) this.cost = (this.cost ?? 0) + entry.cost;
        return;
      case "turn_end":
        if (entry.turnId === this.turnId) this.end = entry;
        return;
    }
  }

  /** Whether a `turn_end` of the turn was seen. */
  get ended(): boolean {
    return this.end !== undefined;
  }

  /** The turn's result so far; undefined until its end was seen. A fresh object each call. */
  result(): TurnResult | undefined {
    const end = this.end;
    if (!end) return undefined;
    const r: TurnResult = {
      status: end.status,
      text: this.text,
      usage: { ...this.usage },
      steps: this.steps,
    };
    if (end.reason !== undefined) r.reason = end.reason;
    if (end.code !== undefined) r.code = end.code;
    if (end.budget !== undefined) r.budget = end.budget;
    if (this.cost !== undefined) r.cost = this.cost;
    if (this.estimated) r.usageEstimated = true;
    return r;
  }
}

/**
 * The results of the turns that consumed given inputs, read from log entries in seq order (a
 * follower's view of its owner's log, read in pieces). `watch(inboxId)` before feeding the
 * entries that may hold its turn; `add` each entry; `take()` returns the inputs whose turn has
 * ended, with its result, once. Keeps a tally only for turns that are open or that a watched
 * input belongs to.
 */
export class TurnResults {
  private readonly watched = new Set<string>();
  /** Input → the turn that consumed it. */
  private readonly turnOf = new Map<string, string>();
  private readonly tallies = new Map<string, TurnTally>();

  /** Waits for the result of the turn that consumes input `inboxId`. */
  watch(inboxId: string): void {
    this.watched.add(inboxId);
  }

  /** Stops waiting for `inboxId` (its waiter moved elsewhere). */
  unwatch(inboxId: string): void {
    this.watched.delete(inboxId);
  }

  /** How many inputs are waited for. */
  get size(): number {
    return this.watched.size;
  }

  add(entry: LogEntry): void {
    if (entry.type === "turn_start") {
      this.tallies.set(entry.turnId, new TurnTally(entry.turnId));
      return;
    }
    if (entry.type === "user_message") {
      if (entry.inboxId && entry.turnId && this.watched.has(entry.inboxId))
        this.turnOf.set(entry.inboxId, entry.turnId);
      return;
    }
    const turnId = (entry as { turnId?: unknown }).turnId;
    if (typeof turnId === "string") this.tallies.get(turnId)?.add(entry);
  }

  /** The watched inputs whose turn has ended, each with that turn's result (once). */
  take(): { inboxId: string; result: TurnResult }[] {
    const done: { inboxId: string; result: TurnResult }[] = [];
    for (const [inboxId, turnId] of this.turnOf) {
      const result = this.tallies.get(turnId)?.result();
      if (!result) continue;
      done.push({ inboxId, result });
      this.turnOf.delete(inboxId);
      this.watched.delete(inboxId);
    }
    // Ended turns no waiting input belongs to are of no more use.
    const needed = new Set(this.turnOf.values());
    for (const [turnId, tally] of this.tallies) {
      if (tally.ended && !needed.has(turnId)) this.tallies.delete(turnId);
    }
    return done;
  }
}
