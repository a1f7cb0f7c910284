import { type AnyActorRef, assertEvent, assign, setup } from "xstate";
import type { CallOutcome } from "../contracts/status.ts";
import { notExecuted, type ToolFailure, type ToolResult } from "../contracts/tool-result.ts";
import { effect } from "./effect.ts";

/** What the caller knows about one call when it is created. */
export interface ToolCallInput {
  callId: string;
  /** The registered tool name. */
  name: string;
  /** Whether the tool honours its AbortSignal; only cancellable calls get `abort`. */
  cancellable: boolean;
  /** How long a cancelled call may keep running before its outcome is declared unknown. */
  stopDeadlineMs: number;
}

/** The one result a call ends with (the actor's output). */
export interface ToolCallOutput {
  callId: string;
  outcome: CallOutcome;
  result: ToolResult;
}

/**
 * Events of one tool call. `callId` is optional so the batch can forward its own events
 * (which carry the id) unchanged; the call itself ignores it.
 */
export type ToolCallEvent =
  | { type: "call.recorded"; callId?: string }
  | { type: "call.complete"; callId?: string; result: ToolResult }
  | { type: "call.fail"; callId?: string; result: ToolResult }
  | { type: "call.cancel"; callId?: string; reason?: string }
  | { type: "call.aborted"; callId?: string };

export interface ToolCallContext extends ToolCallInput {
  /** Set exactly once, on the transition into `settled` or `unknown`. */
  outcome?: CallOutcome;
  result?: ToolResult;
}

/** Synthetic result of a call cancelled before its tool ran. */
export const cancelledBeforeStart: ToolFailure = notExecuted("CANCELLED", "cancelled before start");

/** Synthetic result of a call whose tool honoured the abort. */
export const cancelledWhileRunning: ToolFailure = {
  ok: false,
  code: "CANCELLED",
  message: "cancelled while running",
  retryable: false,
};

/** Synthetic result of a call that did not stop within its deadline after a cancel. */
export function outcomeUnknown(stopDeadlineMs: number): ToolFailure {
  return {
    ok: false,
    code: "OUTCOME_UNKNOWN",
    message:
      `the tool did not stop within ${stopDeadlineMs} ms of being cancelled; its effects are ` +
      "unknown (it may have finished, partly run, or still be running). Check the current " +
      "state before retrying.",
    retryable: false,
  };
}

/** Params of the effect actions; every action receives the call it is about. */
export interface CallRef {
  callId: string;
  name: string;
}

/**
 * The effects the tool-call chart names (declared with `effect()`), implemented by the runtime
 * (`actors/turn-runner.ts`) and bound by `actors/charts.ts`. `self` is the call's own actor:
 * answers go to it.
 */
export interface ToolCallEffects {
  /**
   * Write the `call_started` entry, make it durable, then send `call.recorded` to `self`.
   * Contract: must not throw.
   */
  recordStart(self: AnyActorRef, call: CallRef): void;
  /**
   * Run the tool with an AbortSignal and send `self` exactly one of `call.complete {result}`,
   * `call.fail {result}`, `call.aborted`. Contract: must not throw.
   */
  execute(self: AnyActorRef, call: CallRef): void;
  /** Signal the call's AbortSignal. Only run for cancellable tools. Contract: must not throw. */
  abort(self: AnyActorRef, call: CallRef): void;
  /** The call was asked to stop and has not settled yet (tell observers). Must not throw. */
  stopping(self: AnyActorRef, call: CallRef): void;
}

/** The call an effect is about. */
const refOf = ({ context }: { context: ToolCallContext }): CallRef => ({
  callId: context.callId,
  name: context.name,
});

/**
 * One tool call: `recording → started → (stopping) → settled | unknown`.
 *
 * This machine is what runs: the runtime hosts it through `actors/charts.ts` with its effects
 * bound (`toolCallMachine.provide`), and the model tests, paths tests, mutants and the
 * inspector's chart use the same definition.
 *
 * An actor is created when its call starts: a call waiting for its turn (a queued call) is
 * a `pending` call in the batch's context, with no actor (the batch settles it "not executed"
 * on a cancel). Creating actors only for calls that start saves an actor per cancelled call and
 * a microstep per started one.
 *
 * Effects are named actions, declared here as no-ops; {@link ToolCallEffects} is their contract
 * (`recordStart`, `execute`, `abort`, `stopping`).
 *
 * Invariants 1 and 2 of docs/architecture.md:
 * - write-ahead is structural: `execute` is only the entry action of `started`, and
 *   `started` is only reachable through `call.recorded` after `recordStart` ran;
 * - `settled` and `unknown` are final: the outcome and result are assigned once, on the
 *   transition into them, and a late `call.complete` / `call.cancel` changes nothing;
 * - in `stopping`, a real result that arrives before the deadline wins over the cancel.
 *
 * Completion order is reported by the batch (`callSettled`), not by this machine: the batch
 * also settles calls that never got a tool-call actor (cancelled before they started).
 */
export const toolCallMachine = setup({
  types: {
    context: {} as ToolCallContext,
    events: {} as ToolCallEvent,
    input: {} as ToolCallInput,
    output: {} as ToolCallOutput,
  },
  actions: {
    recordStart: effect<CallRef>(),
    execute: effect<CallRef>(),
    abort: effect<CallRef>(),
    stopping: effect<CallRef>(),
    settleNotExecuted: assign({ outcome: "not_executed", result: cancelledBeforeStart }),
    settleCompleted: assign(({ event }) => {
      assertEvent(event, "call.complete");
      return { outcome: "completed" as const, result: event.result };
    }),
    settleFailed: assign(({ event }) => {
      assertEvent(event, "call.fail");
      return { outcome: "failed" as const, result: event.result };
    }),
    settleCancelled: assign({ outcome: "cancelled", result: cancelledWhileRunning }),
    settleUnknown: assign(({ context }) => ({
      outcome: "unknown" as const,
      result: outcomeUnknown(context.stopDeadlineMs),
    })),
  },
  guards: {
    isCancellable: ({ context }) => context.cancellable,
  },
  delays: {
    stopDeadline: ({ context }) => context.stopDeadlineMs,
  },
}).createMachine({
  id: "toolCall",
  context: ({ input }) => ({ ...input }),
  initial: "recording",
  states: {
    recording: {
      entry: {
        type: "recordStart",
        params: refOf,
      },
      on: {
        "call.recorded": "started",
        // The start record may be durable, but the tool never ran.
        "call.cancel": { target: "settled", actions: "settleNotExecuted" },
      },
    },
    started: {
      entry: {
        type: "execute",
        params: refOf,
      },
      on: {
        "call.complete": { target: "settled", actions: "settleCompleted" },
        "call.fail": { target: "settled", actions: "settleFailed" },
        // A tool that does not honour its signal is not aborted: it gets the stop deadline.
        "call.cancel": [
          { guard: "isCancellable", target: "stopping", actions: { type: "abort", params: refOf } },
          { target: "stopping" },
        ],
      },
    },
    stopping: {
      entry: { type: "stopping", params: refOf },
      after: { stopDeadline: { target: "unknown", actions: "settleUnknown" } },
      on: {
        "call.complete": { target: "settled", actions: "settleCompleted" },
        "call.fail": { target: "settled", actions: "settleFailed" },
        "call.aborted": { target: "settled", actions: "settleCancelled" },
      },
    },
    // Final: outcome and result were assigned on the way in and can never change.
    settled: { type: "final" },
    // Final: the tool may still be running; the outcome is never invented or replaced.
    unknown: { type: "final" },
  },
  output: ({ context }) => ({
    callId: context.callId,
    outcome: context.outcome!,
    result: context.result!,
  }),
});

/** The actor logic type of a tool call (also of `toolCallMachine.provide(...)`). */
export type ToolCallMachine = typeof toolCallMachine;
