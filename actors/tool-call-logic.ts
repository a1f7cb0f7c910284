import type { ActorLogic, ActorRef, AnyActorRef, EventObject, Snapshot } from "xstate";
import {
  type CallRef,
  cancelledBeforeStart,
  cancelledWhileRunning,
  outcomeUnknown,
  type ToolCallEvent,
  type ToolCallInput,
  type ToolCallOutput,
} from "../machines/tool-call.machine.ts";
import type { CallOutcome } from "../session/entries.ts";
import type { ToolResult } from "../tools/types.ts";
import { ChartSnapshot, endedSnapshot } from "./chart-snapshot.ts";

/** The states of the tool-call chart (`toolCallMachine`), as its snapshots name them. */
export type ToolCallState = "recording" | "started" | "stopping" | "settled" | "unknown";

/** What a tool-call actor's snapshot shows: the chart's state and context, like a machine's. */
export type ToolCallSnapshot = Snapshot<ToolCallOutput> &
  ChartSnapshot<ToolCallInput & { outcome?: CallOutcome; result?: ToolResult }, ToolCallOutput> & {
    value: ToolCallState;
  };

/** A call's actor has no children. */
const NO_CHILDREN: Record<string, AnyActorRef> = Object.freeze({});

type Self = ActorRef<ToolCallSnapshot, ToolCallEvent>;
type AnyActorSystem = AnyActorRef["system"];

/**
 * The chart's effects, the same three `toolCallMachine.provide({ actions })` names.
 * Contract (each): must not throw; a throw errors the call's actor, which its batch settles as
 * `unknown` (exactly as a throwing action does in the machine).
 */
export interface ToolCallEffects {
  /** Entry of `recording`: write `call_started`, make it durable, then send `call.recorded`. */
  recordStart: (self: Self, system: AnyActorSystem, call: CallRef) => void;
  /** Entry of `started`: run the tool; report `call.complete` / `call.fail` / `call.aborted`. */
  execute: (self: Self, system: AnyActorSystem, call: CallRef) => void;
  /** Entry of `stopping`, cancellable tools only: signal the call's AbortSignal. */
  abort: (self: Self, system: AnyActorSystem, call: CallRef) => void;
}

/** The machine's `after: { stopDeadline }` event in `stopping`, under the same name. */
const STOP_DEADLINE = "xstate.after.stopDeadline.toolCall.stopping";

/**
 * The tool-call statechart (`toolCallMachine`, machines/tool-call.machine.ts) as hand-compiled
 * actor logic: the runtime hosts every call with this, the model tests and the inspector's chart
 * use the machine. Same states, events, effects (in the same order), delayed stop deadline
 * (scheduled on the actor system's clock, so `SimulatedClock` drives it), output and snapshot
 * `value`; `test/tool-call-logic.model.test.ts` checks it against the machine on every event
 * sequence up to a bound, including the deadline firing at each point.
 *
 * Why: a call is the hot path (one actor per call, every step). XState's general interpreter
 * spends ≈ 17 µs per call on this five-state chart (a macrostep per event, snapshot copies);
 * this logic does the same in a switch (`npx tsx bench/extras/xstate-floor.ts`). The actor around it
 * is still an XState actor: a child of its batch with a slot id, its done event settles the
 * call, a throw becomes an error event, a stop cancels its deadline, inspection sees it.
 *
 * The lifecycle and invariants are the machine's: write-ahead (`execute` only on entry to
 * `started`, only reachable by `call.recorded`), one outcome assigned on the way into a final
 * state and never replaced, a real result before the deadline wins over the cancel.
 */
export function toolCallLogic(
  effects: ToolCallEffects,
): ActorLogic<ToolCallSnapshot, ToolCallEvent, ToolCallInput> & { id: string } {
  const snapshot = (
    value: ToolCallState,
    context: ToolCallSnapshot["context"],
    output?: ToolCallOutput,
  ): ToolCallSnapshot =>
    new ChartSnapshot(
      output ? "done" : "active",
      output,
      undefined,
      value,
      context,
      NO_CHILDREN,
    ) as ToolCallSnapshot;

  const settle = (
    s: ToolCallSnapshot,
    value: "settled" | "unknown",
    outcome: CallOutcome,
    result: ToolResult,
  ): ToolCallSnapshot => {
    const c = s.context;
    const context = {
      callId: c.callId,
      name: c.name,
      cancellable: c.cancellable,
      stopDeadlineMs: c.stopDeadlineMs,
      outcome,
      result,
    };
    return snapshot(value, context, { callId: c.callId, outcome, result });
  };

  const ref = (s: ToolCallSnapshot): CallRef => ({
    callId: s.context.callId,
    name: s.context.name,
  });

  return {
    // The inspector names a call's actor by the callId in its input when its logic id says toolCall.
    id: "toolCall",
    getInitialSnapshot: (_scope, input) =>
      snapshot("recording", {
        callId: input.callId,
        name: input.name,
        cancellable: input.cancellable,
        stopDeadlineMs: input.stopDeadlineMs,
      }),
    // The initial state's entry action, run when the actor starts (as a machine's are).
    start: (s, scope) => {
      if (s.status === "active") effects.recordStart(scope.self, scope.system, ref(s));
    },
    transition: (s, event: ToolCallEvent | EventObject, scope) => {
      if (event.type === "xstate.stop") return endedSnapshot(s, "stopped", undefined, scope);
      if (s.status !== "active") return s;
      // An error event no transition takes errors the actor with it (as XState does for a
      // machine); this chart takes none.
      if (event.type.startsWith("xstate.error.actor")) {
        const error = (event as unknown as { error: unknown }).error;
        return endedSnapshot(s, "error", error, scope);
      }
      switch (s.value) {
        case "recording":
          if (event.type === "call.recorded") {
            const next = snapshot("started", s.context);
            effects.execute(scope.self, scope.system, ref(s));
            return next;
          }
          // The start record may be durable, but the tool never ran.
          if (event.type === "call.cancel") {
            return settle(s, "settled", "not_executed", cancelledBeforeStart);
          }
          return s;
        case "started":
          if (event.type === "call.complete") {
            return settle(s, "settled", "completed", (event as { result: ToolResult }).result);
          }
          if (event.type === "call.fail") {
            return settle(s, "settled", "failed", (event as { result: ToolResult }).result);
          }
          if (event.type === "call.cancel") {
            if (s.context.cancellable) effects.abort(scope.self, scope.system, ref(s));
            scope.system.scheduler.schedule(
              scope.self,
              scope.self,
              { type: STOP_DEADLINE },
              s.context.stopDeadlineMs,
              STOP_DEADLINE,
            );
            return snapshot("stopping", s.context);
          }
          return s;
        case "stopping":
          // Leaving `stopping` always ends the actor, which cancels the deadline (stop procedure).
          if (event.type === "call.complete") {
            return settle(s, "settled", "completed", (event as { result: ToolResult }).result);
          }
          if (event.type === "call.fail") {
            return settle(s, "settled", "failed", (event as { result: ToolResult }).result);
          }
          if (event.type === "call.aborted") {
            return settle(s, "settled", "cancelled", cancelledWhileRunning);
          }
          if (event.type === STOP_DEADLINE) {
            return settle(s, "unknown", "unknown", outcomeUnknown(s.context.stopDeadlineMs));
          }
          return s;
        default:
          return s;
      }
    },
    getPersistedSnapshot: (s) => s,
  };
}
