import type { AnyActorRef } from "xstate";

/** The doorbell: a wake that arrived while a turn was being prepared, run or cleaned up. */
export interface PendingWake {
  seq: number;
}

/** How the last execution ended. */
export type RunOutcome = "done" | "failed" | "interrupted";

/** A session's role across processes while it is open (`closed` is the chart's final state). */
export type OpenRole = "solo" | "owner" | "follower";

/**
 * What a session chart starts from: a new session opens; a session at rest (open, no turn, no
 * edit, nothing pending), whose actor was let go, resumes open with its role, awake or asleep.
 */
export interface SessionChartInput {
  /** Absent: the session is opening. Present: it was open and at rest, with this role. */
  resume?: { role: OpenRole; asleep: boolean };
}

export interface SessionChartContext {
  /** Starts of the work region (each prepares at most one turn); 0 before the first. */
  execution: number;
  /** Turns run: a start that finds nothing runnable runs none. */
  turns: number;
  /** The doorbell. Set by a wake that could not start a turn at once; consumed by a start. */
  pendingWake: PendingWake | null;
  /** Runnable inputs queued, as the inbox (owned by the log) last said. */
  runnable: number;
  /** Edits of the log in progress (compaction, redaction, branch moves, instructions). */
  edits: number;
  /** Prompts a follower forwarded to the owner that wait for its answer. */
  forwarded: number;
  /** The role the role region enters `open` with (from `opened`, or the sleep it resumes). */
  startRole: OpenRole;
  /** The chart was made for a session at rest: it enters `open` at once. */
  resumed: boolean;
  /** ... and asleep (its residency region starts `asleep`). */
  resumedAsleep: boolean;
  lastOutcome: RunOutcome | null;
  lastError: string | null;
}

/**
 * The session chart's events. `seq` is a host-assigned submission number, increasing in the
 * order callers submitted wakes and interrupts. `execution` names the execution a completion
 * belongs to; a completion of any other execution is ignored. `runnable` is the host's
 * synchronous count of runnable inputs in the log's inbox at the moment it sends the event.
 */
export type SessionChartEvent =
  | { type: "opened"; role: OpenRole; runnable: number }
  | { type: "open.failed"; error: string }
  | { type: "wake"; seq: number; runnable: number }
  | { type: "interrupt"; seq: number }
  | { type: "turn.ready"; execution: number; runnable: number }
  | { type: "turn.done"; execution: number }
  | { type: "turn.failed"; execution: number; error: string }
  | { type: "cleanup.done"; execution: number; runnable: number; error?: string }
  | { type: "edit.begin" }
  | { type: "edit.end" }
  | { type: "edits.drained" }
  | { type: "sleep"; allowed: boolean }
  | { type: "checkpoint.written"; unchanged: boolean }
  | { type: "checkpoint.failed" }
  | { type: "rouse" }
  | { type: "role.owner" }
  | { type: "role.follower" }
  | { type: "lease.lost" }
  | { type: "takeover.begin" }
  | { type: "takeover.done"; runnable: number }
  | { type: "takeover.failed" }
  | { type: "forward" }
  | { type: "forward.answered" }
  | { type: "close" }
  | { type: "close.done" };

/**
 * The effects the session chart names, implemented by its host (`actors/session/session-host.ts`)
 * and bound by `actors/charts.ts` like every other chart's. Contract for all: must not throw,
 * must not send to the actor synchronously (answers come later, as events).
 */
export interface SessionEffects {
  /** Prepare execution `execution` (dependencies, budgets, tools); answer `turn.ready`. */
  prepareTurn(self: AnyActorRef, params: { execution: number }): void;
  /** Take one turn's inputs and run it; answer `turn.done` or `turn.failed`. */
  runTurn(self: AnyActorRef, params: { execution: number }): void;
  /** Signal the current execution's AbortSignal (it still answers `turn.done`/`turn.failed`). */
  abortRun(self: AnyActorRef): void;
  /** Flush after execution `execution`; answer `cleanup.done` with the inbox's runnable count. */
  startCleanup(self: AnyActorRef, params: { execution: number }): void;
  /** Write a checkpoint at the last entry; answer `checkpoint.written` or `checkpoint.failed`. */
  writeCheckpoint(self: AnyActorRef): void;
  /** Let the log and what is built on it go: the session sleeps. */
  letGo(self: AnyActorRef): void;
  /** Reopen the log the session let go, synchronously (a read or an input while asleep). */
  reopen(self: AnyActorRef): void;
  /** The lease was lost: cancel what runs (the turn ends `failed`, `LEASE_LOST`). */
  leaseLost(self: AnyActorRef): void;
  /** A takeover ended: the prompts this process forwarded are its own waiters now. */
  adoptForwarded(self: AnyActorRef): void;
  /** Close: cancel what runs, await it, flush, release the lease; answer `close.done`. */
  startClose(self: AnyActorRef): void;
  /** Answer every prompt still waiting (queued or forwarded) as not run: the session closed. */
  settleWaiters(self: AnyActorRef): void;
}
