import { describe, expect, it } from "vitest";
import { type AnyStateMachine, initialTransition, transition } from "xstate";
import type { ToolResult } from "../contracts/tool-result.ts";
import { type ToolCallEvent, toolCallMachine } from "../machines/tool-call.machine.ts";
import {
  noWriteAheadToolCallMachine,
  overwritableToolCallMachine,
  rearmingStopToolCallMachine,
} from "./support/mutants/tool-call.mutants.ts";
import { noTimers, stepTimers, type Timers, timerKey } from "./support/timers.ts";

const okResult: ToolResult = { ok: true, content: "done" };
const failResult: ToolResult = {
  ok: false,
  code: "EXECUTION_FAILED",
  message: "boom",
  retryable: false,
};
const deadline = { type: "xstate.after.stopDeadline.toolCall.stopping" };

/** Every event a call can receive, including the stop-deadline timer. */
const allEvents: (ToolCallEvent | typeof deadline)[] = [
  { type: "call.recorded" },
  { type: "call.complete", result: okResult },
  { type: "call.fail", result: failResult },
  { type: "call.cancel" },
  { type: "call.aborted" },
  deadline,
];

/** What the invariants need to know about the path so far (a sufficient summary). */
interface Trace {
  recordStarted: boolean;
  recordAcked: boolean;
  executed: boolean;
  aborted: boolean;
  outcome?: string;
  result?: string;
  /** Logical time of the first cancel that reached a started call. */
  cancelledAt?: number;
}

interface Counterexample {
  path: string[];
  problem: string;
}

// biome-ignore lint/suspicious/noExplicitAny: the search runs real and mutant charts alike
type Snap = any;

/** Checks one step; returns a problem sentence or undefined. Updates `t` in place. */
function check(
  t: Trace,
  event: { type: string },
  snap: Snap,
  actions: { type: string }[],
  cancellable: boolean,
) {
  if (event.type === "call.recorded" && t.recordStarted) t.recordAcked = true;
  for (const a of actions) {
    if (a.type === "recordStart") {
      if (t.recordStarted) return "recordStart ran twice";
      t.recordStarted = true;
    }
    if (a.type === "execute") {
      if (!t.recordAcked) return "execute ran before the start record was durable (write-ahead)";
      if (t.executed) return "execute ran twice";
      t.executed = true;
    }
    if (a.type === "abort") {
      if (!cancellable) return "abort signalled to a non-cancellable tool";
      if (!t.executed || t.aborted) return "abort without a single running execution";
      t.aborted = true;
    }
  }
  const { outcome, result } = snap.context;
  if (t.outcome !== undefined) {
    if (outcome !== t.outcome || JSON.stringify(result) !== t.result) {
      return `settled outcome ${t.outcome} changed to ${outcome}`;
    }
  } else if (outcome !== undefined) {
    t.outcome = outcome;
    t.result = JSON.stringify(result);
  }
  const inFinalState = snap.matches("settled") || snap.matches("unknown");
  if (inFinalState !== (snap.status === "done")) return `state ${snap.value} is not final`;
  if ((outcome !== undefined) !== inFinalState) return "an outcome exists outside a final state";
  if (snap.status === "done") {
    const out = snap.output;
    if (!out?.outcome || !out.result) return "final without exactly one result";
    const ran = ["completed", "failed", "cancelled", "unknown"].includes(out.outcome);
    if (ran !== t.executed) return `outcome ${out.outcome} but executed=${t.executed}`;
    if (out.outcome === "completed" && !out.result.ok) return "completed with a failed result";
  }
  return undefined;
}

const STOP_DEADLINE_MS = 1000;

/**
 * The stop deadline is armed once: it fires no later than STOP_DEADLINE_MS after the first cancel
 * of a started call, however many cancels follow (each event of the search takes 100 ms).
 */
function checkTimers(
  t: Trace,
  before: Timers,
  event: { type: string },
  snap: Snap,
  actions: { type: string; params?: unknown }[],
): { problem?: string; timers: Timers } {
  const { timers, rearmed } = stepTimers(before, event.type, actions);
  if (rearmed.length > 0) {
    const r = rearmed[0];
    return { timers, problem: `the stop deadline was re-armed: due ${r.from} → ${r.to}` };
  }
  if (t.cancelledAt === undefined && snap.matches("stopping")) t.cancelledAt = timers.now;
  const fired = event.type in before.due;
  if (fired && snap.matches("unknown") && t.cancelledAt !== undefined) {
    const late = timers.now - t.cancelledAt;
    if (late > STOP_DEADLINE_MS)
      return { timers, problem: `unknown declared ${late} ms after the first cancel` };
  }
  return { timers };
}

/**
 * Bounded exhaustive search over all event sequences up to `depth`, deduplicated by a key that
 * holds the chart's state, the trace and each pending timer's remaining time.
 */
function search(machine: AnyStateMachine, cancellable: boolean, depth: number) {
  const input = { callId: "c1", name: "write", cancellable, stopDeadlineMs: STOP_DEADLINE_MS };
  const [initial, initialActions] = initialTransition(machine, input);
  const seen = new Set<string>();
  const reached = new Set<string>();
  const visit = (
    snap: Snap,
    t: Trace,
    timers: Timers,
    path: string[],
  ): Counterexample | undefined => {
    const cancelAge = t.cancelledAt === undefined ? null : timers.now - t.cancelledAt;
    const key = JSON.stringify([snap.value, snap.context, { ...t, cancelledAt: cancelAge }]);
    const full = `${path.length}:${key}:${timerKey(timers)}`;
    if (seen.has(full) || path.length === depth) return undefined;
    seen.add(full);
    for (const event of allEvents) {
      const [next, actions] = transition(machine, snap, event as never);
      reached.add(JSON.stringify(next.value));
      const t2 = { ...t };
      const p = [...path, event.type];
      const problem = check(t2, event, next, actions, cancellable);
      if (problem) return { path: p, problem };
      const timed = checkTimers(t2, timers, event, next, actions);
      if (timed.problem) return { path: p, problem: timed.problem };
      const found = visit(next, t2, timed.timers, p);
      if (found) return found;
    }
    return undefined;
  };
  const t0: Trace = { recordStarted: false, recordAcked: false, executed: false, aborted: false };
  // The actor is created when its call starts: its entry actions are checked like any step's.
  const problem = check(t0, { type: "xstate.init" }, initial, initialActions, cancellable);
  if (problem) return { counterexample: { path: ["xstate.init"], problem }, reached };
  reached.add(JSON.stringify(initial.value));
  const timers0 = stepTimers(noTimers, "xstate.init", initialActions, 0).timers;
  return { counterexample: visit(initial, t0, timers0, []), reached };
}

describe("tool call: bounded exhaustive search over every event order (depth 8)", () => {
  for (const cancellable of [true, false]) {
    it(`a settled outcome never changes, execute only follows a durable start record, and every final path has exactly one result (cancellable=${cancellable})`, () => {
      const { counterexample, reached } = search(toolCallMachine, cancellable, 8);
      expect(counterexample).toBeUndefined();
      expect(reached.size).toBe(5);
    });
  }

  it("a late cancel never replaces a completed result (explicit path)", () => {
    const input = { callId: "c1", name: "write", cancellable: true, stopDeadlineMs: 1000 };
    let [snap] = initialTransition(toolCallMachine, input);
    for (const e of allEvents.slice(0, 2)) [snap] = transition(toolCallMachine, snap, e as never);
    [snap] = transition(toolCallMachine, snap, { type: "call.cancel" });
    expect(snap.output).toEqual({ callId: "c1", outcome: "completed", result: okResult });
  });

  it("the search finds the overwrite in a mutant whose settled state is not final", () => {
    const { counterexample } = search(overwritableToolCallMachine, true, 8);
    expect(counterexample?.problem).toMatch(/changed to cancelled|not final/);
  });

  it("the search finds a stop deadline that a repeated cancel re-arms (its due time is in the state key)", () => {
    const { counterexample } = search(rearmingStopToolCallMachine, true, 8);
    expect(counterexample?.problem).toMatch(/re-armed|after the first cancel/);
  });

  it("the search finds execute-before-record in a mutant that does not wait for the start record", () => {
    const { counterexample } = search(noWriteAheadToolCallMachine, true, 8);
    expect(counterexample?.problem).toMatch(/write-ahead/);
  });
});
