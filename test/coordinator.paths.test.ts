import { describe, expect, it } from "vitest";
import { type AnyStateMachine, initialTransition, type SnapshotFrom, transition } from "xstate";
import { getShortestPaths } from "xstate/graph";
import {
  type CoordinatorEvent,
  type CoordinatorMachine,
  coordinatorMachine,
} from "../machines/coordinator.machine.ts";
import { coordinatorDropsWake } from "./support/mutants/coordinator-drops-wake.ts";

type Snap = SnapshotFrom<CoordinatorMachine>;

/** Every event, with the numbers the current snapshot expects (the list replaces discovery). */
function events(snap: Snap): CoordinatorEvent[] {
  const execution = snap.context.execution;
  return [
    { type: "wake", seq: 1 },
    { type: "interrupt", seq: 2 },
    { type: "run.done", execution },
    { type: "run.failed", execution, error: "boom" },
    { type: "cleanup.done", execution },
    { type: "cleanup.done", execution, work: true },
  ];
}

/**
 * The state key keeps only whether a successor has run (execution > 1), not the ever-growing
 * execution counter, so the traversal terminates.
 */
const serializeState = (snap: Snap) =>
  JSON.stringify([snap.value, snap.context.pendingWake !== null, snap.context.execution > 1]);

function shortestPaths(machine: AnyStateMachine) {
  return getShortestPaths(machine as CoordinatorMachine, { events, serializeState });
}

describe("coordinator state coverage", () => {
  it("shortest paths reach every state, with and without a rung doorbell", () => {
    const paths = shortestPaths(coordinatorMachine);
    const reached = new Set(
      paths.map((p) => JSON.stringify([p.state.value, p.state.context.pendingWake !== null])),
    );
    for (const value of ["running", "stopping", "cleaning"]) {
      for (const bell of ["false", "true"]) expect(reached).toContain(`["${value}",${bell}]`);
    }
    expect(reached).toContain('["idle",false]');
    expect(reached.size).toBe(7);
  });

  it("the handover from cleaning to running is reachable in one transition after cleanup", () => {
    const paths = shortestPaths(coordinatorMachine);
    const handover = paths.find((p) => serializeState(p.state) === '["running",false,true]');
    expect(handover?.steps.map((s) => s.event.type)).toEqual([
      "xstate.init",
      "wake",
      "run.done",
      "cleanup.done",
    ]);
    expect(handover?.steps.at(-1)?.event).toMatchObject({ work: true });
    // Replay the path's events: the graph's representative snapshot may come from another path.
    let snap = initialTransition(coordinatorMachine)[0];
    for (const step of handover?.steps.slice(1) ?? []) {
      snap = transition(coordinatorMachine, snap, step.event)[0];
    }
    expect(snap.value).toBe("running");
    expect(snap.context).toMatchObject({ execution: 2, pendingWake: null });
  });

  it("path coverage alone cannot see a wake dropped while running: the mutant still reaches every state value", () => {
    const values = new Set(shortestPaths(coordinatorDropsWake).map((p) => String(p.state.value)));
    expect([...values].sort()).toEqual(["cleaning", "idle", "running", "stopping"]);
  });
});
