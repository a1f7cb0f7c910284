import { describe, expect, it } from "vitest";
import { type AnyStateMachine, initialTransition, transition } from "xstate";
import { turnMachine } from "../machines/turn.machine.ts";
import {
  acceptsStaleAttemptsTurnMachine,
  ignoresLengthTurnMachine,
  rearmsFinalizerTurnMachine,
} from "./support/mutants/turn.mutants.ts";
import { noTimers, stepTimers, type Timers, timerKey } from "./support/timers.ts";

// biome-ignore lint/suspicious/noExplicitAny: snapshots of real and mutant machines alike
type Snap = any;

const input = {
  turnId: "t",
  limits: { maxSteps: 3, maxTokens: 0, deadlineMs: 1000 },
  maxParallelToolCalls: 8,
  stopDeadlineMs: 100,
  finalizeDeadlineMs: 100,
};
const spec = {
  callId: "c",
  name: "tool",
  concurrencySafe: true,
  cancellable: true,
  executionMode: "parallel" as const,
};

/** Every event the turn can receive at `snap`: runner answers (current and stale), timers, interrupts. */
function events(snap: Snap): Snap[] {
  const a = snap.context.attemptSeq;
  const done = (
    attempt: number,
    finishReason: string,
    callCount: number,
    needsPermission = false,
  ) => ({
    type: "attempt.done",
    attempt,
    finishReason,
    callCount,
    calls: callCount > 0 ? [spec] : [],
    tokens: 10,
    needsPermission,
  });
  return [
    done(a, "length", 1),
    done(a, "tool_calls", 1),
    done(a, "tool_calls", 1, true),
    done(a, "length", 1, true),
    { type: "gate.allowed", calls: [spec] },
    { type: "gate.declined", reason: "declined" },
    done(a, "stop", 0),
    done(a - 1, "tool_calls", 1),
    { type: "attempt.failed", attempt: a, retry: { delayMs: 5 }, status: "failed", reason: "503" },
    { type: "attempt.failed", attempt: a, status: "failed", reason: "400" },
    { type: "end.none" },
    { type: "end.steered" },
    { type: "finalize.done" },
    { type: "turn.interrupt", reason: "stop" },
    { type: "batch.done" },
    { type: "xstate.after.retryDelay.turn.running.waiting" },
    { type: "xstate.after.finalizeDeadline.turn.finalizing" },
  ];
}

const key = (s: Snap) =>
  JSON.stringify([
    s.value,
    s.status,
    s.context.attemptSeq,
    s.context.step,
    s.context.cancelRequested,
  ]);

interface Found {
  trace: string[];
  problem: string;
}

/**
 * Bounded exhaustive search over every event sequence up to `depth` through `transition()`.
 * Checks, after every step: a length-truncated response never leads to `executing` (invariant 3),
 * a stale attempt's answer changes nothing, and a final turn stays final.
 */
function search(machine: AnyStateMachine, depth: number): Found | undefined {
  const [start, startActions] = initialTransition(machine, input);
  const timers0 = stepTimers(noTimers, "xstate.init", startActions, 0).timers;
  let frontier: { snap: Snap; trace: string[]; timers: Timers }[] = [
    { snap: start, trace: [], timers: timers0 },
  ];
  // The key holds each pending timer's remaining time: a deadline re-armed under the same id is
  // a different state from one left alone.
  const seen = new Set([`${key(start)}|${timerKey(timers0)}`]);
  for (let d = 0; d < depth; d++) {
    const next: typeof frontier = [];
    for (const { snap, trace, timers } of frontier) {
      for (const event of events(snap)) {
        const [after, actions] = transition(machine, snap, event);
        const t = [
          ...trace,
          `${event.type}${event.finishReason ? `(${event.finishReason}, attempt ${event.attempt})` : ""}`,
        ];
        const executing = JSON.stringify(after.value).includes("executing");
        const wasExecuting = JSON.stringify(snap.value).includes("executing");
        if (
          event.type === "attempt.done" &&
          event.finishReason === "length" &&
          executing &&
          !wasExecuting
        ) {
          return { trace: t, problem: "a length-truncated response reached executing" };
        }
        if (
          event.type === "attempt.done" &&
          event.attempt !== snap.context.attemptSeq &&
          key(after) !== key(snap)
        ) {
          return { trace: t, problem: "a stale attempt's answer changed the turn" };
        }
        if (event.type === "gate.declined" && JSON.stringify(snap.value).includes("gating")) {
          if (after.value !== "finalizing" || after.context.status !== "cancelled") {
            return { trace: t, problem: "a declined permission did not end the turn" };
          }
        }
        if (snap.status === "done" && after.status !== "done") {
          return { trace: t, problem: "a finished turn came back to life" };
        }
        if (
          executing &&
          !wasExecuting &&
          actions.some((x: { type: string }) => x.type === "refuseCalls")
        ) {
          return { trace: t, problem: "calls were refused and executed" };
        }
        const timed = stepTimers(timers, event.type, actions);
        const moved = timed.rearmed[0];
        if (moved) {
          return { trace: t, problem: `${moved.id} was re-armed: due ${moved.from} → ${moved.to}` };
        }
        const k = `${key(after)}|${timerKey(timed.timers)}`;
        if (seen.has(k)) continue;
        seen.add(k);
        next.push({ snap: after, trace: t, timers: timed.timers });
      }
    }
    frontier = next;
  }
  return undefined;
}

describe("turn statechart, bounded exhaustive search", () => {
  it("no call of a length-truncated response ever reaches executing, and stale attempts change nothing (depth 10)", () => {
    expect(search(turnMachine, 10)).toBeUndefined();
  });

  it("the search catches a turn whose length gate is broken", () => {
    const found = search(ignoresLengthTurnMachine, 10);
    expect(found?.problem).toBe("a length-truncated response reached executing");
  });

  it("the search catches a turn that takes a stale attempt's answer", () => {
    const found = search(acceptsStaleAttemptsTurnMachine, 10);
    expect(found?.problem).toBe("a stale attempt's answer changed the turn");
  });

  it("the search catches a finalizer whose deadline an interrupt re-arms (due times are in the key)", () => {
    const found = search(rearmsFinalizerTurnMachine, 10);
    expect(found?.problem).toMatch(/finalizeDeadline.*re-armed/);
  });

  it("an interrupt during a retry wait ends the turn without another attempt", () => {
    let [s] = initialTransition(turnMachine, input);
    [s] = transition(turnMachine, s, {
      type: "attempt.failed",
      attempt: 1,
      retry: { delayMs: 60_000 },
      status: "failed",
      reason: "429",
    });
    expect(s.matches({ running: "waiting" })).toBe(true);
    const [after, actions] = transition(turnMachine, s, { type: "turn.interrupt", reason: "stop" });
    expect(after.value).toBe("finalizing");
    expect(actions.map((a) => a.type)).not.toContain("startAttempt");
    expect(actions.map((a) => a.type)).toContain("xstate.cancel");
  });

  it("a batch that fails (a runtime bug) still ends the turn through finalizing, as failed", () => {
    let [s] = initialTransition(turnMachine, input);
    [s] = transition(turnMachine, s, {
      type: "attempt.done",
      attempt: 1,
      finishReason: "tool_calls",
      callCount: 1,
      calls: [spec],
      tokens: 1,
    });
    expect(s.matches({ running: "executing" })).toBe(true);
    const [after, actions] = transition(turnMachine, s, {
      type: "xstate.error.actor.batch",
      error: new Error("boom"),
    } as unknown as Parameters<typeof transition<typeof turnMachine>>[2]);
    expect(after.value).toBe("finalizing");
    expect(after.context.status).toBe("failed");
    expect(after.context.reason).toMatch(/internal error in the tool batch: Error: boom/);
    expect(actions.map((a) => a.type)).toContain("finalize");
  });
});
