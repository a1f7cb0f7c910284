import { describe, expect, it } from "vitest";
import { initialTransition, type SnapshotFrom, transition } from "xstate";
import { AcceptanceHost } from "../actors/acceptance.ts";
import { declaredAcceptanceEffects } from "../actors/charts.ts";
import {
  type AcceptanceEvent,
  acceptanceMachine,
  acceptanceStatus,
} from "../machines/acceptance.machine.ts";
import {
  bindsFinishVersionAcceptanceMachine,
  ignoresChangeWhileRunningAcceptanceMachine,
  keepsInterruptedEvidenceAcceptanceMachine,
  unboundedLoopAcceptanceMachine,
} from "./support/mutants/acceptance.mutants.ts";

type Machine = typeof acceptanceMachine;
type Snap = SnapshotFrom<Machine>;
type Content = "A" | "B";

/**
 * The environment and the oracle, computed from the events the search delivered, never from the
 * chart: the files' content, the version the host last read (what the chart may know), each
 * check's runs and what they saw.
 */
interface World {
  content: Content;
  known: Content | undefined;
  /** Checks running: the content they started on, and whether a read during them saw another. */
  running: Record<string, { start: Content; sawChange: boolean }>;
  /** The last run of each check that finished outside an interrupt. */
  last: Record<string, { passed: boolean; start: Content; sawChange: boolean }>;
  /** Checks that were running when an interrupt stopped them, not started since. */
  interrupted: string[];
  followUps: number;
  reports: number;
  requests: number;
}

interface Node {
  snap: Snap;
  world: World;
  path: string[];
}

const CHECKS = [
  { name: "a", kind: "check" as const },
  { name: "o", kind: "opinion" as const },
];
const MAX_ROUNDS = 1;

/** A delivery: what the host would send, in order, for one thing that happens. */
interface Step {
  label: string;
  events: AcceptanceEvent[];
  world: (w: World) => World;
}

const read = (w: World): AcceptanceEvent => ({ type: "artifact.read", version: w.content });
const noteRead = (w: World): World => {
  const running = { ...w.running };
  for (const [n, r] of Object.entries(running))
    if (r.start !== w.content) running[n] = { ...r, sawChange: true };
  return { ...w, known: w.content, running };
};

function steps(snap: Snap, w: World): Step[] {
  const out: Step[] = [
    {
      label: "write",
      events: [],
      world: (x) => ({ ...x, content: x.content === "A" ? "B" : "A" }),
    },
    { label: "read", events: [read(w)], world: noteRead },
  ];
  if (snap.matches("idle")) {
    for (const loop of [false, true]) {
      out.push({
        label: `request(${loop ? "loop" : "once"})`,
        events: [read(w), { type: "checks.requested", names: ["a", "o"], loop, reason: "turn" }],
        world: (x) => ({ ...noteRead(x), requests: x.requests + 1 }),
      });
    }
  }
  const checking = snap.matches("checking");
  const stopping = snap.matches("stopping");
  if (checking) {
    for (const { name } of CHECKS) {
      if (w.running[name]) continue;
      out.push({
        label: `start(${name})`,
        events: [read(w), { type: "check.started", name, version: w.content }],
        world: (x) => {
          const y = noteRead(x);
          return {
            ...y,
            running: { ...y.running, [name]: { start: x.content, sawChange: false } },
            interrupted: y.interrupted.filter((n) => n !== name),
          };
        },
      });
    }
    out.push({
      label: "interrupt",
      events: [{ type: "acceptance.interrupt", reason: "x" }],
      world: (x) => x,
    });
  }
  if (checking || stopping) {
    for (const name of Object.keys(w.running)) {
      for (const passed of [true, false]) {
        out.push({
          label: `finish(${name},${passed ? "pass" : "fail"})`,
          events: [
            read(w),
            { type: "check.finished", name, passed, output: "", startedAt: 0, durationMs: 1 },
          ],
          world: (x) => {
            const y = noteRead(x);
            const { [name]: run, ...running } = y.running;
            // In `stopping` the check was interrupted: a late report is not a finished run.
            if (stopping) return { ...y, running };
            return { ...y, running, last: { ...y.last, [name]: { passed, ...run } } };
          },
        });
      }
    }
    if (Object.keys(w.running).length === 0 || stopping) {
      out.push({ label: "done", events: [{ type: "checks.done" }], world: (x) => x });
    }
  }
  if (snap.matches("followingUp")) {
    for (const status of ["completed", "cancelled", "budget_exhausted"] as const) {
      out.push({
        label: `round.ended(${status})`,
        events: [read(w), { type: "round.ended", status }],
        world: noteRead,
      });
    }
  }
  return out;
}

/** What must hold after every delivery; a description of the violation, or null. */
function violation(snap: Snap, w: World): string | null {
  const ctx = snap.context;
  if (acceptanceStatus(ctx) === "passed") {
    for (const { name, kind } of CHECKS) {
      if (kind !== "check") continue;
      const run = w.last[name];
      if (!run?.passed) return `passed without a passing run of ${name}`;
      if (run.start !== w.known)
        return `passed on ${w.known} with ${name}'s evidence taken on ${run.start} (invariant 14 of docs/architecture.md)`;
      if (run.sawChange)
        return `passed with ${name}'s run that saw the artifact change (invariant 14 of docs/architecture.md)`;
    }
  }
  for (const name of w.interrupted) {
    if (ctx.evidence[name]) return `the interrupted check ${name} left evidence`;
  }
  if (ctx.round > MAX_ROUNDS) return `round ${ctx.round} > maxRounds ${MAX_ROUNDS}`;
  if (w.followUps > MAX_ROUNDS * w.requests)
    return `${w.followUps} follow-ups for ${w.requests} run(s)`;
  if (w.reports > w.requests) return `${w.reports} reports for ${w.requests} run(s)`;
  if (snap.matches("idle") && w.reports !== w.requests)
    return `idle after ${w.requests} run(s) with ${w.reports} report(s)`;
  return null;
}

function search(
  machine: Machine,
  depth: number,
): { violation: string; path: string[] } | { states: number } {
  const [snap0] = initialTransition(machine, {
    specVersion: 1,
    checks: CHECKS,
    maxRounds: MAX_ROUNDS,
  });
  const world0: World = {
    content: "A",
    known: undefined,
    running: {},
    last: {},
    interrupted: [],
    followUps: 0,
    reports: 0,
    requests: 0,
  };
  const seen = new Set<string>();
  let frontier: Node[] = [{ snap: snap0, world: world0, path: [] }];
  for (let d = 0; d < depth; d++) {
    const next: Node[] = [];
    for (const node of frontier) {
      for (const step of steps(node.snap, node.world)) {
        let snap = node.snap;
        let world = step.world(node.world);
        for (const event of step.events) {
          const [after, actions] = transition(machine, snap, event);
          snap = after;
          for (const a of actions) {
            if (a.type === "followUp") world = { ...world, followUps: world.followUps + 1 };
            if (a.type === "reported") world = { ...world, reports: world.reports + 1 };
            if (a.type === "abortChecks")
              world = {
                ...world,
                interrupted: [...world.interrupted, ...Object.keys(world.running)],
              };
          }
        }
        // Interrupted checks are killed: the host reports `done` once they are gone.
        if (step.label === "done" && node.snap.matches("stopping"))
          world = { ...world, running: {} };
        const path = [...node.path, step.label];
        const bad = violation(snap, world);
        if (bad) return { violation: bad, path };
        const key = JSON.stringify([
          snap.value,
          snap.context.version,
          snap.context.evidence,
          snap.context.running,
          snap.context.round,
          snap.context.loop,
          world,
        ]);
        if (seen.has(key)) continue;
        seen.add(key);
        next.push({ snap, world, path });
      }
    }
    frontier = next;
  }
  return { states: seen.size };
}

describe("acceptance chart: every interleaving of checks, writes, reads, interrupts and follow-ups", () => {
  it("evidence from an older artifact version never counts as passed; interrupted checks leave none; the loop stops at maxRounds (depth 8)", () => {
    const result = search(acceptanceMachine, 8);
    expect(result).toEqual({ states: expect.any(Number) });
    expect((result as { states: number }).states).toBeGreaterThan(1000);
  });

  it.each([
    [
      "binds evidence to the version known when the check finished",
      bindsFinishVersionAcceptanceMachine,
      /invariant 14 of docs\/architecture\.md/,
    ],
    [
      "does not note a change read while a check runs",
      ignoresChangeWhileRunningAcceptanceMachine,
      /saw the artifact change/,
    ],
    [
      "keeps an interrupted check's late report as evidence",
      keepsInterruptedEvidenceAcceptanceMachine,
      /interrupted check|without a passing run/,
    ],
    ["loops past maxRounds", unboundedLoopAcceptanceMachine, /maxRounds|follow-ups/],
  ])("the search catches a chart that %s", (_name, mutant, expected) => {
    const result = search(mutant, 8);
    expect(result).toMatchObject({ violation: expect.stringMatching(expected) });
  });
});

describe("acceptance chart hosting", () => {
  it("every effect the acceptance chart declares is a method of the session's acceptance host", () => {
    const effects = declaredAcceptanceEffects();
    expect(effects.sort()).toEqual(["abortChecks", "followUp", "reported", "runChecks"]);
    for (const name of effects) {
      expect(typeof (AcceptanceHost.prototype as unknown as Record<string, unknown>)[name]).toBe(
        "function",
      );
    }
  });
});
