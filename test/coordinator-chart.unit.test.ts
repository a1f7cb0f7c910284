import { describe, expect, it } from "vitest";
import { type AnyMachineSnapshot, initialTransition, transition } from "xstate";
import { type CoordinatorEvent, coordinatorMachine } from "../machines/coordinator.machine.ts";

// The coordinator chart's bookkeeping stated on the chart itself (pure `transition()`): the
// doorbell's seq, what an interrupt clears, the outcome and error it records, and which
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
      pendingWake: { seq: number } | null;
      lastOutcome: string | null;
      lastError: string | null;
    };
  }
}

const wake = (seq: number): CoordinatorEvent => ({ type: "wake", seq });

describe("coordinator chart: its id", () => {
  it("is coordinator: the inspector tells actor kinds apart by machine id", () => {
    expect(coordinatorMachine.id).toBe("coordinator");
  });
});

describe("coordinator chart: the doorbell", () => {
  it("a wake while running rings it with the latest wake's seq (also seq 0)", () => {
    const c = new Coordinator().send(wake(0));
    expect(c.value).toBe("running");
    expect(c.effects).toEqual(["startRun"]);
    expect(c.ctx).toMatchObject({ execution: 1, pendingWake: null });
    c.send(wake(0));
    expect(c.ctx.pendingWake).toEqual({ seq: 0 });
    c.send(wake(4), wake(2));
    expect(c.ctx.pendingWake).toEqual({ seq: 4 });
  });

  it("an interrupt clears the wakes submitted before it or with its seq, never one after it", () => {
    const before = new Coordinator().send(wake(1), wake(3), { type: "interrupt", seq: 3 });
    expect(before.value).toBe("stopping");
    expect(before.effects).toEqual(["abortRun"]);
    expect(before.ctx.pendingWake).toBeNull();
    const after = new Coordinator().send(wake(1), wake(5), { type: "interrupt", seq: 3 });
    expect(after.ctx.pendingWake).toEqual({ seq: 5 });
  });

  it("an interrupt while idle or cleaning clears a doorbell rung before it, keeps a later one", () => {
    const c = new Coordinator().send({ type: "interrupt", seq: 5 }, { type: "interrupt", seq: 3 });
    expect(c.value).toBe("idle");
    expect(c.ctx.pendingWake).toBeNull();
    c.send(wake(6), { type: "run.done", execution: 1 }, wake(7));
    expect(c.value).toBe("cleaning");
    c.send({ type: "interrupt", seq: 2 });
    expect(c.ctx.pendingWake).toEqual({ seq: 7 });
    c.send({ type: "interrupt", seq: 8 });
    expect(c.ctx.pendingWake).toBeNull();
  });

  it("the handover starts a successor for the rung doorbell in the same transition as cleanup's end", () => {
    const c = new Coordinator().send(wake(1), wake(2));
    c.send({ type: "run.done", execution: 1 });
    expect(c.value).toBe("cleaning");
    expect(c.effects).toEqual(["startCleanup"]);
    c.send({ type: "cleanup.done", execution: 1 });
    expect(c.value).toBe("running");
    expect(c.effects).toEqual(["startRun"]);
    expect(c.ctx).toMatchObject({ execution: 2, pendingWake: null });
    // Queued work the host still sees starts a successor too, with no wake rung.
    c.send({ type: "run.done", execution: 2 }, { type: "cleanup.done", execution: 2, work: true });
    expect(c.value).toBe("running");
    expect(c.ctx).toMatchObject({ execution: 3 });
    c.send({ type: "run.done", execution: 3 }, { type: "cleanup.done", execution: 3, work: false });
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
