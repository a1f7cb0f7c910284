import { describe, expect, it } from "vitest";
import { createActor, SimulatedClock } from "xstate";
import type { ToolResult } from "../contracts/tool-result.ts";
import { toolCallMachine } from "../machines/tool-call.machine.ts";

const DEADLINE = 5_000;

function startCall(cancellable: boolean) {
  const clock = new SimulatedClock();
  const effects: string[] = [];
  const logic = toolCallMachine.provide({
    actions: {
      recordStart: (_, p) => effects.push(`recordStart ${p.callId}`),
      execute: (_, p) => effects.push(`execute ${p.callId}`),
      abort: (_, p) => effects.push(`abort ${p.callId}`),
    },
  });
  const input = { callId: "c1", name: "slow", cancellable, stopDeadlineMs: DEADLINE };
  const actor = createActor(logic, { input, clock }).start();
  actor.send({ type: "call.recorded" });
  return { actor, clock, effects };
}

describe("tool call under a simulated clock", () => {
  it("a cancelled tool that ignores abort becomes unknown exactly at the stop deadline", () => {
    const { actor, clock, effects } = startCall(true);
    actor.send({ type: "call.cancel" });
    expect(effects).toEqual(["recordStart c1", "execute c1", "abort c1"]);
    clock.increment(DEADLINE - 1);
    expect(actor.getSnapshot().value).toBe("stopping");
    clock.increment(1);
    const snap = actor.getSnapshot();
    expect(snap.status).toBe("done");
    expect(snap.output?.outcome).toBe("unknown");
    expect(snap.output?.result).toEqual({
      ok: false,
      code: "OUTCOME_UNKNOWN",
      message:
        `the tool did not stop within ${DEADLINE} ms of being cancelled; its effects are unknown ` +
        "(it may have finished, partly run, or still be running). Check the current state before retrying.",
      retryable: false,
    });
  });

  it("a non-cancellable tool gets no abort but the same deadline before it is unknown", () => {
    const { actor, clock, effects } = startCall(false);
    actor.send({ type: "call.cancel" });
    expect(effects).toEqual(["recordStart c1", "execute c1"]);
    clock.increment(DEADLINE - 1);
    expect(actor.getSnapshot().value).toBe("stopping");
    clock.increment(1);
    expect(actor.getSnapshot().output?.outcome).toBe("unknown");
  });

  it("a completion before the deadline keeps the real result, and the deadline then changes nothing", () => {
    const { actor, clock } = startCall(true);
    actor.send({ type: "call.cancel" });
    clock.increment(DEADLINE - 1);
    const result: ToolResult = { ok: true, content: "written" };
    actor.send({ type: "call.complete", result });
    clock.increment(DEADLINE * 2);
    expect(actor.getSnapshot().output).toEqual({ callId: "c1", outcome: "completed", result });
  });

  it("a tool that honours the abort before the deadline settles as cancelled", () => {
    const { actor, clock } = startCall(true);
    actor.send({ type: "call.cancel" });
    clock.increment(10);
    actor.send({ type: "call.aborted" });
    clock.increment(DEADLINE);
    expect(actor.getSnapshot().output).toMatchObject({
      outcome: "cancelled",
      result: { ok: false, code: "CANCELLED", message: "cancelled while running" },
    });
  });

  it("a running call that is never cancelled has no deadline", () => {
    const { actor, clock } = startCall(true);
    clock.increment(DEADLINE * 100);
    expect(actor.getSnapshot().value).toBe("started");
  });

  it("a call records its start when its actor is created and runs nothing before call.recorded", () => {
    const effects: string[] = [];
    const logic = toolCallMachine.provide({
      actions: {
        recordStart: (_, p) => effects.push(`recordStart ${p.callId}`),
        execute: (_, p) => effects.push(`execute ${p.callId}`),
      },
    });
    const input = { callId: "c2", name: "t", cancellable: true, stopDeadlineMs: DEADLINE };
    const started = createActor(logic, { input }).start();
    expect(started.getSnapshot().value).toBe("recording");
    expect(effects).toEqual(["recordStart c2"]);
    started.send({ type: "call.cancel" });
    expect(started.getSnapshot().output?.outcome).toBe("not_executed");
    expect(effects).toEqual(["recordStart c2"]);
  });
});
