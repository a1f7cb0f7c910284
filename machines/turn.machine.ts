import { and, assertEvent, assign, cancel, enqueueActions, not, sendTo, setup } from "xstate";
import type { TurnFailureCode, TurnStatus } from "../contracts/status.ts";
import { batchMachine } from "./batch.machine.ts";
import { effect } from "./effect.ts";
import {
  addSpend,
  budgetReason,
  earliestDeadline,
  firstExhausted,
  NOTHING_SPENT,
  spendAfter,
  summarySpend,
  turnScope,
} from "./policies/budget.ts";
import {
  foldResults,
  type LoopState,
  type LoopWarning,
  NO_LOOP,
  type ObservedResult,
} from "./policies/loop-guard.ts";

import type {
  CompactionMode,
  FinalizeParams,
  TurnContext,
  TurnEffects,
  TurnEvent,
  TurnInput,
  TurnOutput,
} from "./turn.types.ts";

/**
 * After a step's results are in (or steering continued a natural end): stop on a spent budget,
 * else drain steering and sample again (`sampling.preparing`). `before` runs first. These are
 * transitions, not transient states: a chain of eventless states (deciding → preparing) is
 * invisible in every snapshot yet costs one microstep each, every step.
 */
const decideNext = (before: readonly "executionStopped"[] = []) => [
  {
    guard: "budgetExhausted" as const,
    target: "#turn.finalizing",
    actions: [...before, "exhaustBudget" as const],
  },
  { target: "#turn.running.sampling.preparing", actions: before },
];

/**
 * The turn's reason when its last answer did not end by a plain stop; undefined for `stop`.
 * This is a pure function.
 */
export function cutAnswerReason(finishReason: string): string | undefined {
  if (finishReason === "length")
    return "the answer was cut at the model's output limit (finish_reason: length); it is incomplete";
  if (finishReason === "content_filter")
    return "the provider's content filter stopped the answer (finish_reason: content_filter); it is incomplete";
  return undefined;
}

/**
 * A turn's context before its first attempt. Fields listed, not `{ ...input, step: 0, … }`: on
 * Node 20 every property added after a spread in a literal is a slow runtime call
 * (bench/FIGURES.md, "Costs behind code choices").
 */
export function initialTurnContext(input: TurnInput): TurnContext {
  return {
    settings: {
      turnId: input.turnId,
      limits: input.limits,
      maxParallelToolCalls: input.maxParallelToolCalls,
      stopDeadlineMs: input.stopDeadlineMs,
      finalizeDeadlineMs: input.finalizeDeadlineMs,
      loopFailAfter: input.loopFailAfter ?? 0,
      loopRepeats: input.loopRepeats ?? 0,
      maxOverflowRecoveries: input.maxOverflowRecoveries,
    },
    scopes: input.budgets ? [turnScope(input.limits), ...input.budgets] : [turnScope(input.limits)],
    spent: NOTHING_SPENT,
    budget: undefined,
    loop: NO_LOOP,
    step: 0,
    attemptSeq: 0,
    tokens: 0,
    calls: [],
    retryDelayMs: 0,
    overflowRecoveries: 0,
    compactMode: "auto",
    cancelRequested: false,
    status: "completed",
    reason: undefined,
    code: undefined,
  };
}

/** The results an event reports, as the loop guard reads them. */
const truncatedOf = (e: TurnEvent) => (e.type === "attempt.done" ? e.truncated : undefined);
const invalidOf = (e: TurnEvent) => (e.type === "attempt.done" ? e.invalid : undefined);
const observedOf = (e: TurnEvent) => (e.type === "gate.allowed" ? e.observed : undefined);
const resultsOf = (e: TurnEvent) => (e.type === "batch.done" ? e.results : undefined);

/** The corrected calls of a `gate.allowed` event. */
const correctedOf = ({ event }: { event: TurnEvent }) => ({
  corrected: (event as Extract<TurnEvent, { type: "gate.allowed" }>).corrected,
});

/**
 * Folds results into the loop guard's streak (`foldResults`, pure), in the order given, and
 * tells the model about each that made a streak of `loopRepeats` or more (`loopWarned`).
 */
const observe = (pick: (event: TurnEvent) => readonly ObservedResult[] | undefined) => [
  {
    type: "loopWarned" as const,
    params: ({ context, event }: { context: TurnContext; event: TurnEvent }) => ({
      warnings: foldLoop(context, pick(event) ?? NO_RESULTS).warned,
    }),
  },
  {
    type: "observeResults" as const,
    params: ({ event }: { event: TurnEvent }) => ({ results: pick(event) ?? NO_RESULTS }),
  },
];
const NO_RESULTS: readonly ObservedResult[] = Object.freeze([]);

/** The streak after `results` and the warnings they make (`foldResults`). This is a pure function. */
export function foldLoop(
  context: TurnContext,
  results: readonly ObservedResult[],
): { state: LoopState; warned: LoopWarning[] } {
  if (results.length === 0 || context.settings.loopFailAfter === 0)
    return { state: context.loop, warned: [] };
  return foldResults(context.loop, results, {
    repeats: context.settings.loopRepeats || context.settings.loopFailAfter,
    failAfter: context.settings.loopFailAfter,
  });
}

/** The way out when the step's results make a loop: end the turn `failed` (`loop_detected`). */
const endOnLoop = {
  guard: "loopDetected" as const,
  target: "#turn.finalizing",
  actions: [
    "failOnLoop" as const,
    {
      type: "loopStopped" as const,
      params: ({ context }: { context: TurnContext }) => ({
        repeats: context.loop.count,
        tool: context.loop.tool ?? "",
      }),
    },
  ],
};

/** The turn's output: status and reason, and the failure code when there is one. This is a pure function. */
export function outputOf(context: TurnContext): TurnOutput {
  const output: TurnOutput = { status: context.status, reason: context.reason };
  if (context.code !== undefined) output.code = context.code;
  if (context.budget !== undefined && context.status === "budget_exhausted")
    output.budget = context.budget;
  return output;
}

/** What an interrupt does while an attempt is recorded or streams: acknowledge, then abort it. */
const interruptAttempt = [
  "markCancelled" as const,
  {
    type: "cancelAcknowledged" as const,
    params: ({ event }: { event: TurnEvent }) => ({
      reason: (event as Extract<TurnEvent, { type: "turn.interrupt" }>).reason,
    }),
  },
  {
    type: "abortAttempt" as const,
    params: ({ context }: { context: TurnContext }) => ({ attempt: context.attemptSeq }),
  },
];

/** The attempt id of attempt number `seq` in turn `turnId` (pure, so the machine can derive it). */
export const attemptIdOf = (turnId: string, seq: number) => `${turnId}.a${seq}`;

/**
 * One prompt → many steps until done, cancelled, failed or out of budget.
 *
 * This machine is what runs: the runtime hosts it through `actors/charts.ts` with the effects of
 * one turn bound ({@link TurnEffects}), and the model search, the race tests, the mutants and
 * the inspector's chart use the same definition.
 *
 * `running` → sampling.preparing (drain steering, measure the budget, record the attempt) →
 * [compacting → sampling.recording →] streaming → (gating | refusing | executing) → [commit,
 * decide] → sampling.preparing … (deciding is a transition action, see `decideNext`). `compacting` runs when the budget crossed its
 * threshold (mode `auto`), or after a context-overflow error while the turn's overflow budget
 * lasts (mode `overflow`: a harder cut, then the request is sent again; a compaction that
 * fails there fails the turn).
 * A response with no tool calls ends the turn `completed`. Every terminal path goes through
 * `finalizing` (persist, settle leftovers; bounded by its own deadline, not cancellable) to the
 * final `done`.
 *
 * Invariants made structural here:
 * - a response that ended by length never reaches `executing` (invariant 3): `refusing` only
 *   gives each call a TRUNCATED_CALL result;
 * - an interrupt while a batch round runs stays inside `executing` until `batch.done`, so the
 *   round's calls all settle before finalizing (invariant 1);
 * - events of an older attempt are ignored (`isCurrentAttempt`);
 * - leaving `waiting` cancels the retry timer, so an interrupt ends a backoff at once;
 * - `compacting` is entered only from `sampling.preparing` (every batch committed) or after a failed
 *   attempt (no batch runs), so a compaction never runs beside a batch (invariant 10); an
 *   interrupt there waits for it to report and appends nothing.
 *
 * Effects are named actions provided by the runtime (`actors/turn-runner.ts`); each one that
 * starts async work answers with the event named in its comment.
 */
export const turnMachine = setup({
  types: {
    context: {} as TurnContext,
    events: {} as TurnEvent,
    input: {} as TurnInput,
    output: {} as TurnOutput,
  },
  actions: {
    // The effects: the runtime performs them (TurnEffects); here they are named no-ops.
    prepare: effect<{ attempt: number; step: number }>(),
    compact: effect<{ mode: CompactionMode }>(),
    abortCompaction: effect(),
    pollInbox: effect(),
    recordAttempt: effect<{ attempt: number; step: number }>(),
    startAttempt: effect<{ attempt: number; step: number }>(),
    abortAttempt: effect<{ attempt: number }>(),
    pollAtEnd: effect(),
    refuseCalls: effect(),
    checkPermissions: effect(),
    correctCalls: effect<{ corrected: { callId: string; feedback: string }[] }>(),
    declineCalls: effect<{ reason: string }>(),
    rejectInvalid: effect(),
    commitBatch: effect(),
    loopWarned: effect<{ warnings: LoopWarning[] }>(),
    /** The loop guard: folds results into the streak (the warnings were emitted just before). */
    observeResults: assign(({ context }, params: { results: readonly ObservedResult[] }) => ({
      loop: foldLoop(context, params.results).state,
    })),
    retryScheduled: effect<{ delayMs: number; attempt: number }>(),
    loopStopped: effect<{ repeats: number; tool: string }>(),
    cancelAcknowledged: effect<{ reason: string }>(),
    executionStopped: effect(),
    finalize: effect<FinalizeParams>(),
    ended: effect<TurnOutput>(),
    markCancelled: assign(({ event }) => {
      assertEvent(event, "turn.interrupt");
      return {
        cancelRequested: true,
        status: event.status ?? "cancelled",
        reason: event.reason,
        code: event.code,
        budget: event.budget,
      };
    }),
    /** The finalizer could not make the turn's end durable: that, not the planned end, is the outcome. */
    failUnwritten: assign(({ event }) => {
      assertEvent(event, "finalize.done");
      const { code, reason } = event.failure!;
      return { status: "failed" as TurnStatus, code, reason };
    }),
    /** A compaction's summary requests add their tokens and cost to the turn's spend (no step). */
    chargeSummaries: assign(({ context: { spent }, event: e }) => ({
      spent:
        e.type === "compaction.done" && e.charge ? addSpend(spent, summarySpend(e.charge)) : spent,
    })),
    countStep: assign(({ context, event }) => {
      assertEvent(event, "attempt.done");
      const spent = spendAfter(context.spent, event);
      return { step: context.step + 1, tokens: context.tokens + event.tokens, spent };
    }),
    /** countStep and storeCalls in one assign (one context copy per step, not two). */
    takeResponse: assign(({ context, event }) => {
      assertEvent(event, "attempt.done");
      const { step, tokens } = context;
      const spent = spendAfter(context.spent, event);
      return { step: step + 1, tokens: tokens + event.tokens, spent, calls: event.calls };
    }),
    /**
     * countStep for a response without calls, remembering why it ended when that is not a
     * plain stop: a turn that ends on it is `completed`, but its reason says the answer was cut
     * (`length`) or filtered (`content_filter`) — the caller must not read it as whole.
     */
    endResponse: assign(({ context, event }) => {
      assertEvent(event, "attempt.done");
      return {
        step: context.step + 1,
        tokens: context.tokens + event.tokens,
        spent: spendAfter(context.spent, event),
        reason: cutAnswerReason(event.finishReason),
      };
    }),
    completeNaturally: assign({ status: "completed" as TurnStatus }),
    failWithReason: assign(({ event }) => {
      assertEvent(event, "attempt.failed");
      return { status: event.status, reason: event.reason, budget: event.budget };
    }),
    failOnLoop: assign(({ context }) => {
      const { count: repeats, tool } = context.loop;
      return {
        status: "failed" as TurnStatus,
        reason: `loop_detected: ${tool} failed the same way ${repeats} times in a row with the same arguments (loopGuard.failAfter ${context.settings.loopFailAfter})`,
      };
    }),
    /** The first budget reached (`budgetExhausted` held): the turn ends naming it. */
    exhaustBudget: assign(({ context }) => {
      const budget = firstExhausted(context.scopes, context.spent)!;
      return { status: "budget_exhausted" as TurnStatus, reason: budgetReason(budget), budget };
    }),
  },
  actors: {
    /** The batch machine, provided by the runtime (children are the tool-call statecharts). */
    batch: batchMachine,
  },
  guards: {
    isCurrentAttempt: ({ context, event }) =>
      (event as { attempt?: number }).attempt === context.attemptSeq,
    cancelRequested: ({ context }) => context.cancelRequested,
    lengthWithCalls: ({ event }) => {
      assertEvent(event, "attempt.done");
      return event.finishReason === "length" && event.callCount > 0;
    },
    noCalls: ({ event }) => {
      assertEvent(event, "attempt.done");
      return event.callCount === 0;
    },
    needsPermission: ({ event }) => {
      assertEvent(event, "attempt.done");
      return event.needsPermission === true;
    },
    noneAllowed: ({ event }) => {
      assertEvent(event, "gate.allowed");
      return event.calls.length === 0;
    },
    nothingToFold: ({ event }) => {
      assertEvent(event, "attempt.done");
      return event.invalid === undefined || event.invalid.length === 0;
    },
    noValidCalls: ({ event }) => {
      assertEvent(event, "attempt.done");
      return event.calls.length === 0;
    },
    canRecoverOverflow: ({ context, event }) => {
      assertEvent(event, "attempt.failed");
      return (
        event.overflow === true &&
        context.overflowRecoveries < context.settings.maxOverflowRecoveries
      );
    },
    overflowUnrecovered: ({ context, event }) => {
      assertEvent(event, "compaction.done");
      return context.compactMode === "overflow" && !event.ok;
    },
    canRetry: ({ event }) => {
      assertEvent(event, "attempt.failed");
      return event.retry !== undefined;
    },
    /**
     * Folding the batch's results changes nothing: the loop guard is off, or no streak is open
     * and every result succeeded (a success ends a streak and warns of nothing).
     */
    loopUnchanged: ({ context, event }) => {
      assertEvent(event, "batch.done");
      if (context.settings.loopFailAfter === 0) return true;
      if (context.loop.count !== 0) return false;
      for (const result of event.results ?? NO_RESULTS)
        if (result.signature !== undefined) return false;
      return true;
    },
    /** The turn's results leave one call failing the same way `loopFailAfter` times in a row. */
    loopDetected: ({ context }) =>
      context.settings.loopFailAfter > 0 && context.loop.count >= context.settings.loopFailAfter,
    /** Some budget of some scope is spent (machines/policies/budget.ts, `firstExhausted`). */
    budgetExhausted: ({ context }) => firstExhausted(context.scopes, context.spent) !== undefined,
    finalizeFailed: ({ event }) => {
      assertEvent(event, "finalize.done");
      return event.failure !== undefined;
    },
  },
  delays: {
    retryDelay: ({ context }) => context.retryDelayMs,
    stopDeadline: ({ context }) => context.settings.stopDeadlineMs,
    finalizeDeadline: ({ context }) => context.settings.finalizeDeadlineMs,
  },
}).createMachine({
  id: "turn",
  context: ({ input }) => initialTurnContext(input),
  initial: "running",
  states: {
    running: {
      entry: [
        // The deadline timer: the nearest wall-time cap left of every scope (the turn's
        // `deadlineMs` among them), armed only when one has a cap, and cancelled on leaving.
        enqueueActions(({ enqueue, context }) => {
          const deadline = earliestDeadline(context.scopes);
          if (!deadline) return;
          enqueue.raise(
            {
              type: "turn.interrupt",
              reason: budgetReason(deadline.stop),
              status: "budget_exhausted",
              budget: deadline.stop,
            },
            { id: "turnDeadline", delay: deadline.ms },
          );
        }),
      ],
      exit: cancel("turnDeadline"),
      // Steering is drained (and the budget measured) before the first request as before every later one.
      initial: "starting",
      // One batch actor for the whole turn; each `executing` is one round of it. Leaving
      // `running` stops it, but only `batch.done` leaves `executing`, so no round is cut short.
      invoke: {
        id: "batch",
        src: "batch",
        input: ({ context }) => ({
          maxParallelToolCalls: context.settings.maxParallelToolCalls,
          stopDeadlineMs: context.settings.stopDeadlineMs,
        }),
        // A bug in the batch (it threw): still end through finalizing, so the log gets its turn
        // end and every call of the message its one result.
        onError: {
          target: "#turn.finalizing",
          actions: [
            assign(({ event }) => ({
              status: "failed" as TurnStatus,
              reason: `internal error in the tool batch: ${String(event.error)}`,
            })),
            "executionStopped",
          ],
        },
      },
      on: {
        // Default for phases with nothing running: acknowledge and finalize at once.
        "turn.interrupt": {
          target: "finalizing",
          actions: [
            "markCancelled",
            { type: "cancelAcknowledged", params: ({ event }) => ({ reason: event.reason }) },
            "executionStopped",
          ],
        },
      },
      states: {
        // Transient: a wider scope may be spent before the turn's first request (no request
        // then); later steps are checked by `decideNext` on their way to `sampling.preparing`.
        starting: {
          always: [
            { guard: "budgetExhausted", target: "#turn.finalizing", actions: "exhaustBudget" },
            { target: "sampling.preparing" },
          ],
        },
        // Between two steps: every batch has committed, so no cut falls between a call and its
        // result (invariant 10). An interrupt stops the summary request; the old baseline stays.
        compacting: {
          entry: {
            type: "compact",
            params: ({ context }) => ({ mode: context.compactMode }),
          },
          exit: "chargeSummaries",
          initial: "summarizing",
          states: {
            summarizing: {
              on: {
                "turn.interrupt": {
                  target: "stopping",
                  actions: [
                    "markCancelled",
                    {
                      type: "cancelAcknowledged",
                      params: ({ event }) => ({ reason: event.reason }),
                    },
                    "abortCompaction",
                  ],
                },
              },
            },
            // Cancel acknowledged; waiting for the compaction to report (it appends nothing).
            stopping: { on: { "turn.interrupt": {} } },
          },
          on: {
            "compaction.done": [
              {
                guard: "cancelRequested",
                target: "#turn.finalizing",
                actions: "executionStopped",
              },
              {
                guard: "overflowUnrecovered",
                target: "#turn.finalizing",
                actions: assign(({ event }) => {
                  assertEvent(event, "compaction.done");
                  return { status: "failed" as TurnStatus, reason: event.reason };
                }),
              },
              // Inputs that arrived while it ran are read before the request (docs/architecture.md, "Inbox lanes").
              { target: "sampling", actions: "pollInbox" },
            ],
          },
        },
        sampling: {
          entry: assign({ attemptSeq: ({ context }) => context.attemptSeq + 1 }),
          initial: "recording",
          states: {
            // A new step (from `starting` or `decideNext`): steering is drained and the context
            // measured first. When a compaction is due the host answers `compact.due` and writes
            // nothing (the attempt number is given back); otherwise it records the attempt as
            // `recording` does, in the same effect, so a step costs one event here, not two.
            preparing: {
              entry: {
                type: "prepare",
                params: ({ context }) => ({ attempt: context.attemptSeq, step: context.step }),
              },
              on: {
                "compact.due": {
                  target: "#turn.running.compacting",
                  actions: assign({
                    compactMode: "auto" as CompactionMode,
                    attemptSeq: ({ context }) => context.attemptSeq - 1,
                  }),
                },
                "attempt.recorded": { guard: "isCurrentAttempt", target: "streaming" },
                "turn.interrupt": { target: "stopping", actions: interruptAttempt },
              },
            },
            // Write-ahead: the request goes out only once the attempt's start, and everything the
            // turn wrote before it, is durable. A refused write (a fenced runner) ends the turn
            // here, before any request (invariants 13, 15). Entered again after a retry wait or
            // a compaction (nothing to drain or measure then).
            recording: {
              entry: {
                type: "recordAttempt",
                params: ({ context }) => ({ attempt: context.attemptSeq, step: context.step }),
              },
              on: {
                "attempt.recorded": { guard: "isCurrentAttempt", target: "streaming" },
                "turn.interrupt": { target: "stopping", actions: interruptAttempt },
              },
            },
            streaming: {
              entry: {
                type: "startAttempt",
                params: ({ context }) => ({ attempt: context.attemptSeq, step: context.step }),
              },
              on: { "turn.interrupt": { target: "stopping", actions: interruptAttempt } },
            },
            // Cancel acknowledged; waiting for the aborted attempt to report (or, when `prepare`
            // found a compaction due, for that answer: then no attempt was written).
            stopping: {
              on: {
                "turn.interrupt": {},
                "compact.due": { target: "#turn.finalizing", actions: "executionStopped" },
              },
            },
          },
          on: {
            "attempt.done": [
              { guard: not("isCurrentAttempt") },
              {
                guard: "cancelRequested",
                target: "#turn.finalizing",
                actions: ["countStep", "executionStopped"],
              },
              {
                guard: "lengthWithCalls",
                target: "refusing",
                actions: ["countStep", ...observe(truncatedOf)],
              },
              { guard: "noCalls", target: "ending", actions: "endResponse" },
              // Every call failed preparation: their error results are the whole batch.
              {
                guard: "noValidCalls",
                target: "committing",
                actions: ["takeResponse", "rejectInvalid", ...observe(invalidOf)],
              },
              {
                guard: "needsPermission",
                target: "gating",
                actions: ["takeResponse", ...observe(invalidOf)],
              },
              // The usual step: no failed preparation for the loop guard to fold (none failed,
              // or the guard is off and the runner reports none).
              { guard: "nothingToFold", target: "executing", actions: "takeResponse" },
              { target: "executing", actions: ["takeResponse", ...observe(invalidOf)] },
            ],
            "attempt.failed": [
              { guard: not("isCurrentAttempt") },
              {
                guard: "cancelRequested",
                target: "#turn.finalizing",
                actions: "executionStopped",
              },
              {
                guard: "canRecoverOverflow",
                target: "compacting",
                actions: assign({
                  compactMode: "overflow" as CompactionMode,
                  overflowRecoveries: ({ context }) => context.overflowRecoveries + 1,
                }),
              },
              {
                guard: "canRetry",
                target: "waiting",
                actions: [
                  assign({
                    retryDelayMs: ({ event }) => {
                      assertEvent(event, "attempt.failed");
                      return event.retry!.delayMs;
                    },
                  }),
                  {
                    type: "retryScheduled",
                    params: ({ context, event }) => ({
                      delayMs: (event as { retry: { delayMs: number } }).retry.delayMs,
                      attempt: context.attemptSeq,
                    }),
                  },
                ],
              },
              { target: "#turn.finalizing", actions: "failWithReason" },
            ],
          },
        },
        // A natural end: steering that arrived meanwhile continues the turn; otherwise it ends.
        ending: {
          entry: "pollAtEnd",
          on: {
            "end.steered": decideNext(),
            "end.none": { target: "#turn.finalizing", actions: "completeNaturally" },
          },
        },
        // A retry wait: leaving this state (interrupt, deadline) cancels the timer.
        waiting: {
          after: { retryDelay: "sampling" },
        },
        // Permission gate: a decline without feedback ends the turn (invariant 12).
        gating: {
          entry: ["rejectInvalid", "checkPermissions"],
          on: {
            "gate.allowed": [
              {
                guard: "noneAllowed",
                target: "committing",
                actions: [{ type: "correctCalls", params: correctedOf }, ...observe(observedOf)],
              },
              {
                target: "executing",
                actions: [
                  { type: "correctCalls", params: correctedOf },
                  ...observe(observedOf),
                  assign(({ event }) => {
                    assertEvent(event, "gate.allowed");
                    return { calls: event.calls };
                  }),
                ],
              },
            ],
            // Only here: a decision that arrives after the turn left the gate changes nothing.
            "gate.declined": {
              target: "#turn.finalizing",
              actions: [
                {
                  type: "declineCalls",
                  params: ({ event }) => ({ reason: (event as { reason: string }).reason }),
                },
                assign(({ event }) => {
                  assertEvent(event, "gate.declined");
                  return { status: "cancelled" as TurnStatus, reason: event.reason };
                }),
              ],
            },
          },
        },
        // Length-truncated response: no call of it ever executes (invariant 3).
        refusing: {
          entry: "refuseCalls",
          always: "committing",
        },
        executing: {
          entry: [
            "rejectInvalid",
            sendTo("batch", ({ context }) => ({ type: "batch.run", calls: context.calls })),
          ],
          on: {
            // The round is over: every call of the message has its one result.
            "batch.done": [
              {
                guard: "cancelRequested",
                target: "#turn.finalizing",
                actions: "executionStopped",
              },
              // The usual step: the loop guard has nothing to fold (see `loopUnchanged`), so the
              // results commit on the way out, in one microstep, as `committing` would.
              {
                guard: and(["budgetExhausted", "loopUnchanged"]),
                target: "#turn.finalizing",
                actions: ["commitBatch", "exhaustBudget"],
              },
              {
                guard: "loopUnchanged",
                target: "#turn.running.sampling.preparing",
                actions: "commitBatch",
              },
              { target: "committing", actions: observe(resultsOf) },
            ],
          },
          initial: "running",
          states: {
            running: {
              on: {
                "turn.interrupt": {
                  target: "stopping",
                  actions: [
                    "markCancelled",
                    {
                      type: "cancelAcknowledged",
                      params: ({ event }) => ({ reason: event.reason }),
                    },
                    sendTo("batch", ({ event }) => ({
                      type: "batch.cancel",
                      reason: event.reason,
                    })),
                  ],
                },
              },
            },
            // Every call is being cancelled; the batch ends once each has settled or gone unknown.
            stopping: { on: { "turn.interrupt": {} } },
          },
        },
        // The step's results are all in: write them (the model's next request answers them),
        // then stop on a loop or a spent budget, or go on. Transient: durability is waited for
        // where it is needed, before the next request (`sampling.preparing` / `recording`, and
        // a compaction's summary request) and before the turn's end is reported
        // (`finalizing`), so a step makes one flush, not two, and a refused write still stops
        // the turn before any request (invariants 13, 15).
        committing: {
          entry: "commitBatch",
          always: [endOnLoop, ...decideNext()],
        },
      },
    },
    // Bounded and not cancellable: no `turn.interrupt` handler here.
    finalizing: {
      entry: {
        type: "finalize",
        params: ({ context }) => ({
          status: context.status,
          reason: context.reason,
          cancelled: context.cancelRequested,
          code: context.code,
          budget: context.status === "budget_exhausted" ? context.budget : undefined,
        }),
      },
      on: {
        "finalize.done": [
          { guard: "finalizeFailed", target: "done", actions: "failUnwritten" },
          { target: "done" },
        ],
      },
      after: {
        // The store did not answer in time: the turn's end is not known to be in the log, so
        // the turn does not say it completed (invariant 15).
        finalizeDeadline: {
          target: "done",
          actions: assign({
            status: "failed" as TurnStatus,
            code: "STORE_FAILED" as TurnFailureCode,
            reason: ({ context }) =>
              `${context.reason ? `${context.reason}; ` : ""}finalizer deadline (finalizeDeadlineMs ${context.settings.finalizeDeadlineMs}) passed before the session store confirmed the turn's end; it may not be in the log`,
          }),
        },
      },
    },
    done: {
      type: "final",
      entry: { type: "ended", params: ({ context }) => outputOf(context) },
    },
  },
  output: ({ context }) => outputOf(context),
});
