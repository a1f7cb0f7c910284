import { describe, expect, it } from "vitest";
import { type AnyMachineSnapshot, initialTransition, transition } from "xstate";
import {
  type CoordinatorEvent,
  coordinatorMachine,
  mergeScope,
} from "../machines/coordinator.machine.ts";

// The coordinator chart's bookkeeping stated on the chart itself (pure `transition()`): the
// doorbell's scope and seq, what an interrupt clears, the outcome and error it records, and which
// completions it ignores. The searches check the no-lost-wake-up invariant; these state the data.

class Coordinator {
  s: AnyMachineSnapshot;
  effects: string[] = [];
  constructor() {
    const [s, acts] = initialTransition(coordinatorMachine);
    this.s = s;
    this.note(acts);
  }
  send(...events: CoordinatorEvent[]): this {
    for (const e of events) {
      const [s, acts] = transition(coordinatorMachine, this.s as never, e);
      this.s = s;
      this.note(acts);
    }
    return this;
  }
  private note(acts: readonly { type: string }[]) {
    this.effects = acts.map((a) => a.type).filter((t) => !t.startsWith("xstate."));
  }
  get value() {
    return this.s.value;
  }
  get ctx() {
    return this.s.context as {
      execution: number;
      scope: string | null;
      pendingWake: { scope: string; seq: number } | null;
      interruptedAt: number;
      lastOutcome: string | null;
      lastError: string | null;
    };
  }
}

const wake = (seq: number, scope: "input" | "steer" = "input"): CoordinatorEvent => ({
  type: "wake",
  scope,
  seq,
});

describe("coordinator chart: its id", () => {
  it("is coordinator: the inspector tells actor kinds apart by machine id", () => {
    expect(coordinatorMachine.id).toBe("coordinator");
  });
});

describe("mergeScope", () => {
  it("input outranks steer, either way round; null means no wake", () => {
    expect(mergeScope(null, null)).toBeNull();
    expect(mergeScope(null, undefined)).toBeNull();
    expect(mergeScope("steer", null)).toBe("steer");
    expect(mergeScope(null, "steer")).toBe("steer");
    expect(mergeScope("steer", "input")).toBe("input");
    expect(mergeScope("input", "steer")).toBe("input");
    expect(mergeScope("steer", "steer")).toBe("steer");
  });
});

describe("coordinator chart: the doorbell", () => {
  it("a wake while running rings it with the wake's seq (also seq 0) and the stronger scope", () => {
    const c = new Coordinator().send(wake(0, "steer"));
    expect(c.value).toBe("running");
    expect(c.effects).toEqual(["startRun"]);
    expect(c.ctx).toMatchObject({ execution: 1, scope: "steer", pendingWake: null });
    c.send(wake(0, "steer"));
    expect(c.ctx.pendingWake).toEqual({ scope: "steer", seq: 0 });
    c.send(wake(4, "input"), wake(2, "steer"));
    expect(c.ctx.pendingWake).toEqual({ scope: "input", seq: 4 });
  });

  it("an interrupt clears the wakes submitted before it or with its seq, never one after it", () => {
    const before = new Coordinator().send(wake(1), wake(3), { type: "interrupt", seq: 3 });
    expect(before.value).toBe("stopping");
    expect(before.effects).toEqual(["abortRun"]);
    expect(before.ctx.pendingWake).toBeNull();
    const after = new Coordinator().send(wake(1), wake(5), { type: "interrupt", seq: 3 });
    expect(after.ctx.pendingWake).toEqual({ scope: "input", seq: 5 });
  });

  it("remembers the latest interrupt's seq, whatever order interrupts arrive in", () => {
    const c = new Coordinator().send({ type: "interrupt", seq: 5 }, { type: "interrupt", seq: 3 });
    expect(c.value).toBe("idle");
    expect(c.ctx.interruptedAt).toBe(5);
    c.send(wake(6), { type: "interrupt", seq: 7 }, { type: "interrupt", seq: 2 });
    expect(c.ctx.interruptedAt).toBe(7);
  });

  it("the handover starts a successor for the rung doorbell in the same transition as cleanup's end", () => {
    const c = new Coordinator().send(wake(1, "steer"), wake(2, "input"));
    c.send({ type: "run.done", execution: 1 });
    expect(c.value).toBe("cleaning");
    expect(c.effects).toEqual(["startCleanup"]);
    c.send({ type: "cleanup.done", execution: 1 });
    expect(c.value).toBe("running");
    expect(c.effects).toEqual(["startRun"]);
    expect(c.ctx).toMatchObject({ execution: 2, scope: "input", pendingWake: null });
    // Queued work the host still sees starts a successor too, with its scope.
    c.send(
      { type: "run.done", execution: 2 },
      { type: "cleanup.done", execution: 2, work: "steer" },
    );
    expect(c.value).toBe("running");
    expect(c.ctx).toMatchObject({ execution: 3, scope: "steer" });
    c.send({ type: "run.done", execution: 3 }, { type: "cleanup.done", execution: 3, work: null });
    expect(c.value).toBe("idle");
  });
});

describe("coordinator chart: completions", () => {
  it("records each run's outcome and error, and clears the error after a clean run", () => {
    const c = new Coordinator().send(wake(1), { type: "run.failed", execution: 1, error: "boom" });
    expect(c.ctx).toMatchObject({ lastOutcome: "failed", lastError: "boom" });
    c.send({ type: "cleanup.done", execution: 1 });
    expect(c.value).toBe("idle");
    expect(c.ctx.lastError).toBe("boom"); // a cleanup without an error keeps the run's
    c.send(wake(2), { type: "run.done", execution: 2 });
    expect(c.ctx).toMatchObject({ lastOutcome: "done", lastError: null });
    c.send({ type: "cleanup.done", execution: 2, error: "flush failed" });
    expect(c.ctx).toMatchObject({ lastOutcome: "done", lastError: "flush failed" });
    c.send(wake(3), { type: "interrupt", seq: 4 }, { type: "run.done", execution: 3 });
    expect(c.ctx).toMatchObject({ lastOutcome: "interrupted", lastError: null });
  });

  it("a completion or cleanup of another execution changes nothing, even with the doorbell rung", () => {
    const c = new Coordinator().send(wake(1), { type: "run.done", execution: 0 });
    expect(c.value).toBe("running");
    c.send(wake(2), { type: "run.done", execution: 1 }, { type: "cleanup.done", execution: 7 });
    expect(c.value).toBe("cleaning");
    expect(c.effects).toEqual([]);
    expect(c.ctx).toMatchObject({ execution: 1, pendingWake: { seq: 2 } });
    c.send({ type: "cleanup.done", execution: 1 });
    expect(c.value).toBe("running");
    expect(c.ctx.execution).toBe(2);
  });
});
