import { describe, expect, it } from "vitest";
import { type AnyStateMachine, initialTransition, transition } from "xstate";
import { turnMachine } from "../machines/turn.machine.ts";
import {
  acceptsStaleAttemptsTurnMachine,
  compactsMidBatchTurnMachine,
  ignoresLengthTurnMachine,
  ignoresLoopsTurnMachine,
  ignoresRefusedFinalizeTurnMachine,
  rearmsFinalizerTurnMachine,
  sendsBeforeRecordedTurnMachine,
} from "./support/mutants/turn.mutants.ts";
import { noTimers, stepTimers, type Timers, timerKey } from "./support/timers.ts";

// biome-ignore lint/suspicious/noExplicitAny: snapshots of real and mutant machines alike
type Snap = any;

const input = {
  turnId: "t",
  limits: { maxSteps: 3, maxSpendTokens: 0, deadlineMs: 1000 },
  maxParallelToolCalls: 8,
  stopDeadlineMs: 100,
  finalizeDeadlineMs: 100,
  loopFailAfter: 3,
  loopRepeats: 2,
  maxOverflowRecoveries: 1,
};
const spec = {
  callId: "c",
  name: "tool",
  concurrencySafe: true,
  cancellable: true,
  executionMode: "parallel" as const,
};

/** A result as the loop guard reads it: the same call failing the same way each time. */
const same = { callId: "c", tool: "tool", signature: "the same failure" };

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
    { type: "attempt.failed", attempt: a, status: "failed", reason: "overflow", overflow: true },
    { type: "compact.due" },
    { type: "compaction.done", ok: true },
    { type: "compaction.done", ok: false, reason: "NOTHING_TO_COMPACT" },
    { type: "end.none" },
    { type: "end.steered" },
    { type: "finalize.done" },
    { type: "finalize.done", failure: { code: "STORE_FAILED", reason: "disk full" } },
    { type: "attempt.recorded", attempt: a },
    { type: "attempt.recorded", attempt: a - 1 },
    { type: "turn.interrupt", reason: "stop" },
    { type: "turn.interrupt", reason: "fenced", status: "failed", code: "LEASE_LOST" },
    { type: "batch.done" },
    { type: "batch.done", results: [same] },
    { type: "batch.done", results: [same, same, same] },
    // A message whose only call failed preparation, the same way as before.
    { ...done(a, "tool_calls", 1), calls: [], invalid: [same] },
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
    s.context.overflowRecoveries,
    Math.min(s.context.loop.count, input.loopFailAfter), // decides a transition: in the key
  ]);

interface Found {
  trace: string[];
  problem: string;
}

/**
 * Bounded exhaustive search over every event sequence up to `depth` through `transition()`.
 * Checks, after every step: a length-truncated response never leads to `executing` (invariant 3 of docs/architecture.md),
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
        // The loop guard's streak is the chart's: once the written results of a step make a
        // streak of failAfter, the turn ends loop_detected there, and never on a shorter one.
        const looped =
          actions.some((x: { type: string }) => x.type === "commitBatch") &&
          !after.context.cancelRequested &&
          after.context.loop.count >= input.loopFailAfter;
        if (looped) {
          if (after.value !== "finalizing" || after.context.status !== "failed") {
            return { trace: t, problem: "a detected loop did not end the turn" };
          }
          if (!String(after.context.reason).startsWith("loop_detected")) {
            return {
              trace: t,
              problem: `a loop ended the turn with reason ${after.context.reason}`,
            };
          }
        }
        if (
          after.context.loop.count < input.loopFailAfter &&
          !String(snap.context.reason).startsWith("loop_detected") &&
          String(after.context.reason).startsWith("loop_detected")
        ) {
          return { trace: t, problem: "a streak below failAfter ended the turn as a loop" };
        }
        // Invariant 10 of docs/architecture.md, the chart's half: a compaction starts only between steps (no batch round
        // running, no attempt streaming), and a turn never finalizes while one runs.
        if (actions.some((x: { type: string }) => x.type === "compact")) {
          const from = JSON.stringify(snap.value);
          const to = JSON.stringify(after.value);
          if (!to.includes("compacting") || to.includes("executing")) {
            return { trace: t, problem: `a compaction started beside ${to}` };
          }
          if (
            !from.includes("preparing") &&
            !(from.includes("sampling") && event.type === "attempt.failed")
          ) {
            return { trace: t, problem: `a compaction started from ${from} on ${event.type}` };
          }
        }
        if (
          JSON.stringify(snap.value).includes("compacting") &&
          event.type !== "compaction.done" &&
          !JSON.stringify(after.value).includes("compacting")
        ) {
          return { trace: t, problem: "the turn left compacting before the compaction reported" };
        }
        if (
          event.type === "attempt.failed" &&
          event.overflow &&
          snap.context.overflowRecoveries >= input.maxOverflowRecoveries &&
          !JSON.stringify(snap.value).includes("compacting") &&
          JSON.stringify(after.value).includes("compacting")
        ) {
          return { trace: t, problem: "an overflow compacted past its budget" };
        }
        // Invariant 13: a request goes out only for the current attempt once its start is
        // durable, and never after the turn was stopped (a fenced write stops it).
        if (actions.some((x: { type: string }) => x.type === "startAttempt")) {
          const recorded =
            event.type === "attempt.recorded" &&
            event.attempt === snap.context.attemptSeq &&
            /recording|preparing/.test(JSON.stringify(snap.value));
          if (!recorded) {
            return { trace: t, problem: "a request went out before its attempt was recorded" };
          }
        }
        if (
          snap.context.cancelRequested &&
          actions.some((x: { type: string }) =>
            ["prepare", "recordAttempt", "startAttempt", "compact"].includes(x.type),
          )
        ) {
          return { trace: t, problem: "a stopped turn started more work" };
        }
        // Invariant 15, the chart's half: a turn whose end the store refused never ends as if
        // it had been written.
        if (event.type === "finalize.done" && event.failure && snap.value === "finalizing") {
          const { status, code } = after.output ?? {};
          if (status !== "failed" || code !== event.failure.code) {
            return { trace: t, problem: `a refused finalizer ended the turn ${status}` };
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
  it("no call of a length-truncated response ever reaches executing, stale attempts change nothing, a compaction starts only between steps and never outlives its state, and a detected loop always ends the turn (depth 10)", () => {
    expect(search(turnMachine, 10)?.trace.join(" → ")).toBeUndefined();
  }, 60_000);

  it("the search catches a turn that reports its planned end when the store refused it (invariant 15)", () => {
    const found = search(ignoresRefusedFinalizeTurnMachine, 10);
    // Whatever it planned (completed, cancelled, or failed for its own reason), not STORE_FAILED.
    expect(found?.problem).toMatch(
      /^a refused finalizer ended the turn (completed|cancelled|failed)$/,
    );
  });

  it("the search catches a turn that sends a request before its attempt is durable (invariant 13)", () => {
    const found = search(sendsBeforeRecordedTurnMachine, 10);
    expect(found?.problem).toBe("a request went out before its attempt was recorded");
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

  it("a step whose results make the same failure loopFailAfter times in a row ends the turn failed, loop_detected, without another attempt", () => {
    // The property above checks it at every step of the search; here, the path itself.
    let [s] = initialTransition(turnMachine, input);
    [s] = transition(turnMachine, s, {
      type: "attempt.done",
      attempt: 1,
      finishReason: "tool_calls",
      callCount: 1,
      calls: [spec],
      tokens: 1,
    });
    const [after, actions] = transition(turnMachine, s, {
      type: "batch.done",
      results: [same, same, same],
    });
    expect(actions.map((a) => a.type)).toContain("commitBatch");
    expect(after.value).toBe("finalizing");
    expect(after.context.status).toBe("failed");
    expect(after.context.reason).toMatch(/^loop_detected: tool failed the same way 3 times/);
    const types = actions.map((a) => a.type);
    expect(types).toContain("loopStopped");
    expect(types).not.toContain("recordAttempt");
    expect(types).not.toContain("startAttempt");
  });

  it("the search catches a turn that never ends on a detected loop", () => {
    const found = search(ignoresLoopsTurnMachine, 10);
    expect(found?.problem).toBe("a detected loop did not end the turn");
  });

  it("the search catches a turn that compacts while a batch round runs", () => {
    const found = search(compactsMidBatchTurnMachine, 10);
    expect(found?.problem).toMatch(/a compaction started beside .*executing/);
  });

  it("an overflow error compacts once (its own budget), then a second one fails the turn with its reason", () => {
    const overflow = (attempt: number) => ({
      type: "attempt.failed" as const,
      attempt,
      status: "failed" as const,
      reason: `overflow ${attempt}`,
      overflow: true,
    });
    let [s] = initialTransition(turnMachine, input);
    const [compacting, actions] = transition(turnMachine, s, overflow(1));
    expect(compacting.matches({ running: "compacting" })).toBe(true);
    expect(actions).toContainEqual(
      expect.objectContaining({ type: "compact", params: { mode: "overflow" } }),
    );
    [s] = transition(turnMachine, compacting, { type: "compaction.done", ok: true });
    expect(s.matches({ running: "sampling" })).toBe(true);
    const [failed] = transition(turnMachine, s, overflow(2));
    expect(failed.value).toBe("finalizing");
    expect(failed.context).toMatchObject({ status: "failed", reason: "overflow 2" });
    // A failed overflow compaction fails the turn with the compaction's reason.
    const [noCut] = transition(turnMachine, compacting, {
      type: "compaction.done",
      ok: false,
      reason: "nothing to cut",
    });
    expect(noCut.value).toBe("finalizing");
    expect(noCut.context).toMatchObject({ status: "failed", reason: "nothing to cut" });
  });

  it("an interrupt during a compaction waits for it to report, then ends the turn cancelled", () => {
    let [s] = initialTransition(turnMachine, input);
    [s] = transition(turnMachine, s, { type: "compact.due" });
    expect(s.matches({ running: "compacting" })).toBe(true);
    const [stopping, actions] = transition(turnMachine, s, {
      type: "turn.interrupt",
      reason: "stop",
    });
    expect(stopping.matches({ running: { compacting: "stopping" } })).toBe(true);
    expect(actions.map((a) => a.type)).toEqual(["cancelAcknowledged", "abortCompaction"]);
    const [after] = transition(turnMachine, stopping, { type: "compaction.done", ok: false });
    expect(after.value).toBe("finalizing");
    expect(after.context.status).toBe("cancelled");
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
