import { describe, expect, it } from "vitest";
import { getShortestPaths } from "xstate/graph";
import { type ToolCallEvent, toolCallMachine } from "../machines/tool-call.machine.ts";

const deadline = { type: "xstate.after.stopDeadline.toolCall.stopping" };

/** Passing `events` replaces auto-discovery, so every event is listed, timer included. */
const events = [
  { type: "call.recorded" },
  { type: "call.complete", result: { ok: true, content: "x" } },
  {
    type: "call.fail",
    result: { ok: false, code: "EXECUTION_FAILED", message: "x", retryable: false },
  },
  { type: "call.cancel" },
  { type: "call.aborted" },
  deadline,
] as (ToolCallEvent | typeof deadline)[] as ToolCallEvent[];

const allStates = ["recording", "started", "stopping", "settled", "unknown"];

function paths(cancellable: boolean) {
  return getShortestPaths(toolCallMachine, {
    input: { callId: "c1", name: "t", cancellable, stopDeadlineMs: 1000 },
    events,
  });
}

describe("tool call state coverage", () => {
  for (const cancellable of [true, false]) {
    it(`every state is reachable (cancellable=${cancellable})`, () => {
      const reached = new Set(paths(cancellable).map((p) => p.state.value as string));
      expect([...reached].sort()).toEqual([...allStates].sort());
    });
  }

  it("unknown is reached only through a cancel and the stop deadline after execute", () => {
    const toUnknown = paths(true).filter((p) => p.state.value === "unknown");
    expect(toUnknown.length).toBeGreaterThan(0);
    for (const p of toUnknown) {
      expect(p.steps.map((s) => s.event.type)).toEqual([
        "xstate.init",
        "call.recorded",
        "call.cancel",
        deadline.type,
      ]);
    }
  });

  it("every settled outcome is reachable: completed, failed, cancelled, not_executed", () => {
    const outcomes = new Set(
      paths(true)
        .filter((p) => p.state.status === "done")
        .map((p) => p.state.output?.outcome),
    );
    expect([...outcomes].sort()).toEqual(
      ["cancelled", "completed", "failed", "not_executed", "unknown"].sort(),
    );
  });
});
