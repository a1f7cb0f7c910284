import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createActor } from "xstate";
import { batchMachine } from "../machines/batch.machine.ts";
import {
  type BatchCallSpec,
  type CallPhase,
  checkBatchCalls,
  scheduleBatch,
} from "../machines/policies/batch-schedule.ts";
import {
  cancelledBeforeStart,
  cancelledWhileRunning,
  toolCallMachine,
} from "../machines/tool-call.machine.ts";
import { toCall } from "./support/harness.ts";

function call(callId: string, traits: Partial<BatchCallSpec> = {}): BatchCallSpec {
  return {
    callId,
    name: "t",
    concurrencySafe: true,
    cancellable: true,
    executionMode: "parallel",
    ...traits,
  };
}

function plan(
  calls: BatchCallSpec[],
  phases: CallPhase[] = calls.map(() => "pending"),
  maxParallel = 8,
) {
  const sequential = calls.some((c) => c.executionMode === "sequential");
  return scheduleBatch({ calls, phases, maxParallel, sequential });
}

describe("scheduleBatch", () => {
  it("starts safe calls in call order up to maxParallel", () => {
    const calls = ["a", "b", "c", "d"].map((id) => call(id));
    expect(plan(calls, undefined, 3)).toEqual({ start: [0, 1, 2] });
  });

  it("an unsafe call waits for every earlier call and nothing after it overtakes it", () => {
    const calls = [call("a"), call("w", { concurrencySafe: false }), call("c")];
    expect(plan(calls)).toEqual({ start: [0] });
    expect(plan(calls, ["settled", "pending", "pending"])).toEqual({ start: [1] });
    expect(plan(calls, ["settled", "running", "pending"]).start).toEqual([]);
  });

  it("two calls with one resource key never overlap and start in call order", () => {
    const calls = [call("a", { resourceKey: "/f" }), call("b", { resourceKey: "/f" }), call("c")];
    expect(plan(calls).start).toEqual([0, 2]);
    expect(plan(calls, ["settled", "pending", "running"]).start).toEqual([1]);
  });

  it("one sequential call makes the whole batch run one at a time in call order", () => {
    const calls = [call("a"), call("b", { executionMode: "sequential" }), call("c")];
    expect(plan(calls).start).toEqual([0]);
    expect(plan(calls, ["settled", "pending", "pending"]).start).toEqual([1]);
  });

  it("rejects duplicate ids, an empty batch and a bad maxParallel", () => {
    expect(checkBatchCalls([call("a"), call("a")], 0)).toHaveLength(2);
    expect(checkBatchCalls([], 8)).toEqual(["a batch needs at least one call"]);
    expect(checkBatchCalls([call("a"), call("b")], 1)).toEqual([]);
    expect(checkBatchCalls([call("a")], 1.5)).toEqual([
      "maxParallelToolCalls must be a positive integer, got 1.5",
    ]);
  });

  it("calls never wait on each other except through their traits: a stray dependsOn field is ignored (no provider protocol expresses call dependencies)", () => {
    const spec: Record<string, unknown> = { ...call("b"), dependsOn: ["a"] };
    expect(plan([call("a"), spec as unknown as BatchCallSpec]).start).toEqual([0, 1]);
  });
});

/**
 * The rules of `scheduleBatch`'s TSDoc, read one by one against the whole state (not the
 * scheduler's single pass with its running flags): which pending calls may start, in call
 * order, each start counting for the calls after it.
 */
function referencePlan(
  calls: readonly BatchCallSpec[],
  phases: readonly CallPhase[],
  maxParallel: number,
  sequential: boolean,
): number[] {
  const phase = [...phases];
  const start: number[] = [];
  const barrier = (j: number) => sequential || !calls[j].concurrencySafe;
  for (let i = 0; i < calls.length; i++) {
    if (phase[i] !== "pending") continue;
    const runningNow = phase.filter((p) => p === "running").length;
    const earlier = phase.slice(0, i).map((p, j) => ({ p, j }));
    const allowed =
      runningNow < maxParallel &&
      !phase.some((p, j) => p === "running" && !calls[j].concurrencySafe) &&
      (!barrier(i) || (runningNow === 0 && earlier.every(({ p }) => p === "settled"))) &&
      !earlier.some(({ p, j }) => p === "pending" && barrier(j)) &&
      !earlier.some(
        ({ p, j }) =>
          p !== "settled" &&
          calls[i].resourceKey !== undefined &&
          calls[j].resourceKey === calls[i].resourceKey,
      );
    if (allowed) {
      start.push(i);
      phase[i] = "running";
    }
  }
  return start;
}

describe("scheduleBatch against its rules", () => {
  it("for any calls, phases and maxParallel (reachable or not) it starts exactly what the rules allow", () => {
    const spec = fc.record({
      concurrencySafe: fc.boolean(),
      resourceKey: fc.constantFrom(undefined, "k1", "k2"),
      sequential: fc.boolean(),
    });
    fc.assert(
      fc.property(
        fc.array(fc.tuple(spec, fc.constantFrom<CallPhase>("pending", "running", "settled")), {
          minLength: 1,
          maxLength: 6,
        }),
        fc.integer({ min: 1, max: 4 }),
        fc.boolean(),
        (rows, maxParallel, anySequential) => {
          const calls = rows.map(([s], i) =>
            call(`c${i}`, {
              concurrencySafe: s.concurrencySafe,
              ...(s.resourceKey ? { resourceKey: s.resourceKey } : {}),
              executionMode: anySequential && s.sequential ? "sequential" : "parallel",
            }),
          );
          const phases = rows.map(([, p]) => p);
          const sequential = calls.some((c) => c.executionMode === "sequential");
          const got = scheduleBatch({ calls, phases, maxParallel, sequential }).start;
          expect(got).toEqual(referencePlan(calls, phases, maxParallel, sequential));
        },
      ),
      { numRuns: 3000 },
    );
  });
});

describe("the synthetic results of a cancel", () => {
  it("are not retryable: the model is told the call was cancelled, not to try it again", () => {
    expect(cancelledWhileRunning).toEqual({
      ok: false,
      code: "CANCELLED",
      message: "cancelled while running",
      retryable: false,
    });
    expect(cancelledBeforeStart).toMatchObject({ ok: false, code: "CANCELLED", retryable: false });
  });
});

describe("batch machine edge cases", () => {
  const input = { stopDeadlineMs: 1000, calls: [call("a"), call("b")] };

  it("a provided action that throws settles its call as unknown instead of losing it", () => {
    const settled: string[] = [];
    const toolCall = toolCallMachine.provide({
      actions: {
        execute: () => {
          throw new Error("runtime bug");
        },
      },
    });
    const logic = batchMachine.provide({
      actors: { toolCall },
      actions: { callSettled: (_, p) => settled.push(`${p.callId}:${p.outcome}`) },
    });
    const batch = createActor(logic, { input }).start();
    toCall(batch, { type: "call.recorded", callId: "a" });
    toCall(batch, { type: "call.recorded", callId: "b" });
    const snap = batch.getSnapshot();
    expect(settled).toEqual(["a:unknown", "b:unknown"]);
    expect(snap.value).toBe("idle");
    expect(snap.context.results[0]).toMatchObject({
      code: "OUTCOME_UNKNOWN",
      message: expect.stringMatching(/runtime bug/),
    });
  });

  it("a call's event after it settled changes nothing: its actor has stopped", () => {
    const batch = createActor(batchMachine, { input }).start();
    const result = { ok: true as const, content: "x" };
    const slot = batch.getSnapshot().context.actorIds[0]!;
    const actor = batch.getSnapshot().children[slot]!;
    actor.send({ type: "call.recorded" });
    actor.send({ type: "call.complete", result });
    expect(batch.getSnapshot().context.phases[0]).toBe("settled");
    actor.send({ type: "call.complete", result: { ok: true, content: "late" } });
    expect(batch.getSnapshot().context.results[0]).toEqual(result);
    expect(batch.getSnapshot().value).toBe("running");
  });

  it("a cancel before anything was recorded settles every call as not executed", () => {
    const batch = createActor(batchMachine, { input }).start();
    batch.send({ type: "batch.cancel", reason: "user" });
    const { calls, outcomes, results } = batch.getSnapshot().context;
    expect(calls.map((c, i) => [c.callId, outcomes[i], results[i]])).toEqual([
      ["a", "not_executed", cancelledBeforeStart],
      ["b", "not_executed", cancelledBeforeStart],
    ]);
  });

  it("rounds: idle after roundDone, a second batch.run starts fresh, an overlapping one fails loudly", () => {
    const rounds: string[][] = [];
    const logic = batchMachine.provide({
      actions: { roundDone: (_, p) => rounds.push(p.results.map((r) => r.callId)) },
    });
    const batch = createActor(logic, { input: { stopDeadlineMs: 1000 } }).start();
    expect(batch.getSnapshot().value).toBe("idle");
    batch.send({ type: "batch.cancel", reason: "nothing runs" }); // ignored while idle
    batch.send({ type: "batch.run", calls: [call("a")] });
    batch.send({ type: "batch.cancel", reason: "user" });
    expect(rounds).toEqual([["a"]]);
    batch.send({ type: "batch.run", calls: [call("b"), call("c")] });
    expect(batch.getSnapshot().context.cancelled).toBe(false);
    // Child ids are slots: the first round's slot0 was freed when its call settled.
    expect(Object.keys(batch.getSnapshot().children).sort()).toEqual(["slot0", "slot1"]);
    expect(batch.getSnapshot().context.actorIds).toEqual(["slot0", "slot1"]);
    let error: unknown;
    batch.subscribe({ error: (e) => (error = e) });
    batch.send({ type: "batch.run", calls: [call("d")] });
    expect(String(error)).toMatch(/batch.run while a round of 2 call\(s\) is running/);
  });

  it("child ids are slots bounded by maxParallel and reused across calls and rounds, never call ids", () => {
    const spawned = new Set<string>();
    const toolCall = toolCallMachine.provide({
      actions: {
        recordStart: ({ self }) => {
          spawned.add(self.id);
          self.send({ type: "call.recorded" });
        },
        execute: ({ self }) =>
          self.send({ type: "call.complete", result: { ok: true, content: "" } }),
      },
    });
    const rounds: string[][] = [];
    const logic = batchMachine.provide({
      actors: { toolCall },
      actions: {
        roundDone: (_, p) => rounds.push(p.results.map((r) => `${r.callId}:${r.outcome}`)),
      },
    });
    const batch = createActor(logic, { input: { stopDeadlineMs: 1000, maxParallelToolCalls: 3 } });
    batch.start();
    for (let r = 0; r < 4; r++) {
      const calls = [0, 1, 2, 3, 4].map((i) => call(`call_${r}_${i}`));
      batch.send({ type: "batch.run", calls });
      expect(rounds[r]).toEqual(calls.map((c) => `${c.callId}:completed`));
    }
    expect([...spawned].sort()).toEqual(["slot0", "slot1", "slot2"]);
    expect(batch.getSnapshot().children).toEqual({});
  });

  it("a batch with duplicate call ids fails to start with a message that says which", () => {
    const bad = { stopDeadlineMs: 1000, calls: [call("a"), call("a")] };
    const actor = createActor(batchMachine, { input: bad });
    let error: unknown;
    actor.subscribe({ error: (e) => (error = e) });
    actor.start();
    expect(String(error)).toMatch(/call id "a" appears twice/);
  });
});
