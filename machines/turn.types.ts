/**
 * The turn chart's types: what it is given (input, settings), holds (context), hears (events),
 * reports (output) and asks its host to do (effects). The chart itself is in
 * `turn.machine.ts`, which re-exports all of these.
 */
import type { AnyActorRef } from "xstate";
import type { BudgetStop, Spend } from "../contracts/budget.ts";
import type { Usage } from "../contracts/messages.ts";
import type { TurnFailureCode, TurnStatus } from "../contracts/status.ts";
import type { BatchEffects } from "./batch.machine.ts";
import type { BatchCallSpec } from "./policies/batch-schedule.ts";
import type { ScopeBudget, TurnLimits } from "./policies/budget.ts";
import type { LoopState, LoopWarning, ObservedResult } from "./policies/loop-guard.ts";
import type { ToolCallEffects } from "./tool-call.machine.ts";

/** What the batch needs to know about one valid call: the batch's own call spec. */
export type TurnCallSpec = BatchCallSpec;

export type { TurnLimits };

export interface TurnInput {
  turnId: string;
  limits: TurnLimits;
  /** The prompt's, session's and agent's budgets, as spent when the turn started; absent: none. */
  budgets?: readonly ScopeBudget[];
  maxParallelToolCalls: number;
  stopDeadlineMs: number;
  finalizeDeadlineMs: number;
  /**
   * The loop guard's `failAfter`: a step whose results leave the same call failing the same way
   * this many times in a row ends the turn `failed` (`loop_detected`). 0 or absent: off.
   */
  loopFailAfter?: number;
  /** The loop guard's `repeats`: from this many in a row the model is told (`loopWarned`). */
  loopRepeats?: number;
  /** Harder compactions after a context-overflow error, per turn (separate from retries). */
  maxOverflowRecoveries: number;
}

export type { ObservedResult };

/** Why the turn compacts: the budget crossed its threshold, or the provider refused the size. */
export type CompactionMode = "auto" | "overflow";

/**
 * What a turn is given and never changes, in one field of its context. XState copies the whole
 * context on every `assign` with `Object.assign({}, …)`, and V8 turns an object built that way
 * into a slow dictionary past a number of properties, and every later copy and read of it is
 * much slower (the measured cliff and cost: bench/FIGURES.md, "Costs behind code choices").
 * Keeping the constants here keeps the context under it; `test/chart-context-size.unit.test.ts`
 * checks every chart's context against the limit.
 */
export interface TurnSettings {
  turnId: string;
  limits: TurnLimits;
  maxParallelToolCalls: number;
  stopDeadlineMs: number;
  finalizeDeadlineMs: number;
  loopFailAfter: number;
  loopRepeats: number;
  maxOverflowRecoveries: number;
}

export interface TurnContext {
  settings: TurnSettings;
  /**
   * The loop guard's streak over every result of this turn, in the order they settled: it
   * decides whether a step ends the turn (`loopDetected`), so it lives here, not in the host.
   */
  loop: LoopState;
  /** Every budget that applies, the turn's own (from `limits`) first. */
  scopes: readonly ScopeBudget[];
  /** What this turn spent so far (time is the deadline timer's). */
  spent: Spend;
  /** The budget that stopped the turn, once one did. */
  budget: BudgetStop | undefined;
  /** Model responses committed so far. */
  step: number;
  /** Attempts started so far; attempt k's id is `${turnId}.a${k}`. Stale attempt events are ignored. */
  attemptSeq: number;
  tokens: number;
  calls: TurnCallSpec[];
  retryDelayMs: number;
  /** Overflow compactions made so far in this turn. */
  overflowRecoveries: number;
  compactMode: CompactionMode;
  cancelRequested: boolean;
  status: TurnStatus;
  reason: string | undefined;
  /** Set with `status: "failed"` when the runtime, not the model, failed the turn. */
  code: TurnFailureCode | undefined;
}

export type TurnEvent =
  | {
      type: "attempt.done";
      attempt: number;
      finishReason: "stop" | "tool_calls" | "length" | "content_filter";
      /** Every call of the message, valid or not. */
      callCount: number;
      /** The calls that passed preparation. */
      calls: TurnCallSpec[];
      /** Some valid call needs a permission decision before it may run. */
      needsPermission?: boolean;
      /** Input + output tokens of the response (provider usage; 0 when not reported). */
      tokens: number;
      /** `tokens` split (absent: all input), and the cost from the price table (absent: 0). */
      inputTokens?: number;
      outputTokens?: number;
      cost?: number;
      /** The results the calls that failed preparation get (`rejectInvalid`), in call order. */
      invalid?: ObservedResult[];
      /** The results every call gets if the answer was cut by length (`refuseCalls`). */
      truncated?: ObservedResult[];
    }
  | {
      type: "attempt.failed";
      attempt: number;
      /** Present when the retry policy allows another attempt. */
      retry?: { delayMs: number };
      /** The provider refused the request's size (context overflow): never retried as is. */
      overflow?: boolean;
      status: TurnStatus;
      reason: string;
      /** With `budget_exhausted`: the budget that could not cover the request. */
      budget?: BudgetStop;
    }
  | {
      type: "gate.allowed";
      /** The calls that may run. */
      calls: TurnCallSpec[];
      /** Calls denied with feedback: the feedback becomes their result; the turn goes on. */
      corrected: { callId: string; feedback: string }[];
      /** The corrected calls' results, as the loop guard reads them. */
      observed?: ObservedResult[];
    }
  | { type: "gate.declined"; reason: string }
  /** The attempt's start is durable: its request may go out. */
  | { type: "attempt.recorded"; attempt: number }
  /** The round ended: every call's result, in the order they settled. */
  | { type: "batch.done"; results?: ObservedResult[] }
  /** Steering drained and the budget measured: it crossed the compaction threshold (no attempt was written). */
  | { type: "compact.due" }
  /** The compaction ended: `ok` when a new baseline replaced the old one. */
  | {
      type: "compaction.done";
      ok: boolean;
      reason?: string;
      /** What its summary requests were charged (every request counts toward the budgets). */
      charge?: { usage: Usage; cost?: number };
    }
  | { type: "end.steered" }
  | { type: "end.none" }
  /**
   * The finalizer ended. `failure`: the log could not be made durable (the store refused the
   * write, or fenced it): the turn ends `failed` with that code and reason, whatever it was
   * about to report, since its end is not in the log (invariant 15 of docs/architecture.md).
   */
  | { type: "finalize.done"; failure?: { code: TurnFailureCode; reason: string } }
  | {
      type: "turn.interrupt";
      reason: string;
      status?: TurnStatus;
      code?: TurnFailureCode;
      /** Set when a budget's wall time ran out (the chart's own deadline timer). */
      budget?: BudgetStop;
    };

export interface TurnOutput {
  status: TurnStatus;
  reason?: string;
  /** With `status: "failed"`: the runtime's failure code (see `TurnFailureCode`), if it was one. */
  code?: TurnFailureCode;
  /** With `status: "budget_exhausted"`: which budget ran out. */
  budget?: BudgetStop;
}

/** Params of `finalize`: how the turn ends. */
export interface FinalizeParams extends TurnOutput {
  /** The turn was interrupted (the log gets a `turn_aborted` note). */
  cancelled: boolean;
}

/**
 * Every effect the turn chart names (its own, its batch's and its calls', each declared in the
 * chart with `effect()`), as one contract the runtime implements (`TurnRun` in
 * `actors/turn-runner.ts`); `actors/charts.ts` binds each declared effect to the method of the
 * same name. Every method gets `self`, the actor the effect runs in (an effect that starts async
 * work answers it with the event named in its TSDoc), and the action's params.
 * Contract for all: must not throw.
 */
export interface TurnEffects extends ToolCallEffects, BatchEffects {
  /**
   * Before each step's model request: drain steering, then measure the context budget. When it
   * crossed the threshold, answers `compact.due` (synchronously) and writes nothing; otherwise
   * does what `recordAttempt` does for attempt `attempt` (and answers as it does).
   */
  prepare(self: AnyActorRef, params: { attempt: number; step: number }): void;
  /**
   * Compact the history at the latest legal cut (`overflow`: keeping less). Answers
   * `compaction.done`; after `abortCompaction` it answers too, with the old baseline intact.
   */
  compact(self: AnyActorRef, params: { mode: CompactionMode }): void;
  /** Stop the running compaction: its summary is discarded. */
  abortCompaction(self: AnyActorRef): void;
  /** Drain steering that arrived during a compaction (synchronous). */
  pollInbox(self: AnyActorRef): void;
  /**
   * Write attempt `attempt`'s start and make it durable with everything before it. Answers
   * `attempt.recorded`; when the write is refused, `turn.interrupt` (failed, with the refusal's
   * code) and then, like an aborted attempt, `attempt.failed`.
   */
  recordAttempt(self: AnyActorRef, params: { attempt: number; step: number }): void;
  /** Send model attempt `attempt`'s request. Answers `attempt.done` or `attempt.failed`. */
  startAttempt(self: AnyActorRef, params: { attempt: number; step: number }): void;
  /** Abort the running attempt's request (it then answers `attempt.failed`). */
  abortAttempt(self: AnyActorRef, params: { attempt: number }): void;
  /** Natural end: drain steering. Answers `end.steered` (some consumed) or `end.none`. */
  pollAtEnd(self: AnyActorRef): void;
  /** Give every call of the last response a TRUNCATED_CALL result (synchronous). */
  refuseCalls(self: AnyActorRef): void;
  /** Decide permissions for the calls. Answers `gate.allowed` or `gate.declined`. */
  checkPermissions(self: AnyActorRef): void;
  /** Give each corrected call its feedback as a DENIED result (synchronous). */
  correctCalls(
    self: AnyActorRef,
    params: { corrected: { callId: string; feedback: string }[] },
  ): void;
  /** Give every call of the last response a DENIED result naming `reason` (synchronous). */
  declineCalls(self: AnyActorRef, params: { reason: string }): void;
  /** Give every call that failed preparation its error result (synchronous). */
  rejectInvalid(self: AnyActorRef): void;
  /**
   * The step's results are all written: emit `batch.committed` (call order) and start making
   * them durable (synchronous). Nothing waits on that here: the next request waits for its own
   * write-ahead (`prepare` / `recordAttempt`), which covers these entries, a compaction flushes
   * before its summary request, and a turn that ends waits for the finalizer's flush. A refused
   * write answers `turn.interrupt` (failed, with its code).
   */
  commitBatch(self: AnyActorRef): void;
  /**
   * Results made streaks of `repeats` (≥ the guard's `repeats`) or more: tell the model, once
   * each (synchronous; `warnings` may be empty).
   */
  loopWarned(self: AnyActorRef, params: { warnings: LoopWarning[] }): void;
  /** The loop guard ended the turn: emit `loop.detected` (synchronous). */
  loopStopped(self: AnyActorRef, params: { repeats: number; tool: string }): void;
  /** Emit `retry.scheduled`. */
  retryScheduled(self: AnyActorRef, params: { delayMs: number; attempt: number }): void;
  /** Moment 1: the interrupt was received. */
  cancelAcknowledged(self: AnyActorRef, params: { reason: string }): void;
  /** Moment 2: no model request or tool is running any more. */
  executionStopped(self: AnyActorRef): void;
  /**
   * Settle leftovers, write turn end, flush. Answers `finalize.done`, with `failure` when the
   * flush was refused.
   */
  finalize(self: AnyActorRef, params: FinalizeParams): void;
  /** Moment 3 (after `finalize`): the turn has ended; emit `turn.ended`. */
  ended(self: AnyActorRef, params: TurnOutput): void;
}
