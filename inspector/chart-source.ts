import type { AnyStateMachine } from "xstate";
import { acceptanceMachine } from "../machines/acceptance.machine.ts";
import { batchMachine } from "../machines/batch.machine.ts";
import { sessionMachine } from "../machines/session.machine.ts";
import { toolCallMachine } from "../machines/tool-call.machine.ts";
import { turnMachine } from "../machines/turn.machine.ts";
import { chartOf } from "./chart.ts";
import { type GraphLayouter, layoutChart, type PlacedChart } from "./chart-layout.ts";

/**
 * Keel's own charts, by machine id: what a replayed session's actors ran (a replay has no live
 * actor to read the machine from).
 */
const BUILT_IN = new Map<string, AnyStateMachine>(
  [turnMachine, batchMachine, toolCallMachine, sessionMachine, acceptanceMachine].map((m) => [
    m.id,
    m as AnyStateMachine,
  ]),
);

/** Placed charts by their definition (as JSON): one layout per distinct chart per process. */
const placed = new Map<string, Promise<PlacedChart>>();

/** Whether an actor's logic is a state machine (it has a root state node). */
export function isMachine(logic: unknown): logic is AnyStateMachine {
  const root = (logic as { root?: { states?: unknown } } | null | undefined)?.root;
  return typeof root === "object" && root !== null && typeof root.states === "object";
}

/** Where the inspector finds the machine behind a machine id, and its placed chart. */
export interface ChartSource {
  /**
   * Remembers the machine a live actor runs (the first machine seen with an id wins): the
   * chart drawn is the one that ran, a test's variant included.
   */
  register(machine: AnyStateMachine): void;
  /** The placed chart of machine `id`: a live actor's machine, else Keel's chart of that id. */
  chart(id: string): Promise<PlacedChart>;
}

/** Creates a chart source; `layouter` replaces ELK (tests). */
export function createChartSource(layouter?: GraphLayouter): ChartSource {
  const live = new Map<string, AnyStateMachine>();
  return {
    register(machine) {
      if (!live.has(machine.id)) live.set(machine.id, machine);
    },
    chart(id) {
      const machine = live.get(id) ?? BUILT_IN.get(id);
      if (!machine) {
        return Promise.reject(
          new Error(`no statechart is known for machine "${id}" (no live actor ran it)`),
        );
      }
      const chart = chartOf(machine);
      const key = JSON.stringify(chart);
      let found = layouter ? undefined : placed.get(key);
      if (!found) {
        found = layoutChart(chart, layouter);
        if (!layouter) {
          placed.set(key, found);
          found.catch(() => placed.delete(key));
        }
      }
      return found;
    },
  };
}
