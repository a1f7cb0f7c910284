import { describe, expect, it } from "vitest";
import { type AnyStateMachine, initialTransition, type SnapshotFrom, transition } from "xstate";
import {
  type CoordinatorEvent,
  type CoordinatorMachine,
  coordinatorMachine,
} from "../machines/coordinator.machine.ts";
import { coordinatorDropsWake } from "./support/mutants/coordinator-drops-wake.ts";
import { coordinatorIdleAfterCleanup } from "./support/mutants/coordinator-idle-after-cleanup.ts";
import { coordinatorInterruptDropsLaterWake } from "./support/mutants/coordinator-interrupt-drops-later-wake.ts";
import { noTimers, stepTimers, type Timers, timerKey } from "./support/timers.ts";

type Snap = SnapshotFrom<CoordinatorMachine>;

/** The oracle: wakes accepted but not yet covered by a run that started after them. */
interface Node {
  snap: Snap;
  /** Whether some accepted wake is not yet covered. */
  uncovered: boolean;
  seq: number;
  path: string[];
  /** Timers the chart armed (none today): their remaining times are part of every key. */
  timers: Timers;
  /** How many distinct event sequences reach this node. */
  ways?: number;
}

/** Every event the environment can deliver in `snap`, with absolute numbers filled in. */
function eventsFor(snap: Snap, seq: number, core = false): CoordinatorEvent[] {
  const current = snap.context.execution;
  if (core) {
    return [
      { type: "wake", seq },
      { type: "interrupt", seq },
      { type: "run.done", execution: current },
      { type: "run.failed", execution: current, error: "boom" },
      { type: "cleanup.done", execution: current },
    ];
  }
  return [
    { type: "wake", seq },
    { type: "interrupt", seq },
    { type: "run.done", execution: current },
    { type: "run.failed", execution: current, error: "boom" },
    { type: "run.done", execution: current - 1 },
    { type: "cleanup.done", execution: current },
    { type: "cleanup.done", execution: current, work: true },
    { type: "cleanup.done", execution: current - 1 },
  ];
}

const label = (e: CoordinatorEvent, current: number): string =>
  "execution" in e
    ? `${e.type}${e.execution === current ? "" : "(stale)"}${"work" in e && e.work ? "+work" : ""}`
    : e.type;

const startsRun = (actions: { type: string }[]) => actions.some((a) => a.type === "startRun");

/** What must hold in every reachable state; returns a description of the violation or null. */
function violation(node: Node): string | null {
  const { value, context } = node.snap;
  if (!node.uncovered) return null;
  if (value === "idle") return "idle with an uncovered wake";
  if (context.pendingWake === null)
    return `${String(value)} with an uncovered wake but no doorbell`;
  return null;
}

function key(node: Node): string {
  const { value, context } = node.snap;
  return JSON.stringify([
    value,
    context.pendingWake !== null,
    node.uncovered,
    timerKey(node.timers),
  ]);
}

/**
 * Bounded exhaustive search: every event sequence up to `depth` through the pure `transition()`,
 * checking the oracle after every step. With `merge`, nodes whose future is identical are merged
 * (same state, doorbell and oracle; absolute seq and execution numbers do not change what can
 * happen next); without it, every sequence of the six core events is walked, expanding each
 * concrete state (whole snapshot, oracle and depth) once and counting the sequences it stands for.
 */
function search(machine: AnyStateMachine, depth: number, merge = true) {
  const [initial] = initialTransition(machine as CoordinatorMachine);
  let frontier: Node[] = [{ snap: initial, uncovered: false, seq: 1, path: [], timers: noTimers }];
  const visited = new Set(frontier.map(key));
  const values = new Set<string>(["idle"]);
  let transitions = 0;
  let sequences = 0;
  const reachable: Node[] = [...frontier];
  const result = (counterexample: string[] | null) => ({
    counterexample,
    transitions,
    values,
    sequences,
    reachable,
  });
  for (let level = 0; level < depth && frontier.length > 0; level++) {
    const next: Node[] = [];
    const levelSeen = new Map<string, Node>();
    for (const node of frontier) {
      for (const event of eventsFor(node.snap, node.seq, !merge)) {
        const [snap, actions] = transition(machine as CoordinatorMachine, node.snap, event);
        transitions += 1;
        let uncovered = node.uncovered;
        if (event.type === "interrupt") uncovered = false;
        if (event.type === "wake") uncovered = true;
        const path = [...node.path, label(event, node.snap.context.execution)];
        if (startsRun(actions)) uncovered = false;
        const timed = stepTimers(node.timers, event.type, actions);
        if (timed.rearmed.length > 0) return result([...path, `→ ${timed.rearmed[0].id} re-armed`]);
        const child: Node = { snap, uncovered, seq: node.seq + 1, path, timers: timed.timers };
        const broken = violation(child);
        if (broken) return result([...path, `→ ${broken}`]);
        values.add(String(snap.value));
        if (!merge) {
          // Every sequence: only identical concrete states (same snapshot, oracle and depth, so
          // the same futures) are expanded once; an event that changed nothing is not extended.
          const concrete = JSON.stringify([
            snap.value,
            snap.context,
            uncovered,
            timerKey(child.timers),
          ]);
          const same =
            concrete ===
            JSON.stringify([
              node.snap.value,
              node.snap.context,
              node.uncovered,
              timerKey(node.timers),
            ]);
          const ways = node.ways ?? 1;
          sequences += ways;
          const twin = levelSeen.get(concrete);
          if (twin) twin.ways = (twin.ways ?? 1) + ways;
          else if (!same) {
            child.ways = ways;
            levelSeen.set(concrete, child);
            next.push(child);
          }
          continue;
        }
        const k = key(child);
        if (!visited.has(k)) {
          visited.add(k);
          reachable.push(child);
          next.push(child);
        }
      }
    }
    frontier = next;
  }
  return result(null);
}

describe("coordinator bounded exhaustive search", () => {
  it("no wake-up is ever lost: after EVERY sequence of up to 12 wake/interrupt/run/cleanup events, each accepted wake is covered by a running run or by the doorbell", () => {
    const result = search(coordinatorMachine, 12, false);
    expect(result.counterexample).toBeNull();
    expect(result.sequences).toBeGreaterThan(25_000_000); // ≈ 1 900 transition() calls
  });

  it("no wake-up is ever lost, to depth 12 with stale completions and the host's re-check, merging states with the same future", () => {
    const result = search(coordinatorMachine, 12);
    expect(result.counterexample).toBeNull();
    expect([...result.values].sort()).toEqual(["cleaning", "idle", "running", "stopping"]);
  });

  it("from every reachable state, delivering only run and cleanup completions ends idle with every accepted wake served by a run that started after it", () => {
    const { reachable } = search(coordinatorMachine, 12);
    expect(new Set(reachable.map((n) => n.snap.value)).size).toBe(4);
    for (const start of reachable) {
      let { snap } = start;
      let uncovered = start.uncovered;
      for (let step = 0; step < 8 && snap.value !== "idle"; step++) {
        const current = snap.context.execution;
        const event: CoordinatorEvent =
          snap.value === "cleaning"
            ? { type: "cleanup.done", execution: current }
            : { type: "run.done", execution: current };
        const [after, actions] = transition(coordinatorMachine, snap, event);
        if (startsRun(actions)) uncovered = false;
        snap = after;
      }
      expect(snap.value).toBe("idle");
      expect(uncovered).toBe(false);
    }
  });

  it("an interrupt clears the wakes submitted before it but never one submitted after it, even when delivered out of order", () => {
    const send = (snap: Snap, event: CoordinatorEvent) =>
      transition(coordinatorMachine, snap, event)[0];
    let snap = initialTransition(coordinatorMachine)[0];
    snap = send(snap, { type: "wake", seq: 1 });
    snap = send(snap, { type: "wake", seq: 2 });
    snap = send(snap, { type: "interrupt", seq: 3 });
    expect(snap.value).toBe("stopping");
    expect(snap.context.pendingWake).toBeNull();
    snap = send(snap, { type: "wake", seq: 5 });
    snap = send(snap, { type: "interrupt", seq: 4 });
    expect(snap.context.pendingWake).toEqual({ seq: 5 });
    snap = send(snap, { type: "run.done", execution: 1 });
    const [handedOver, actions] = transition(coordinatorMachine, snap, {
      type: "cleanup.done",
      execution: 1,
    });
    expect(handedOver.value).toBe("running");
    expect(handedOver.context).toMatchObject({ execution: 2, pendingWake: null });
    expect(startsRun(actions)).toBe(true);
  });

  it("the search FAILS on a mutant that drops a wake while running (a self-loop)", () => {
    expect(search(coordinatorDropsWake, 10, false).counterexample).not.toBeNull();
    expect(search(coordinatorDropsWake, 12).counterexample).toEqual([
      "wake",
      "wake",
      "→ running with an uncovered wake but no doorbell",
    ]);
  });

  it("the search FAILS on a mutant that goes idle after cleanup without answering the doorbell", () => {
    const { counterexample } = search(coordinatorIdleAfterCleanup, 12);
    expect(counterexample?.at(-1)).toMatch(/^→ idle with an uncovered wake/);
  });

  it("the search FAILS on a mutant whose interrupt also drops a wake submitted after it", () => {
    const { counterexample } = search(coordinatorInterruptDropsLaterWake, 12);
    expect(counterexample).toContain("interrupt");
    expect(counterexample?.at(-1)).toMatch(/uncovered wake/);
  });
});
