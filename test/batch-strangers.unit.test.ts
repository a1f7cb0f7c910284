import { describe, expect, it } from "vitest";
import { type AnyActorRef, createActor, type InspectedMicrostepEvent } from "xstate";
import {
  type BatchCallResult,
  type BatchContext,
  batchMachine,
  checkedRound,
  freeSlots,
  planRound,
  roundContext,
  runtimeFailed,
  settleAll,
} from "../machines/batch.machine.ts";
import { type BatchCallSpec, scheduleBatch } from "../machines/policies/batch-schedule.ts";
import { toCall } from "./support/harness.ts";

// The batch chart's guards against events it must not act on (a done or error event from an
// actor that is not the running call's, or for a call that is not running), and the pure
// helpers its actions are built from. Each test states a behaviour a mutation run found
// unstated (scripts/mutate-ci.mjs).

function call(callId: string, traits: Partial<BatchCallSpec> = {}): BatchCallSpec {
  return {
    callId,
    name: `tool_${callId}`,
    concurrencySafe: true,
    cancellable: true,
    executionMode: "parallel",
    ...traits,
  };
}

const ok = (content: string) => ({ ok: true as const, content });

/** A batch running calls a and b (both recorded, so both actors are `started`). */
function running() {
  const settled: BatchCallResult[] = [];
  const rounds: BatchCallResult[][] = [];
  const errors: unknown[] = [];
  const microsteps: InspectedMicrostepEvent[] = [];
  let batchRef: AnyActorRef | undefined;
  const logic = batchMachine.provide({
    actions: {
      callSettled: (_, p) => settled.push(p),
      roundDone: (_, p) => rounds.push(p.results),
    },
  });
  const batch = createActor(logic, {
    input: { stopDeadlineMs: 1000, calls: [call("a"), call("b")] },
    inspect: (e) => {
      if (e.type === "@xstate.microstep" && e.actorRef === batchRef) microsteps.push(e);
    },
  });
  batchRef = batch;
  batch.subscribe({ error: (e) => errors.push(e) });
  batch.start();
  toCall(batch, { type: "call.recorded", callId: "a" });
  toCall(batch, { type: "call.recorded", callId: "b" });
  return { batch, settled, rounds, errors, microsteps };
}

/** Sends an event the chart's types do not admit from outside (a forged child event). */
function forge(batch: { send: (e: never) => void }, event: Record<string, unknown>) {
  batch.send(event as never);
}

describe("batch: done and error events that are not the running call's own are ignored", () => {
  const forgedDone = (actorId: string, output?: unknown) => ({
    type: `xstate.done.actor.${actorId}`,
    actorId,
    ...(output === undefined ? {} : { output }),
  });

  it("a done event for an unknown call id, with no output, or from another call's actor settles nothing", () => {
    const { batch, settled, errors } = running();
    const before = batch.getSnapshot().context;
    forge(batch, forgedDone("slot0", { callId: "zzz", outcome: "completed", result: ok("x") }));
    forge(batch, forgedDone("slot0"));
    // b is running, but slot0 is a's actor: b's result can only come from b's own actor.
    forge(batch, forgedDone("slot0", { callId: "b", outcome: "completed", result: ok("x") }));
    const snap = batch.getSnapshot();
    expect(errors).toEqual([]);
    expect(settled).toEqual([]);
    expect(snap.value).toBe("running");
    expect(snap.context.phases).toEqual(["running", "running"]);
    expect(snap.context).toBe(before);
    expect(Object.keys(snap.children).sort()).toEqual(["slot0", "slot1"]);
  });

  it("a second done event for a call that already settled is dropped", () => {
    const { batch, settled, errors } = running();
    toCall(batch, { type: "call.complete", callId: "a", result: ok("first") });
    forge(batch, forgedDone("slot0", { callId: "a", outcome: "completed", result: ok("late") }));
    expect(errors).toEqual([]);
    expect(settled.map((s) => [s.callId, s.result])).toEqual([["a", ok("first")]]);
    expect(batch.getSnapshot().value).toBe("running");
  });

  it("an error event from an actor that runs no call settles nothing", () => {
    const { batch, settled, errors } = running();
    forge(batch, { type: "xstate.error.actor.slot7", actorId: "slot7", error: new Error("?") });
    expect(errors).toEqual([]);
    expect(settled).toEqual([]);
    expect(batch.getSnapshot().context.phases).toEqual(["running", "running"]);
  });

  it("an error event from a running call's actor settles that call as unknown, not retryable, saying to check the state", () => {
    const { batch, settled, errors } = running();
    forge(batch, { type: "xstate.error.actor.slot1", actorId: "slot1", error: new Error("boom") });
    expect(errors).toEqual([]);
    expect(settled).toEqual([
      { callId: "b", name: "tool_b", outcome: "unknown", result: expect.anything() },
    ]);
    expect(settled[0].result).toEqual(runtimeFailed(new Error("boom")));
    expect(batch.getSnapshot().context.phases).toEqual(["running", "settled"]);
    expect(Object.keys(batch.getSnapshot().children)).toEqual(["slot0"]);
  });
});

/** The state after each microstep from the first done event on (the forwarding step before it is the call's). */
function stepsFromDone(microsteps: InspectedMicrostepEvent[]): unknown[] {
  const from = microsteps.findIndex((m) => m.event.type.startsWith("xstate.done.actor."));
  return microsteps.slice(from).map((m) => (m.snapshot as { value?: unknown }).value);
}

describe("batch: the last call's done event ends the round in that same microstep", () => {
  it("call 0 finishing last: one microstep settles it, reports the round and rests in idle", () => {
    const { batch, settled, rounds, microsteps } = running();
    toCall(batch, { type: "call.complete", callId: "b", result: ok("B") });
    expect(rounds).toEqual([]);
    microsteps.length = 0;
    toCall(batch, { type: "call.complete", callId: "a", result: ok("A") });
    expect(settled.map((s) => s.callId)).toEqual(["b", "a"]);
    expect(rounds.map((r) => r.map((x) => x.callId))).toEqual([["b", "a"]]); // settle order
    expect(stepsFromDone(microsteps)).toEqual(["idle"]);
    expect(batch.getSnapshot().value).toBe("idle");
  });

  it("call 1 finishing last does the same", () => {
    const { batch, rounds, microsteps } = running();
    toCall(batch, { type: "call.complete", callId: "a", result: ok("A") });
    microsteps.length = 0;
    toCall(batch, { type: "call.complete", callId: "b", result: ok("B") });
    expect(rounds).toHaveLength(1);
    expect(stepsFromDone(microsteps)).toEqual(["idle"]);
  });
});

describe("batch helpers", () => {
  const calls = [call("a"), call("b"), call("c")];

  it("runtimeFailed: unknown outcome, not retryable, the cause quoted and what to do", () => {
    expect(runtimeFailed(new Error("disk gone"))).toEqual({
      ok: false,
      code: "OUTCOME_UNKNOWN",
      message:
        "the runtime failed while running this call (Error: disk gone); whether the tool ran " +
        "is unknown. Check the current state before retrying.",
      retryable: false,
    });
  });

  it("settleAll appends to the completion order already recorded and copies, never mutates", () => {
    const ctx: BatchContext = {
      ...roundContext(calls, 8),
      stopDeadlineMs: 1,
    };
    const first = settleAll(ctx, [{ index: 2, outcome: "completed", result: ok("c") }]);
    const next = { ...ctx, ...first };
    const second = settleAll(next, [{ index: 0, outcome: "failed", result: ok("a") }]);
    expect(first.completionOrder).toEqual([2]);
    expect(second.completionOrder).toEqual([2, 0]);
    expect(second.phases).toEqual(["settled", "pending", "settled"]);
    expect(ctx.phases).toEqual(["pending", "pending", "pending"]);
    expect(ctx.completionOrder).toEqual([]);
  });

  it("planRound says nothing starts (undefined) when the scheduler starts nothing", () => {
    const base: BatchContext = {
      ...roundContext(calls, 1),
      stopDeadlineMs: 1,
    };
    const ids = (c: BatchContext, start: readonly number[]) => freeSlots(c, start.length);
    const first = planRound(base, scheduleBatch, ids);
    expect(first?.starts.map((s) => s.input.callId)).toEqual(["a"]);
    const full = { ...base, ...first!.next };
    // maxParallel 1, a runs: b and c are pending but may not start.
    expect(planRound(full, scheduleBatch, ids)).toBeUndefined();
  });

  it("checkedRound refuses calls that cannot form a batch with a message that starts 'invalid batch:'", () => {
    expect(() => checkedRound([call("a"), call("a")], 8)).toThrow(
      /^invalid batch: .*call id "a" appears twice/,
    );
  });

  it("freeSlots gives exactly the number asked for, the lowest slots no running call holds", () => {
    const ctx: BatchContext = {
      ...roundContext(calls, 8),
      stopDeadlineMs: 1,
    };
    ctx.phases = ["running", "settled", "pending"];
    ctx.actorIds = ["slot1", "slot0", undefined];
    expect(freeSlots(ctx, 2)).toEqual(["slot0", "slot2"]);
    expect(freeSlots(ctx, 0)).toEqual([]);
  });

  it("the chart's states are named batch.idle and batch.running (the inspector and the runtime read them)", () => {
    expect(batchMachine.id).toBe("batch");
    expect(batchMachine.states.idle.id).toBe("batch.idle");
    expect(batchMachine.states.running.id).toBe("batch.running");
  });
});
