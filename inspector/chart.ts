import type { AnyStateMachine } from "xstate";

/**
 * A statechart as the inspector draws it, read from a machine's public definition
 * (`machine.root`: its state nodes, their transitions, `always` and `after` transitions and
 * invoked actors). Nothing here knows Keel's charts: a state or transition added to a machine
 * appears in the drawing without a change to the inspector.
 */
export interface Chart {
  /** The machine's id (`turn`, `batch`, `toolCall`, …). */
  id: string;
  /** Every state node but the root, parents before their children. */
  states: ChartState[];
  /** One edge per (source, target) pair; each lists the transitions it stands for. */
  edges: ChartEdge[];
}

export interface ChartState {
  /**
   * Its path from the root as a state value string, e.g. `running.sampling` (what a snapshot's
   * value reads as, see `stateString` in records.ts); states, edges and the page use it as id.
   */
  path: string;
  /** Its key within its parent, e.g. `sampling`. */
  key: string;
  /** The parent state's path; absent for the root's children. */
  parent?: string;
  type: "atomic" | "compound" | "parallel" | "final" | "history";
  /** It is its parent's initial state. */
  initial: boolean;
  /** Actors the state invokes while it is active (by their `src`). */
  invokes: string[];
  /** Transitions that change no state (they only run actions, or ignore the event). */
  stays: ChartTransition[];
}

export interface ChartTransition {
  /** The event type as XState delivers it (`xstate.after.<delay>.<state id>` for a delay). */
  event: string;
  /** What the drawing shows: the event, `after <delay>`, `always`, and the guard in brackets. */
  label: string;
  /** The guard's name (`not(isCurrentAttempt)` for a `not()` guard), if any. */
  guard?: string;
}

export interface ChartEdge {
  /** `<source path>→<target path>` */
  id: string;
  source: string;
  target: string;
  transitions: ChartTransition[];
}

/** The parts of a state node the chart reads (all public properties of XState's StateNode). */
interface NodeLike {
  id: string;
  key: string;
  type: ChartState["type"];
  path: string[];
  parent?: NodeLike;
  states: Record<string, NodeLike>;
  initial?: { target: readonly NodeLike[] };
  transitions: Map<string, readonly TransitionLike[]>;
  always?: readonly TransitionLike[];
  invoke: readonly { src: unknown; id?: string }[];
}

interface TransitionLike {
  eventType: string;
  guard?: unknown;
  target?: readonly NodeLike[];
  source: NodeLike;
}

const AFTER = /^xstate\.after\.([^.]+)\./;
const DONE_ACTOR = /^xstate\.done\.actor\.(.+)$/;
const ERROR_ACTOR = /^xstate\.error\.actor\.(.+)$/;

/** A short label for an event type: delays, invoked actors' done and error events. */
export function eventLabel(eventType: string): string {
  if (eventType === "") return "always";
  const after = AFTER.exec(eventType);
  if (after) return `after ${after[1]}`;
  const done = DONE_ACTOR.exec(eventType);
  if (done) return `done(${done[1]})`;
  const error = ERROR_ACTOR.exec(eventType);
  if (error) return `error(${error[1]})`;
  return eventType;
}

/**
 * A guard's name: a named guard by its name (`"isCancellable"` or `{ type }`), a guard built
 * with `not()`, `and()` or `or()` from its parts, an inline function by its function name.
 */
export function guardLabel(guard: unknown): string | undefined {
  if (guard === undefined || guard === null) return undefined;
  if (typeof guard === "string") return guard;
  if (typeof guard === "object" && typeof (guard as { type?: unknown }).type === "string") {
    return (guard as { type: string }).type;
  }
  if (typeof guard === "function") {
    const parts = (guard as { guards?: unknown }).guards;
    if (Array.isArray(parts)) {
      return `${guard.name}(${parts.map((g) => guardLabel(g) ?? "?").join(", ")})`;
    }
    return guard.name || "guard";
  }
  return "guard";
}

function transitionOf(t: TransitionLike): ChartTransition {
  const guard = guardLabel(t.guard);
  const event = t.eventType ?? "";
  const label = `${eventLabel(event)}${guard ? ` [${guard}]` : ""}`;
  return guard ? { event, label, guard } : { event, label };
}

/**
 * Reads `machine`'s chart from its definition. Transitions are listed in document order, so
 * the first of several guarded transitions on one event is the one XState tries first.
 * This is a pure function.
 */
export function chartOf(machine: AnyStateMachine): Chart {
  const root = machine.root as unknown as NodeLike;
  const states: ChartState[] = [];
  const edges = new Map<string, ChartEdge>();
  const visit = (node: NodeLike) => {
    for (const child of Object.values(node.states)) {
      const initial = node.initial?.target.some((t) => t === child) ?? false;
      const path = child.path.join(".");
      const stays: ChartTransition[] = [];
      const all = [...[...child.transitions.values()].flat(), ...(child.always ?? [])];
      for (const t of all) {
        const transition = transitionOf(t);
        const targets = t.target ?? [];
        if (targets.length === 0) {
          stays.push(transition);
          continue;
        }
        for (const target of targets) {
          const to = target.path.join(".");
          const id = `${path}→${to}`;
          let edge = edges.get(id);
          if (!edge) {
            edge = { id, source: path, target: to, transitions: [] };
            edges.set(id, edge);
          }
          edge.transitions.push(transition);
        }
      }
      states.push({
        path,
        key: child.key,
        ...(node === root ? {} : { parent: node.path.join(".") }),
        type: child.type,
        initial,
        invokes: child.invoke.map((i) => (typeof i.src === "string" ? i.src : (i.id ?? "actor"))),
        stays,
      });
      visit(child);
    }
  };
  visit(root);
  return { id: machine.id, states, edges: [...edges.values()] };
}
