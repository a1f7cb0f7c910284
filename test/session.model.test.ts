import { describe, expect, it } from "vitest";
import { initialTransition, type SnapshotFrom, transition } from "xstate";
import { type SessionMachine, sessionMachine } from "../machines/session.machine.ts";
import type { SessionChartEvent } from "../machines/session.types.ts";
import {
  closesUnderTakeover,
  dropsForwarded,
  editsLogLetGo,
  idleAfterCleanup,
  runsWithoutInputs,
  secondRunner,
  sleepsUnderEdit,
} from "./support/mutants/session.mutants.ts";

type Snap = SnapshotFrom<SessionMachine>;

/**
 * The environment's side of the session, computed from the events it delivered and the effects
 * the chart ordered, never read from the chart's context: the oracle (TESTING.md).
 */
interface World {
  /** Runnable inputs in the inbox (what a writer's `runnable` counts say). */
  queued: number;
  /** Effects in flight: a preparation, a turn, a cleanup, a checkpoint, a close. */
  preparing: boolean;
  running: boolean;
  cleaning: boolean;
  checkpointing: boolean;
  closing: boolean;
  /** The log is in memory (false after `letGo` until `reopen`). */
  logHeld: boolean;
  /** Edits the chart accepted and that have not ended. */
  edits: number;
  /** A follower's prompts waiting for the owner; adopted by a takeover. */
  forwarded: number;
  /** Prompts this process must answer (adopted forwards and queued prompts). */
  waiters: number;
  takeoverInFlight: boolean;
}

interface Node {
  snap: Snap;
  world: World;
  path: string[];
}

const start: World = {
  queued: 0,
  preparing: false,
  running: false,
  cleaning: false,
  checkpointing: false,
  closing: false,
  logHeld: true,
  edits: 0,
  forwarded: 0,
  waiters: 0,
  takeoverInFlight: false,
};

const inRole = (snap: Snap, role: string) => snap.matches({ open: { role } } as never);
const writes = (snap: Snap) => inRole(snap, "solo") || inRole(snap, "owner");

/** Every event the host could send in `node`, each with what it changes in the world first. */
function eventsFor({ snap, world }: Node): [SessionChartEvent, Partial<World>][] {
  const ctx = snap.context;
  const out: [SessionChartEvent, Partial<World>][] = [];
  if (snap.matches("opening")) {
    for (const role of ["solo", "owner", "follower"] as const) {
      out.push([{ type: "opened", role, runnable: world.queued }, {}]);
    }
    out.push([
      { type: "wake", seq: 1, runnable: world.queued + 1 },
      { queued: world.queued + 1, waiters: world.waiters + 1 },
    ]);
  }
  if (snap.matches("open")) {
    if (writes(snap)) {
      out.push([
        { type: "wake", seq: 1, runnable: world.queued + 1 },
        { queued: world.queued + 1, waiters: world.waiters + 1 },
      ]);
      out.push([{ type: "interrupt", seq: 2 }, { queued: 0 }]);
    } else {
      out.push([{ type: "forward" }, { forwarded: world.forwarded + 1 }]);
    }
    if (world.forwarded > 0 && inRole(snap, "follower")) {
      out.push([{ type: "forward.answered" }, { forwarded: world.forwarded - 1 }]);
    }
    out.push([{ type: "edit.begin" }, {}]);
    if (world.edits > 0) out.push([{ type: "edit.end" }, { edits: world.edits - 1 }]);
    out.push([{ type: "sleep", allowed: true }, {}]);
    out.push([{ type: "rouse" }, {}]);
    if (inRole(snap, "owner")) {
      out.push([{ type: "lease.lost" }, { queued: 0 }]);
      out.push([{ type: "role.follower" }, { queued: 0 }]);
    }
    if (inRole(snap, "follower"))
      out.push([{ type: "takeover.begin" }, { takeoverInFlight: true }]);
    if (inRole(snap, "takingOver")) {
      out.push([
        { type: "takeover.done", runnable: world.queued + world.forwarded },
        { takeoverInFlight: false, queued: world.queued + world.forwarded },
      ]);
      out.push([{ type: "takeover.failed" }, { takeoverInFlight: false }]);
    }
    out.push([{ type: "close" }, {}]);
  }
  if (snap.matches({ closing: "awaitingTakeover" })) {
    out.push([{ type: "takeover.done", runnable: world.queued }, { takeoverInFlight: false }]);
    out.push([{ type: "takeover.failed" }, { takeoverInFlight: false }]);
  }
  if (world.preparing) {
    out.push([
      { type: "turn.ready", execution: ctx.execution, runnable: world.queued },
      { preparing: false },
    ]);
  }
  if (world.running) {
    out.push([{ type: "turn.done", execution: ctx.execution }, { running: false }]);
    out.push([
      { type: "turn.failed", execution: ctx.execution, error: "boom" },
      { running: false },
    ]);
  }
  if (world.cleaning) {
    out.push([
      { type: "cleanup.done", execution: ctx.execution, runnable: world.queued },
      { cleaning: false },
    ]);
  }
  if (world.checkpointing) {
    out.push([{ type: "checkpoint.written", unchanged: true }, { checkpointing: false }]);
    out.push([{ type: "checkpoint.written", unchanged: false }, { checkpointing: false }]);
    out.push([{ type: "checkpoint.failed" }, { checkpointing: false }]);
  }
  if (world.closing) out.push([{ type: "close.done" }, { closing: false }]);
  return out;
}

/** Applies the chart's effects to the world; returns a violation, or null. */
function apply(
  world: World,
  before: Snap,
  after: Snap,
  event: SessionChartEvent,
  actions: { type: string }[],
): string | null {
  const editsBefore = before.context.edits;
  if (event.type === "edit.begin" && after.context.edits > editsBefore) {
    world.edits += 1;
  }
  for (const { type } of actions) {
    switch (type) {
      case "prepareTurn":
        if (!world.logHeld) return "a turn prepared on a log the session let go";
        world.preparing = true;
        break;
      case "runTurn":
        if (world.running) return "a second turn started while one runs (one runner)";
        if (world.queued === 0) return "an execution without a turn: nothing was runnable";
        if (!world.logHeld) return "a turn ran on a log the session let go";
        world.running = true;
        world.waiters = Math.max(0, world.waiters - world.queued);
        world.queued = 0;
        break;
      case "startCleanup":
        world.cleaning = true;
        break;
      case "writeCheckpoint":
        world.checkpointing = true;
        break;
      case "letGo":
        if (world.edits > 0) return "the session slept under an edit";
        if (world.running || world.preparing) return "the session slept under a turn";
        world.logHeld = false;
        break;
      case "reopen":
        world.logHeld = true;
        break;
      case "adoptForwarded":
        world.waiters += world.forwarded;
        world.forwarded = 0;
        break;
      case "startClose":
        world.closing = true;
        break;
      case "settleWaiters":
        world.waiters = 0;
        world.forwarded = 0;
        break;
    }
  }
  // An edit the chart accepted writes through the log: it must be in memory.
  if (event.type === "edit.begin" && after.context.edits > editsBefore && !world.logHeld) {
    return "an edit wrote through a log the session let go";
  }
  if (after.status === "done") {
    if (world.takeoverInFlight)
      return "closed while a takeover still loads the log: its waiters are adopted after the close answered them";
    if (world.waiters > 0 || world.forwarded > 0) return "closed with a waiter left unanswered";
  }
  // Runnable inputs with nobody to run them, and nothing in flight that will look again.
  const quiescent =
    after.matches({ open: { work: "idle" } }) &&
    world.edits === 0 &&
    writes(after) &&
    !world.preparing &&
    !world.running &&
    !world.cleaning;
  if (quiescent && world.queued > 0) return "idle with runnable inputs (a lost wake-up)";
  if (
    event.type === "takeover.done" &&
    before.context.forwarded > 0 &&
    !actions.some((a) => a.type === "adoptForwarded")
  ) {
    return "a takeover ended without adopting the prompts this process forwarded";
  }
  return null;
}

function key(node: Node): string {
  const { snap, world } = node;
  const {
    execution: _e,
    turns: _t,
    lastError: _l,
    lastOutcome: _o,
    pendingWake,
    ...ctx
  } = snap.context;
  return JSON.stringify([snap.value, ctx, pendingWake !== null, world]);
}

/** Bounded exhaustive search of the session chart's regions' product, up to `depth` events. */
function search(machine: SessionMachine, depth: number) {
  const [initial] = initialTransition(machine, {});
  let frontier: Node[] = [{ snap: initial, world: { ...start }, path: [] }];
  const seen = new Set(frontier.map(key));
  const states = new Set<string>();
  let transitions = 0;
  for (let level = 0; level < depth && frontier.length > 0; level++) {
    const next: Node[] = [];
    for (const node of frontier) {
      for (const [event, change] of eventsFor(node)) {
        const [snap, actions] = transition(machine, node.snap, event);
        transitions += 1;
        const world = { ...node.world, ...change };
        const path = [
          ...node.path,
          event.type + ("runnable" in event ? `(${event.runnable})` : ""),
        ];
        const broken = apply(world, node.snap, snap, event, actions);
        if (broken) return { counterexample: [...path, `→ ${broken}`], transitions, states };
        states.add(JSON.stringify(snap.value));
        const child = { snap, world, path };
        const k = key(child);
        if (seen.has(k)) continue;
        seen.add(k);
        next.push(child);
      }
    }
    frontier = next;
  }
  return { counterexample: null, transitions, states };
}

describe("the session chart (bounded exhaustive search over its regions' product)", () => {
  const depth = 9;

  it("no lost wake-up, one runner, no execution without a turn, no sleep under an edit or a turn, no write through a log let go, and a close answers every waiter", () => {
    const result = search(sessionMachine, depth);
    expect(result.counterexample?.join(" ")).toBeUndefined();
    // The search reached every region's states, not only the work region's.
    const all = [...result.states].join(" ");
    for (const name of [
      "checkpointing",
      "asleep",
      "takingOver",
      "editing",
      "held",
      "stopping",
      "awaitingTakeover",
    ]) {
      expect(all).toContain(name);
    }
    expect(result.transitions).toBeGreaterThan(10_000);
  });

  const mutants: [string, SessionMachine, RegExp][] = [
    ["a sleep that ignores an edit", sleepsUnderEdit, /slept under an edit/],
    ["an edit while asleep without a reopen", editsLogLetGo, /let go/],
    ["a second runner on a wake during a turn", secondRunner, /second turn/],
    ["a turn run when nothing was runnable", runsWithoutInputs, /execution without a turn/],
    ["a close that does not wait for a takeover", closesUnderTakeover, /takeover/],
    ["a takeover that forgets the forwarded prompts", dropsForwarded, /forwarded|unanswered/],
    ["a handover that ignores the inbox", idleAfterCleanup, /lost wake-up/],
  ];
  for (const [name, mutant, why] of mutants) {
    it(`catches ${name}`, () => {
      const result = search(mutant, depth);
      expect(result.counterexample).not.toBeNull();
      expect(result.counterexample!.at(-1)).toMatch(why);
    });
  }
});
