import { describe, expect, it } from "vitest";
import { type AnyMachineSnapshot, initialTransition, transition } from "xstate";
import { turnMachine } from "../machines/turn.machine.ts";
import type { TurnEvent, TurnInput } from "../machines/turn.types.ts";

// The turn chart's transitions stated on the chart itself, through XState's pure
// `initialTransition()`/`transition()`: which state each event leads to, what the context says
// after it, and which effects (with their params) the runtime is asked to perform, in order.
// The e2e tests state the same behaviour through a whole agent; the mutation run leaves them out
// for speed, so these are the tests that kill the chart's mutants.

type Snapshot = AnyMachineSnapshot;
interface Action {
  type: string;
  params?: unknown;
}

const spec = (callId: string, name = "tool") => ({
  callId,
  name,
  concurrencySafe: true,
  cancellable: true,
  executionMode: "parallel" as const,
});

const baseInput: TurnInput = {
  turnId: "t",
  limits: { maxSteps: 10, maxSpendTokens: 0, deadlineMs: 0 },
  maxParallelToolCalls: 8,
  stopDeadlineMs: 100,
  finalizeDeadlineMs: 200,
  loopFailAfter: 3,
  loopRepeats: 2,
  maxOverflowRecoveries: 1,
};

/**
 * The actions of a transition in a readable form: effects by name (with params when they have
 * any); XState's own actions as `raise`/`cancel`/`sendTo`. Spawning and stopping the batch
 * child is left out.
 */
function fx(actions: readonly Action[]): unknown[] {
  const out: unknown[] = [];
  for (const a of actions) {
    const p = a.params as Record<string, unknown> | undefined;
    if (a.type === "xstate.raise") out.push({ raise: p?.event, delay: p?.delay });
    else if (a.type === "xstate.cancel") out.push({ cancel: p?.sendId });
    else if (a.type === "xstate.sendTo") out.push({ sendTo: p?.event });
    else if (a.type.startsWith("xstate.")) continue;
    else out.push(p === undefined ? a.type : { [a.type]: p });
  }
  return out;
}

class Turn {
  s: Snapshot;
  /** The actions of the last transition. */
  acts: Action[];

  constructor(input: Partial<TurnInput> = {}) {
    const [s, acts] = initialTransition(turnMachine, { ...baseInput, ...input });
    this.s = s;
    this.acts = acts as Action[];
  }

  send(event: TurnEvent): this {
    const [s, acts] = transition(turnMachine, this.s as never, event);
    this.s = s;
    this.acts = acts as Action[];
    return this;
  }

  /** Fires the delayed event the last transition scheduled under an id containing `name`. */
  fire(name: string): this {
    const raise = this.acts.find(
      (a) => a.type === "xstate.raise" && String((a.params as { id?: string }).id).includes(name),
    );
    if (!raise) throw new Error(`no delayed event ${name} was scheduled`);
    return this.send((raise.params as { event: TurnEvent }).event);
  }

  get fx() {
    return fx(this.acts);
  }
  get value() {
    return this.s.value;
  }
  get ctx() {
    return this.s.context as {
      step: number;
      tokens: number;
      attemptSeq: number;
      status: string;
      reason: string | undefined;
      cancelRequested: boolean;
      calls: unknown[];
      loop: { count: number; tool?: string; signature?: string };
      overflowRecoveries: number;
      retryDelayMs: number;
    };
  }

  /** No compaction due: `prepare` recorded the attempt, and its start is durable. */
  sample(): this {
    return this.record();
  }

  /** The current attempt's start is durable: its request may go out. */
  record(): this {
    return this.send({ type: "attempt.recorded", attempt: this.ctx.attemptSeq });
  }

  done(over: Partial<Extract<TurnEvent, { type: "attempt.done" }>> = {}): this {
    return this.send({
      type: "attempt.done",
      attempt: this.ctx.attemptSeq,
      finishReason: "tool_calls",
      callCount: 1,
      calls: [spec("c1")],
      tokens: 10,
      needsPermission: false,
      ...over,
    });
  }

  failed(over: Partial<Extract<TurnEvent, { type: "attempt.failed" }>> = {}): this {
    return this.send({
      type: "attempt.failed",
      attempt: this.ctx.attemptSeq,
      status: "failed",
      reason: "provider said no",
      ...over,
    });
  }
}

/** A result as the loop guard reads it: a failure of call `callId` with `signature`. */
const fail = (callId: string, signature = "same", tool = "grep") => ({ callId, tool, signature });
const ok = (callId: string) => ({ callId, tool: "grep" });
/** The loop guard's effect for results that made no long streak (it runs wherever results fold). */
const W0 = { loopWarned: { warnings: [] } };
/** Where a new step waits: steering drained, the context measured and its attempt recorded. */
const PREPARING = { running: { sampling: "preparing" } };
/** The effect that prepares step `step` as attempt `attempt`. */
const P = (attempt: number, step: number) => ({ prepare: { attempt, step } });

const interrupt = (reason: string, status?: "budget_exhausted"): TurnEvent =>
  status ? { type: "turn.interrupt", reason, status } : { type: "turn.interrupt", reason };

const finalizeFx = (status: string, reason: string | undefined, cancelled: boolean) => ({
  finalize: { status, reason, cancelled },
});
const finalizeTimer = {
  raise: { type: "xstate.after.finalizeDeadline.turn.finalizing" },
  delay: 200,
};
/** The effects of a transition from `running` to `finalizing`, around the transition's own. */
const leaving = (...own: unknown[]) => [{ cancel: "turnDeadline" }, ...own, finalizeTimer];

describe("turn chart: the start and the deadline", () => {
  it("starts preparing; with no deadline no timer is armed", () => {
    const t = new Turn();
    expect(t.value).toEqual(PREPARING);
    expect(t.fx).toEqual([P(1, 0)]);
    expect(t.ctx).toMatchObject({ step: 0, attemptSeq: 1, tokens: 0, status: "completed" });
  });

  it("a deadline arms one timer that interrupts the turn budget_exhausted", () => {
    const t = new Turn({ limits: { maxSteps: 10, maxSpendTokens: 0, deadlineMs: 500 } });
    expect(t.fx).toEqual([
      {
        raise: {
          type: "turn.interrupt",
          reason: "turn deadline reached",
          status: "budget_exhausted",
          budget: { scope: "turn", kind: "time", limit: 500, spent: 500, defaulted: false },
        },
        delay: 500,
      },
      P(1, 0),
    ]);
    t.sample();
    expect(t.fx).toEqual([{ startAttempt: { attempt: 1, step: 0 } }]);
    // The deadline is an interrupt with a status: the attempt is aborted like a cancel.
    t.send(interrupt("turn deadline reached", "budget_exhausted"));
    expect(t.value).toEqual({ running: { sampling: "stopping" } });
    expect(t.ctx).toMatchObject({
      cancelRequested: true,
      status: "budget_exhausted",
      reason: "turn deadline reached",
    });
    t.failed();
    expect(t.value).toBe("finalizing");
    expect(t.fx).toEqual(
      leaving("executionStopped", finalizeFx("budget_exhausted", "turn deadline reached", true)),
    );
  });

  it("any way out of running cancels the deadline timer", () => {
    const t = new Turn({ limits: { maxSteps: 10, maxSpendTokens: 0, deadlineMs: 500 } });
    const armed = t.acts.find((a) => a.type === "xstate.raise")?.params as { id: string };
    expect(armed.id).toBe("turnDeadline"); // the id the cancel names
    t.sample().done({ callCount: 0, calls: [], finishReason: "stop" }).send({ type: "end.none" });
    expect(t.value).toBe("finalizing");
    expect(t.fx).toContainEqual({ cancel: "turnDeadline" });
  });
});

describe("turn chart: interrupts", () => {
  it("while preparing: the attempt being recorded is aborted; a compaction found due instead ends it at once", () => {
    const t = new Turn().send(interrupt("user pressed stop"));
    expect(t.value).toEqual({ running: { sampling: "stopping" } });
    expect(t.ctx).toMatchObject({
      cancelRequested: true,
      status: "cancelled",
      reason: "user pressed stop",
    });
    expect(t.fx).toEqual([
      { cancelAcknowledged: { reason: "user pressed stop" } },
      { abortAttempt: { attempt: 1 } },
    ]);
    // The aborted record reports as a failed attempt: the turn finalizes.
    t.failed({ status: "cancelled", reason: "interrupted" });
    expect(t.value).toBe("finalizing");
    expect(t.fx).toEqual(
      leaving("executionStopped", finalizeFx("cancelled", "user pressed stop", true)),
    );
    // `prepare` found a compaction due (nothing was written): that answer finalizes too.
    const c = new Turn().send(interrupt("stop")).send({ type: "compact.due" });
    expect(c.value).toBe("finalizing");
    expect(c.fx).toEqual(leaving("executionStopped", finalizeFx("cancelled", "stop", true)));
  });

  it("while streaming: the attempt is aborted and the turn waits for it to report", () => {
    const t = new Turn().sample().send(interrupt("stop"));
    expect(t.value).toEqual({ running: { sampling: "stopping" } });
    expect(t.fx).toEqual([
      { cancelAcknowledged: { reason: "stop" } },
      { abortAttempt: { attempt: 1 } },
    ]);
    // A second interrupt changes nothing: no second acknowledgement, the first reason stays.
    t.send(interrupt("again", "budget_exhausted"));
    expect(t.value).toEqual({ running: { sampling: "stopping" } });
    expect(t.fx).toEqual([]);
    expect(t.ctx).toMatchObject({ status: "cancelled", reason: "stop" });
    // A report of an older attempt is ignored.
    t.send({ type: "attempt.failed", attempt: 0, status: "failed", reason: "old" });
    expect(t.value).toEqual({ running: { sampling: "stopping" } });
    // The aborted attempt's failure ends the turn cancelled, not failed.
    t.failed({ retry: { delayMs: 5 } });
    expect(t.value).toBe("finalizing");
    expect(t.ctx).toMatchObject({ status: "cancelled", reason: "stop" });
    expect(t.fx).toEqual(leaving("executionStopped", finalizeFx("cancelled", "stop", true)));
  });

  it("an answer that completes after the interrupt counts as a step and runs nothing", () => {
    const t = new Turn().sample().send(interrupt("stop")).done({ tokens: 7 });
    expect(t.value).toBe("finalizing");
    expect(t.ctx).toMatchObject({ step: 1, tokens: 7, status: "cancelled" });
    expect(t.fx).toEqual(leaving("executionStopped", finalizeFx("cancelled", "stop", true)));
  });

  it("while executing: the batch is cancelled and the round settles before finalizing", () => {
    const t = new Turn().sample().done();
    expect(t.value).toEqual({ running: { executing: "running" } });
    expect(t.fx).toEqual(["rejectInvalid", { sendTo: { type: "batch.run", calls: [spec("c1")] } }]);
    t.send(interrupt("stop"));
    expect(t.value).toEqual({ running: { executing: "stopping" } });
    expect(t.fx).toEqual([
      { cancelAcknowledged: { reason: "stop" } },
      { sendTo: { type: "batch.cancel", reason: "stop" } },
    ]);
    t.send(interrupt("again"));
    expect(t.value).toEqual({ running: { executing: "stopping" } });
    expect(t.fx).toEqual([]);
    expect(t.ctx.reason).toBe("stop");
    // Even results that make a loop do not turn a cancelled round into a loop failure.
    t.send({ type: "batch.done", results: [fail("c1"), fail("c1"), fail("c1")] });
    expect(t.value).toBe("finalizing");
    expect(t.ctx).toMatchObject({ status: "cancelled", reason: "stop" });
    expect(t.fx).toEqual(leaving("executionStopped", finalizeFx("cancelled", "stop", true)));
  });

  it("while waiting to retry: the backoff timer is cancelled and the turn ends at once", () => {
    const t = new Turn().sample().failed({ retry: { delayMs: 70 } });
    t.send(interrupt("stop"));
    expect(t.value).toBe("finalizing");
    expect(t.fx).toEqual([
      { cancel: "xstate.after.retryDelay.turn.running.waiting" },
      { cancel: "turnDeadline" },
      { cancelAcknowledged: { reason: "stop" } },
      "executionStopped",
      finalizeFx("cancelled", "stop", true),
      finalizeTimer,
    ]);
  });

  it("while compacting: the summary is aborted and the turn waits for it to report", () => {
    const t = new Turn().send({ type: "compact.due" });
    expect(t.value).toEqual({ running: { compacting: "summarizing" } });
    expect(t.fx).toEqual([{ compact: { mode: "auto" } }]);
    t.send(interrupt("stop"));
    expect(t.value).toEqual({ running: { compacting: "stopping" } });
    expect(t.fx).toEqual([{ cancelAcknowledged: { reason: "stop" } }, "abortCompaction"]);
    t.send(interrupt("again"));
    expect(t.value).toEqual({ running: { compacting: "stopping" } });
    expect(t.fx).toEqual([]);
    t.send({ type: "compaction.done", ok: true });
    expect(t.value).toBe("finalizing");
    expect(t.ctx).toMatchObject({ status: "cancelled", reason: "stop" });
    expect(t.fx).toEqual(leaving("executionStopped", finalizeFx("cancelled", "stop", true)));
  });

  it("finalizing is not cancellable", () => {
    const t = new Turn().send({ type: "compact.due" }).send(interrupt("stop"));
    t.send({ type: "compaction.done", ok: true }).send(interrupt("again"));
    expect(t.value).toBe("finalizing");
    expect(t.fx).toEqual([]);
    expect(t.ctx.reason).toBe("stop");
  });
});

describe("turn chart: responses", () => {
  it("an answer without calls ends the turn completed once steering has nothing", () => {
    const t = new Turn()
      .sample()
      .done({ finishReason: "stop", callCount: 0, calls: [], tokens: 4 });
    expect(t.value).toEqual({ running: "ending" });
    expect(t.fx).toEqual(["pollAtEnd"]);
    expect(t.ctx).toMatchObject({ step: 1, tokens: 4, reason: undefined });
    t.send({ type: "end.none" });
    expect(t.value).toBe("finalizing");
    expect(t.fx).toEqual(leaving(finalizeFx("completed", undefined, false)));
    t.send({ type: "finalize.done" });
    expect(t.value).toBe("done");
    expect(t.fx).toEqual([
      { cancel: "xstate.after.finalizeDeadline.turn.finalizing" },
      { ended: { status: "completed", reason: undefined } },
    ]);
    expect(t.s.status).toBe("done");
    expect(t.s.output).toEqual({ status: "completed", reason: undefined });
  });

  it("steering at the natural end continues the turn (within its limits)", () => {
    const t = new Turn().sample().done({ finishReason: "stop", callCount: 0, calls: [] });
    t.send({ type: "end.steered" });
    expect(t.value).toEqual(PREPARING);
    expect(t.fx).toEqual([P(2, 1)]);
    const last = new Turn({ limits: { maxSteps: 1, maxSpendTokens: 0, deadlineMs: 0 } });
    last.sample().done({ finishReason: "stop", callCount: 0, calls: [] });
    last.send({ type: "end.steered" });
    expect(last.value).toBe("finalizing");
    expect(last.ctx).toMatchObject({ status: "budget_exhausted", reason: "maxSteps (1) reached" });
  });

  it("an answer cut by length or a filter, without calls, completes with a reason that says so", () => {
    for (const [finishReason, says] of [
      ["length", "finish_reason: length"],
      ["content_filter", "finish_reason: content_filter"],
    ] as const) {
      const t = new Turn().sample().done({ finishReason, callCount: 0, calls: [] });
      expect(t.value).toEqual({ running: "ending" });
      t.send({ type: "end.none" });
      expect(t.ctx.status).toBe("completed");
      expect(t.ctx.reason).toContain(says);
    }
  });

  it("calls of an answer cut by length are refused, never run (invariant 3 of docs/architecture.md)", () => {
    const t = new Turn().sample().done({ finishReason: "length", callCount: 2, tokens: 6 });
    expect(t.value).toEqual(PREPARING);
    expect(t.ctx).toMatchObject({ step: 1, tokens: 6 });
    expect(t.fx).toEqual([W0, "refuseCalls", "commitBatch", P(2, 1)]);
    // Even when every call failed preparation.
    const u = new Turn().sample().done({ finishReason: "length", callCount: 1, calls: [] });
    expect(u.fx).toEqual([W0, "refuseCalls", "commitBatch", P(2, 1)]);
  });

  it("calls that all failed preparation are the whole batch: rejected and committed", () => {
    const t = new Turn().sample().done({ callCount: 2, calls: [], tokens: 5 });
    expect(t.value).toEqual(PREPARING);
    expect(t.ctx).toMatchObject({ step: 1, tokens: 5, calls: [] });
    expect(t.fx).toEqual(["rejectInvalid", W0, "commitBatch", P(2, 1)]);
  });

  it("valid calls run in the batch and commit when it is done", () => {
    const calls = [spec("a"), spec("b")];
    const t = new Turn().sample().done({ callCount: 3, calls, tokens: 8 });
    expect(t.value).toEqual({ running: { executing: "running" } });
    expect(t.ctx).toMatchObject({ step: 1, tokens: 8, calls });
    // Every call valid: nothing for the loop guard to fold before the batch runs.
    expect(t.fx).toEqual(["rejectInvalid", { sendTo: { type: "batch.run", calls } }]);
    t.send({ type: "batch.done" });
    // The results are written before the turn decides what is next; the next request's
    // write-ahead (recording) is what waits for them to be durable. No result failed and no
    // streak is open, so the loop guard is not consulted: one transition, no fold.
    expect(t.value).toEqual(PREPARING);
    expect(t.fx).toEqual(["commitBatch", P(2, 1)]);
  });

  it("reports of an older attempt are ignored", () => {
    const t = new Turn().sample();
    t.send({
      type: "attempt.done",
      attempt: 0,
      finishReason: "stop",
      callCount: 0,
      calls: [],
      tokens: 1,
    });
    expect(t.value).toEqual({ running: { sampling: "streaming" } });
    expect(t.fx).toEqual([]);
    expect(t.ctx.step).toBe(0);
    t.send({ type: "attempt.failed", attempt: 2, status: "failed", reason: "future" });
    expect(t.value).toEqual({ running: { sampling: "streaming" } });
    expect(t.fx).toEqual([]);
  });
});

describe("turn chart: permissions", () => {
  const calls = [spec("a"), spec("b")];
  const gated = () => new Turn().sample().done({ callCount: 2, calls, needsPermission: true });

  it("calls that need a decision go through the gate first", () => {
    const t = gated();
    expect(t.value).toEqual({ running: "gating" });
    expect(t.fx).toEqual([W0, "rejectInvalid", "checkPermissions"]);
  });

  it("the allowed calls run; the corrected ones get their feedback", () => {
    const corrected = [{ callId: "b", feedback: "use the staging db" }];
    const t = gated().send({ type: "gate.allowed", calls: [calls[0]], corrected });
    expect(t.value).toEqual({ running: { executing: "running" } });
    expect(t.ctx.calls).toEqual([calls[0]]);
    expect(t.fx).toEqual([
      { correctCalls: { corrected } },
      W0,
      "rejectInvalid",
      { sendTo: { type: "batch.run", calls: [calls[0]] } },
    ]);
  });

  it("none allowed: the corrections are the results, and the turn goes on", () => {
    const corrected = [{ callId: "a", feedback: "no" }];
    const t = gated().send({ type: "gate.allowed", calls: [], corrected });
    expect(t.value).toEqual(PREPARING);
    expect(t.fx).toEqual([{ correctCalls: { corrected } }, W0, "commitBatch", P(2, 1)]);
  });

  it("a decline without feedback ends the turn cancelled (invariant 12 of docs/architecture.md)", () => {
    const t = gated().send({ type: "gate.declined", reason: "denied: rm -rf" });
    expect(t.value).toBe("finalizing");
    expect(t.ctx).toMatchObject({ status: "cancelled", reason: "denied: rm -rf" });
    expect(t.fx).toEqual(
      leaving(
        { declineCalls: { reason: "denied: rm -rf" } },
        finalizeFx("cancelled", "denied: rm -rf", false),
      ),
    );
  });

  it("a decision that arrives after the gate changes nothing", () => {
    const t = new Turn().sample().done();
    t.send({ type: "gate.declined", reason: "late" });
    expect(t.value).toEqual({ running: { executing: "running" } });
    expect(t.fx).toEqual([]);
  });
});

describe("turn chart: retries and overflow", () => {
  it("a retryable failure waits its delay, then samples again as a new attempt", () => {
    const t = new Turn().sample().failed({ retry: { delayMs: 70 } });
    expect(t.value).toEqual({ running: "waiting" });
    expect(t.ctx.retryDelayMs).toBe(70);
    expect(t.fx).toEqual([
      { retryScheduled: { delayMs: 70, attempt: 1 } },
      { raise: { type: "xstate.after.retryDelay.turn.running.waiting" }, delay: 70 },
    ]);
    t.fire("retryDelay");
    // A new attempt: its start is written and made durable before its request goes out.
    expect(t.value).toEqual({ running: { sampling: "recording" } });
    expect(t.fx).toEqual([
      { cancel: "xstate.after.retryDelay.turn.running.waiting" },
      { recordAttempt: { attempt: 2, step: 0 } },
    ]);
    t.record();
    expect(t.value).toEqual({ running: { sampling: "streaming" } });
    expect(t.fx).toEqual([{ startAttempt: { attempt: 2, step: 0 } }]);
    // The retried attempt's answer counts as the first step.
    t.done({ finishReason: "stop", callCount: 0, calls: [] });
    expect(t.ctx.step).toBe(1);
  });

  it("a failure without a retry ends the turn with the failure's status and reason", () => {
    const t = new Turn().sample().failed({ status: "failed", reason: "HTTP 400: bad request" });
    expect(t.value).toBe("finalizing");
    expect(t.ctx).toMatchObject({ status: "failed", reason: "HTTP 400: bad request" });
    expect(t.fx).toEqual(leaving(finalizeFx("failed", "HTTP 400: bad request", false)));
  });

  it("a context overflow compacts harder and sends again, within its budget", () => {
    const t = new Turn().sample().failed({ overflow: true, reason: "context too long" });
    expect(t.value).toEqual({ running: { compacting: "summarizing" } });
    expect(t.ctx.overflowRecoveries).toBe(1);
    expect(t.fx).toEqual([{ compact: { mode: "overflow" } }]);
    t.send({ type: "compaction.done", ok: true });
    expect(t.value).toEqual({ running: { sampling: "recording" } });
    expect(t.fx).toEqual(["pollInbox", { recordAttempt: { attempt: 2, step: 0 } }]);
    // The budget (1) is spent: the next overflow ends the turn with the provider's error.
    t.failed({ overflow: true, reason: "context too long" });
    expect(t.value).toBe("finalizing");
    expect(t.ctx).toMatchObject({ status: "failed", reason: "context too long" });
  });

  it("an overflow compaction that fails fails the turn; an automatic one that fails does not", () => {
    const t = new Turn().sample().failed({ overflow: true });
    t.send({ type: "compaction.done", ok: false, reason: "no legal cut" });
    expect(t.value).toBe("finalizing");
    expect(t.ctx).toMatchObject({ status: "failed", reason: "no legal cut" });
    expect(t.fx).toEqual(leaving(finalizeFx("failed", "no legal cut", false)));
    const auto = new Turn().send({ type: "compact.due" });
    auto.send({ type: "compaction.done", ok: false, reason: "no legal cut" });
    expect(auto.value).toEqual({ running: { sampling: "recording" } });
    expect(auto.ctx.status).toBe("completed");
    // After an overflow recovery, the next automatic compaction is automatic again.
    const again = new Turn().sample().failed({ overflow: true });
    again.send({ type: "compaction.done", ok: true }).record().done().send({ type: "batch.done" });
    again.send({ type: "compact.due" });
    expect(again.fx).toEqual([{ compact: { mode: "auto" } }]);
    again.send({ type: "compaction.done", ok: false, reason: "no legal cut" });
    expect(again.value).toEqual({ running: { sampling: "recording" } });
  });

  it("no overflow budget: an overflow is a plain failure", () => {
    const t = new Turn({ maxOverflowRecoveries: 0 }).sample().failed({ overflow: true });
    expect(t.value).toBe("finalizing");
    expect(t.ctx.overflowRecoveries).toBe(0);
  });
});

describe("turn chart: the loop guard", () => {
  it("the streak lives in the chart: below failAfter the step goes on (warned from repeats), at failAfter the turn fails", () => {
    // loopFailAfter 3, loopRepeats 2 (baseInput).
    const t = new Turn().sample().done();
    t.send({ type: "batch.done", results: [fail("c1")] });
    expect(t.value).toEqual(PREPARING);
    expect(t.fx).toEqual([{ loopWarned: { warnings: [] } }, "commitBatch", P(2, 1)]);
    expect(t.ctx.loop).toMatchObject({ count: 1, tool: "grep" });
    t.sample()
      .done()
      .send({ type: "batch.done", results: [fail("c1")] });
    expect(t.fx[0]).toEqual({
      loopWarned: { warnings: [{ callId: "c1", tool: "grep", repeats: 2 }] },
    });
    t.sample().done();
    t.send({ type: "batch.done", results: [fail("c1")] });
    expect(t.value).toBe("finalizing");
    const reason =
      "loop_detected: grep failed the same way 3 times in a row with the same arguments (loopGuard.failAfter 3)";
    expect(t.ctx).toMatchObject({ status: "failed", reason });
    expect(t.fx).toEqual([
      { loopWarned: { warnings: [{ callId: "c1", tool: "grep", repeats: 3 }] } },
      "commitBatch",
      ...leaving(
        { loopStopped: { repeats: 3, tool: "grep" } },
        finalizeFx("failed", reason, false),
      ),
    ]);
  });

  it("results fold in the order they settled: a success or another failure restarts the streak", () => {
    const t = new Turn().sample().done();
    t.send({ type: "batch.done", results: [fail("c1"), fail("c1"), ok("c2"), fail("c1")] });
    expect(t.ctx.loop.count).toBe(1);
    const other = new Turn().sample().done();
    other.send({ type: "batch.done", results: [fail("c1"), fail("c1"), fail("c1", "other")] });
    expect(other.ctx.loop).toMatchObject({ count: 1, signature: "other" });
  });

  it("an open streak is folded even when every result succeeded: the success ends it", () => {
    const t = new Turn().sample().done();
    t.send({ type: "batch.done", results: [fail("c1")] });
    expect(t.ctx.loop.count).toBe(1);
    t.sample().done();
    t.send({ type: "batch.done", results: [ok("c2")] });
    expect(t.ctx.loop.count).toBe(0);
    expect(t.fx).toEqual([W0, "commitBatch", P(3, 2)]);
    // A clean step with no streak open skips the fold, and a spent budget still ends the turn.
    const spent = new Turn({ limits: { maxSteps: 1, maxSpendTokens: 0, deadlineMs: 0 } });
    spent.sample().done();
    spent.send({ type: "batch.done", results: [ok("c1")] });
    expect(spent.value).toBe("finalizing");
    expect(spent.ctx.status).toBe("budget_exhausted");
    // Leaving `running` (its exit cancels the deadline) comes first in the list, as on every
    // way out; the results are committed before the finalizer runs.
    const budget = { scope: "turn", kind: "steps", limit: 1, spent: 1, defaulted: false };
    expect(spent.fx).toEqual(
      leaving("commitBatch", {
        finalize: {
          status: "budget_exhausted",
          reason: "maxSteps (1) reached",
          cancelled: false,
          budget,
        },
      }),
    );
  });

  it("a longer streak also ends it, and the loop wins over a spent step budget", () => {
    const t = new Turn({ limits: { maxSteps: 1, maxSpendTokens: 0, deadlineMs: 0 } });
    t.sample().done();
    t.send({ type: "batch.done", results: [fail("c1"), fail("c1"), fail("c1"), fail("c1")] });
    expect(t.ctx.status).toBe("failed");
    expect(t.ctx.reason).toMatch(/^loop_detected: grep failed the same way 4 times/);
  });

  it("failAfter 0 (or absent) turns the guard off: no streak, no warnings", () => {
    for (const loopFailAfter of [0, undefined]) {
      const t = new Turn({ loopFailAfter }).sample().done();
      t.send({ type: "batch.done", results: Array.from({ length: 50 }, () => fail("c1")) });
      expect(t.ctx.loop.count).toBe(0);
      expect(t.fx).toEqual(["commitBatch", P(2, 1)]);
      expect(t.value).toEqual(PREPARING);
    }
  });

  it("calls that all failed preparation the same way end the turn once their results are written", () => {
    const invalid = [
      fail("c1", "bad", "edit"),
      fail("c1", "bad", "edit"),
      fail("c1", "bad", "edit"),
    ];
    const t = new Turn().sample().done({ calls: [], invalid, tokens: 9 });
    expect(t.value).toBe("finalizing");
    expect(t.ctx).toMatchObject({ step: 1, tokens: 9 });
    expect(t.ctx.reason).toMatch(/^loop_detected: edit failed the same way 3 times/);
    // Valid calls beside them: the streak is judged after the batch, not on the answer.
    const valid = new Turn().sample().done({ invalid });
    expect(valid.value).toEqual({ running: { executing: "running" } });
    expect(valid.ctx.loop.count).toBe(3);
    // An answer cut by length folds the refusals its calls get.
    const cut = new Turn().sample().done({ finishReason: "length", truncated: [fail("c1")] });
    expect(cut.value).toEqual(PREPARING);
    expect(cut.ctx.loop.count).toBe(1);
  });

  it("corrections from the gate fold too", () => {
    const t = new Turn().sample().done({ needsPermission: true });
    t.send({
      type: "gate.allowed",
      calls: [],
      corrected: [{ callId: "c1", feedback: "no" }],
      observed: [fail("c1", "DENIED no")],
    });
    expect(t.ctx.loop.count).toBe(1);
  });
});

describe("turn chart: the attempt's write-ahead", () => {
  it("a request goes out only after its attempt's start is durable; a stale recorded changes nothing", () => {
    const t = new Turn();
    expect(t.value).toEqual(PREPARING);
    expect(t.fx).toEqual([P(1, 0)]);
    t.send({ type: "attempt.recorded", attempt: 7 });
    expect(t.value).toEqual(PREPARING);
    expect(t.fx).toEqual([]);
    t.record();
    expect(t.fx).toEqual([{ startAttempt: { attempt: 1, step: 0 } }]);
  });

  it("a refused write while recording (an interrupt with the store's code) aborts the attempt before any request", () => {
    const t = new Turn();
    t.send({ type: "turn.interrupt", reason: "fenced", status: "failed", code: "LEASE_LOST" });
    expect(t.value).toEqual({ running: { sampling: "stopping" } });
    expect(t.fx).toEqual([
      { cancelAcknowledged: { reason: "fenced" } },
      { abortAttempt: { attempt: 1 } },
    ]);
    // A late `recorded` does not send the request.
    t.record();
    expect(t.fx).toEqual([]);
    t.failed({ status: "cancelled", reason: "interrupted" });
    expect(t.value).toBe("finalizing");
    expect(t.ctx).toMatchObject({ status: "failed", code: "LEASE_LOST", reason: "fenced" });
  });
});

describe("turn chart: finalizing", () => {
  it("a finalizer that misses its deadline ends the turn failed (STORE_FAILED): its end may not be in the log", () => {
    const t = new Turn().sample().failed({ reason: "HTTP 500" });
    t.fire("finalizeDeadline");
    expect(t.value).toBe("done");
    const reason =
      "HTTP 500; finalizer deadline (finalizeDeadlineMs 200) passed before the session store confirmed the turn's end; it may not be in the log";
    expect(t.ctx).toMatchObject({ status: "failed", code: "STORE_FAILED", reason });
    expect(t.fx).toEqual([
      { cancel: "xstate.after.finalizeDeadline.turn.finalizing" },
      { ended: { status: "failed", code: "STORE_FAILED", reason } },
    ]);
    // A turn about to report `completed` does not, when its end was not confirmed.
    const clean = new Turn().sample().done({ finishReason: "stop", callCount: 0, calls: [] });
    clean.send({ type: "end.none" }).fire("finalizeDeadline");
    expect(clean.ctx).toMatchObject({ status: "failed", code: "STORE_FAILED" });
    expect(clean.ctx.reason).toMatch(/^finalizer deadline \(finalizeDeadlineMs 200\) passed/);
  });

  it("a finalizer whose flush was refused ends the turn failed with the store's code and reason, never completed", () => {
    for (const code of ["STORE_FAILED", "LEASE_LOST"] as const) {
      const t = new Turn().sample().done({ finishReason: "stop", callCount: 0, calls: [] });
      t.send({ type: "end.none" });
      expect(t.value).toBe("finalizing");
      t.send({ type: "finalize.done", failure: { code, reason: "disk full" } });
      expect(t.value).toBe("done");
      expect(t.ctx).toMatchObject({ status: "failed", code, reason: "disk full" });
      expect(t.fx.at(-1)).toEqual({ ended: { status: "failed", code, reason: "disk full" } });
    }
    const ok = new Turn().sample().done({ finishReason: "stop", callCount: 0, calls: [] });
    ok.send({ type: "end.none" }).send({ type: "finalize.done" });
    expect(ok.fx.at(-1)).toEqual({ ended: { status: "completed", reason: undefined } });
  });

  it("a batch that throws ends the turn failed through finalizing", () => {
    const t = new Turn().sample().done();
    t.send({ type: "xstate.error.actor.batch", error: new Error("boom") } as unknown as TurnEvent);
    expect(t.value).toBe("finalizing");
    expect(t.ctx).toMatchObject({
      status: "failed",
      reason: "internal error in the tool batch: Error: boom",
    });
    expect(t.fx).toEqual(
      leaving(
        "executionStopped",
        finalizeFx("failed", "internal error in the tool batch: Error: boom", false),
      ),
    );
  });
});
