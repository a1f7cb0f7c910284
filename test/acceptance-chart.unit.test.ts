import { describe, expect, it } from "vitest";
import { createActor } from "xstate";
import type { CheckEvidence, CheckKind } from "../contracts/acceptance.ts";
import {
  type AcceptanceContext,
  type AcceptanceEvent,
  type AcceptanceOutcome,
  acceptanceMachine,
  acceptanceStatus,
  evidenceOf,
  staleChecks,
} from "../machines/acceptance.machine.ts";

/**
 * The acceptance chart through its public shape: the pure functions the host reports with, and
 * the chart driven event by event with its effects recorded (what it asks the host to run, stop,
 * follow up and report). The exhaustive search (acceptance.model.test.ts) checks the invariants
 * over many paths; this file states each behaviour once, on the smallest path that shows it.
 */

const ev = (
  name: string,
  artifactVersion: string,
  passed = true,
  kind: CheckKind = "check",
): CheckEvidence => ({
  name,
  kind,
  passed,
  output: `${name} out`,
  startedAt: 1,
  durationMs: 2,
  artifactVersion,
});

const ctx = (
  checks: { name: string; kind: CheckKind }[],
  evidence: CheckEvidence[],
  version: string | undefined,
): AcceptanceContext => ({
  specVersion: 1,
  checks,
  maxRounds: 0,
  version,
  evidence: Object.fromEntries(evidence.map((e) => [e.name, e])),
  running: {},
  round: 0,
  loop: false,
  reason: "accept",
  interrupted: false,
});

const A = { name: "a", kind: "check" as const };
const B = { name: "b", kind: "check" as const };
const O = { name: "o", kind: "opinion" as const };

describe("acceptanceStatus", () => {
  it("passes when every check passed against the current version", () => {
    expect(acceptanceStatus(ctx([A, B], [ev("a", "v1"), ev("b", "v1")], "v1"))).toBe("passed");
  });

  it("never counts opinions: a failing or missing opinion leaves the checks' status", () => {
    expect(
      acceptanceStatus(ctx([A, O], [ev("a", "v1"), ev("o", "v1", false, "opinion")], "v1")),
    ).toBe("passed");
    expect(acceptanceStatus(ctx([A, O], [ev("a", "v1")], "v1"))).toBe("passed");
    expect(
      acceptanceStatus(ctx([A, O], [ev("a", "v1"), ev("o", "v0", true, "opinion")], "v1")),
    ).toBe("passed");
  });

  it("is stale when passing evidence was taken against another version (invariant 14 of docs/architecture.md)", () => {
    expect(acceptanceStatus(ctx([A], [ev("a", "v1")], "v2"))).toBe("stale");
    expect(acceptanceStatus(ctx([A], [ev("a", "v1..v2")], "v2"))).toBe("stale");
  });

  it("is stale when evidence exists but no version has been read", () => {
    expect(acceptanceStatus(ctx([A], [ev("a", "v1")], undefined))).toBe("stale");
  });

  it("is pending when a check has no evidence, and failed beats stale beats pending", () => {
    expect(acceptanceStatus(ctx([A, B], [ev("a", "v1")], "v1"))).toBe("pending");
    expect(acceptanceStatus(ctx([A, B], [ev("a", "v0")], "v1"))).toBe("stale");
    expect(acceptanceStatus(ctx([A, B], [ev("a", "v0"), ev("b", "v1", false)], "v1"))).toBe(
      "failed",
    );
    // Failing evidence against an older version does not fail the current one: it is stale.
    expect(acceptanceStatus(ctx([A], [ev("a", "v0", false)], "v1"))).toBe("stale");
  });
});

describe("evidenceOf and staleChecks", () => {
  it("lists the evidence in spec order, skipping checks without any and names not in the spec", () => {
    const context = ctx([B, O, A], [ev("a", "v1"), ev("z", "v1"), ev("b", "v0")], "v1");
    expect(evidenceOf(context)).toEqual({
      artifactVersion: "v1",
      checks: [ev("b", "v0"), ev("a", "v1")],
    });
    expect(evidenceOf(ctx([A], [], undefined))).toEqual({ artifactVersion: undefined, checks: [] });
  });

  it("names the checks, opinions included, whose evidence is missing or from another version", () => {
    const context = ctx(
      [A, B, O, { name: "c", kind: "check" }],
      [ev("a", "v1"), ev("b", "v0"), ev("c", "v0..v1")],
      "v1",
    );
    expect(staleChecks(context)).toEqual(["b", "o", "c"]);
    expect(staleChecks(ctx([A], [ev("a", "v1")], "v1"))).toEqual([]);
  });
});

interface Calls {
  runChecks: { names: string[]; round: number }[];
  abortChecks: undefined[];
  followUp: { round: number; failing: CheckEvidence[] }[];
  reported: AcceptanceOutcome[];
}

/** The chart with its effects recorded, started idle. */
function chart(checks = [A, B, O], maxRounds = 1) {
  const calls: Calls = { runChecks: [], abortChecks: [], followUp: [], reported: [] };
  const rec =
    <K extends keyof Calls>(type: K) =>
    (_: unknown, params: unknown): void => {
      (calls[type] as unknown[]).push(params);
    };
  const actor = createActor(
    acceptanceMachine.provide({
      actions: {
        runChecks: rec("runChecks"),
        abortChecks: rec("abortChecks"),
        followUp: rec("followUp"),
        reported: rec("reported"),
      },
    }),
    { input: { specVersion: 1, checks, maxRounds } },
  );
  actor.start();
  const send = (...events: AcceptanceEvent[]) => {
    for (const e of events) actor.send(e);
  };
  const snap = () => actor.getSnapshot();
  const of = <K extends keyof Calls>(type: K): Calls[K] => calls[type];
  const reports = () => calls.reported;
  return { actor, send, snap, of, reports };
}

const started = (name: string, version: string): AcceptanceEvent => ({
  type: "check.started",
  name,
  version,
});
const finished = (name: string, passed: boolean): AcceptanceEvent => ({
  type: "check.finished",
  name,
  passed,
  output: `${name} out`,
  startedAt: 1,
  durationMs: 2,
});
const read = (version: string): AcceptanceEvent => ({ type: "artifact.read", version });
const request = (
  names: string[],
  loop = false,
  reason: "turn" | "accept" | "handoff" = "accept",
): AcceptanceEvent => ({
  type: "checks.requested",
  names,
  loop,
  reason,
});
const done: AcceptanceEvent = { type: "checks.done" };
/** One check run against `version` with no read in between. */
const run = (name: string, version: string, passed: boolean): AcceptanceEvent[] => [
  started(name, version),
  finished(name, passed),
];

describe("acceptance chart: a round of checks", () => {
  it("runs the requested checks and reports what the evidence says", () => {
    const c = chart();
    c.send(read("v1"), request(["a", "b"], false, "handoff"));
    expect(c.snap().value).toBe("checking");
    expect(c.of("runChecks")).toEqual([{ names: ["a", "b"], round: 0 }]);
    c.send(...run("a", "v1", true), ...run("b", "v1", true), read("v1"), done);
    expect(c.snap().value).toBe("idle");
    expect(c.reports()).toEqual([
      {
        acceptance: "passed",
        evidence: {
          artifactVersion: "v1",
          checks: [
            {
              name: "a",
              kind: "check",
              passed: true,
              output: "a out",
              startedAt: 1,
              durationMs: 2,
              artifactVersion: "v1",
            },
            {
              name: "b",
              kind: "check",
              passed: true,
              output: "b out",
              startedAt: 1,
              durationMs: 2,
              artifactVersion: "v1",
            },
          ],
        },
        rounds: 0,
        reason: "handoff",
        interrupted: false,
      },
    ]);
    expect(c.of("followUp")).toEqual([]);
  });

  it("binds evidence to the version read when the check started; a read of the same version keeps it", () => {
    const c = chart();
    c.send(
      read("v1"),
      request(["a"]),
      started("a", "v1"),
      read("v1"),
      read("v1"),
      finished("a", true),
      done,
    );
    expect(evidenceOf(c.snap().context).checks[0]?.artifactVersion).toBe("v1");
    expect(c.reports()[0]?.acceptance).toBe("pending"); // b was never run
  });

  it("binds a check during which the artifact changed to `<start>..<last read>`, which never counts", () => {
    const c = chart([A]);
    c.send(
      read("v1"),
      request(["a"]),
      started("a", "v1"),
      read("v2"),
      read("v3"),
      finished("a", true),
      done,
    );
    expect(c.reports()[0]?.evidence.checks[0]?.artifactVersion).toBe("v1..v3");
    expect(c.reports()[0]?.acceptance).toBe("stale");
    // Even when the artifact is read back at the version the check started on.
    const d = chart([A]);
    d.send(
      read("v1"),
      request(["a"]),
      started("a", "v1"),
      read("v2"),
      read("v1"),
      finished("a", true),
      done,
    );
    expect(d.reports()[0]?.evidence.checks[0]?.artifactVersion).toBe("v1..v1");
    expect(d.reports()[0]?.acceptance).toBe("stale");
  });

  it("records an opinion's evidence with the kind the spec gives it", () => {
    const c = chart([A, O]);
    c.send(
      read("v1"),
      request(["o", "a"]),
      ...run("o", "v1", false),
      ...run("a", "v1", true),
      done,
    );
    expect(c.snap().context.evidence.o?.kind).toBe("opinion");
    expect(c.snap().context.evidence.a?.kind).toBe("check");
    expect(c.reports()[0]?.acceptance).toBe("passed");
  });

  it("ignores a finish of a check it did not see start", () => {
    const c = chart([A]);
    c.send(read("v1"), request(["a"]), finished("a", true));
    expect(c.snap().status).toBe("active");
    expect(c.snap().context.evidence).toEqual({});
    c.send(done);
    expect(c.reports()[0]?.acceptance).toBe("pending");
  });

  it("ignores check reports outside a run", () => {
    const c = chart([A]);
    c.send(read("v1"), ...run("a", "v1", true));
    expect(c.snap().context.evidence).toEqual({});
  });

  it("drops a check's earlier evidence when it starts again", () => {
    const c = chart([A]);
    c.send(read("v1"), request(["a"]), ...run("a", "v1", true), done);
    expect(c.reports()[0]?.acceptance).toBe("passed");
    c.send(request(["a"]), started("a", "v1"));
    expect(acceptanceStatus(c.snap().context)).toBe("pending");
  });

  it("reports a failing run once, without follow-up, when it does not loop", () => {
    const c = chart([A], 3);
    c.send(read("v1"), request(["a"], false), ...run("a", "v1", false), done);
    expect(c.snap().value).toBe("idle");
    expect(c.reports()).toHaveLength(1);
    expect(c.reports()[0]).toMatchObject({ acceptance: "failed", rounds: 0, interrupted: false });
    expect(c.of("followUp")).toEqual([]);
  });
});

describe("acceptance chart: interrupt", () => {
  it("stops the checks, ignores what they report while stopping, and reports what the evidence then says", () => {
    const c = chart([A, B]);
    c.send(
      read("v1"),
      request(["a", "b"], true, "turn"),
      ...run("a", "v1", true),
      started("b", "v1"),
    );
    c.send({ type: "acceptance.interrupt", reason: "user" });
    expect(c.snap().value).toBe("stopping");
    expect(c.of("abortChecks")).toHaveLength(1);
    c.send({ type: "acceptance.interrupt", reason: "again" }, finished("b", true));
    expect(c.of("abortChecks")).toHaveLength(1);
    expect(c.snap().context.evidence.b).toBeUndefined();
    expect(c.reports()).toEqual([]);
    c.send(done);
    expect(c.snap().value).toBe("idle");
    expect(c.reports()).toHaveLength(1);
    expect(c.reports()[0]).toMatchObject({
      acceptance: "pending",
      interrupted: true,
      reason: "turn",
      rounds: 0,
    });
    expect(c.of("followUp")).toEqual([]);
  });

  it("forgets the stopped checks: a late finish of one in the next run is not evidence", () => {
    const c = chart([A, B]);
    c.send(
      read("v1"),
      request(["a"]),
      started("a", "v1"),
      { type: "acceptance.interrupt", reason: "x" },
      done,
    );
    c.send(request(["b"]), finished("a", true), ...run("b", "v1", true), done);
    expect(c.snap().context.evidence.a).toBeUndefined();
    expect(c.reports()[1]?.acceptance).toBe("pending");
  });

  it("a new run after an interrupted one is not interrupted", () => {
    const c = chart([A]);
    c.send(read("v1"), request(["a"]), { type: "acceptance.interrupt", reason: "x" }, done);
    expect(c.reports()[0]?.interrupted).toBe(true);
    c.send(request(["a"]), ...run("a", "v1", true), done);
    expect(c.reports()[1]).toMatchObject({ acceptance: "passed", interrupted: false });
  });
});

describe("acceptance chart: the follow-up loop", () => {
  it("a passing loop run reports at once, without follow-up", () => {
    const c = chart([A], 2);
    c.send(read("v1"), request(["a"], true, "turn"), ...run("a", "v1", true), done);
    expect(c.snap().value).toBe("idle");
    expect(c.of("followUp")).toEqual([]);
    expect(c.reports()[0]).toMatchObject({ acceptance: "passed", rounds: 0 });
  });

  it("follows up with the failing and the stale evidence, then re-runs what does not count", () => {
    const c = chart([A, B, { name: "c", kind: "check" }, O], 1);
    c.send(read("v1"), request(["a", "b", "c", "o"], true, "turn"));
    c.send(...run("a", "v1", true), ...run("b", "v1", false));
    c.send(started("c", "v1"), read("v2"), finished("c", true)); // changed while it ran
    c.send(started("o", "v2"), finished("o", true), read("v2"), done);
    expect(c.snap().value).toBe("followingUp");
    expect(c.reports()).toEqual([]);
    const [fu] = c.of("followUp");
    expect(fu?.round).toBe(1);
    // a passed against v1, now stale; b failed; c's range never counts; o passed against v2.
    expect(fu?.failing.map((e) => [e.name, e.artifactVersion, e.passed])).toEqual([
      ["a", "v1", true],
      ["b", "v1", false],
      ["c", "v1..v2", true],
    ]);
    // The follow-up turn completes: the checks whose evidence does not count for v3 run again.
    c.send(read("v3"), { type: "round.ended", status: "completed" });
    expect(c.snap().value).toBe("checking");
    expect(c.of("runChecks")[1]).toEqual({ names: ["a", "b", "c", "o"], round: 1 });
  });

  it("re-runs only the checks whose evidence does not count after the follow-up", () => {
    // The follow-up left the artifact at v1: b's failure still counts for it, a has none.
    const c = chart([A, B], 1);
    c.send(read("v1"), request(["b"], true, "turn"), ...run("b", "v1", false), done);
    c.send(read("v1"), { type: "round.ended", status: "completed" });
    expect(c.of("runChecks")[1]).toEqual({ names: ["a"], round: 1 });
  });

  it("sends at most maxRounds follow-ups, then reports the failure with the rounds sent", () => {
    const c = chart([A], 1);
    c.send(read("v1"), request(["a"], true, "turn"), ...run("a", "v1", false), done);
    expect(c.of("followUp")).toHaveLength(1);
    c.send({ type: "round.ended", status: "completed" }, ...run("a", "v1", false), done);
    expect(c.snap().value).toBe("idle");
    expect(c.of("followUp")).toHaveLength(1);
    expect(c.reports()).toEqual([
      expect.objectContaining({ acceptance: "failed", rounds: 1, reason: "turn" }),
    ]);
  });

  it("with maxRounds 0 a loop run never follows up", () => {
    const c = chart([A], 0);
    c.send(read("v1"), request(["a"], true, "turn"), ...run("a", "v1", false), done);
    expect(c.snap().value).toBe("idle");
    expect(c.of("followUp")).toEqual([]);
    expect(c.reports()[0]).toMatchObject({ acceptance: "failed", rounds: 0 });
  });

  it("a follow-up passing the checks ends the loop as passed", () => {
    const c = chart([A], 3);
    c.send(read("v1"), request(["a"], true, "turn"), ...run("a", "v1", false), done);
    c.send(read("v2"), { type: "round.ended", status: "completed" }, ...run("a", "v2", true), done);
    expect(c.of("followUp")).toHaveLength(1);
    expect(c.reports()).toEqual([expect.objectContaining({ acceptance: "passed", rounds: 1 })]);
  });

  it("a follow-up turn that runs out of budget gets its partial work checked once, and the loop ends", () => {
    const c = chart([A], 3);
    c.send(read("v1"), request(["a"], true, "turn"), ...run("a", "v1", false), done);
    c.send(read("v2"), { type: "round.ended", status: "budget_exhausted" });
    expect(c.snap().value).toBe("checking");
    expect(c.of("runChecks")).toHaveLength(2);
    // Still failing: no second follow-up although maxRounds allows three.
    c.send(...run("a", "v2", false), done);
    expect(c.snap().value).toBe("idle");
    expect(c.of("followUp")).toHaveLength(1);
    expect(c.reports()).toEqual([
      expect.objectContaining({ acceptance: "failed", rounds: 1, interrupted: false }),
    ]);
    // Passing: the run's acceptance is that of its partial work.
    const d = chart([A], 3);
    d.send(read("v1"), request(["a"], true, "turn"), ...run("a", "v1", false), done);
    d.send(read("v2"), { type: "round.ended", status: "budget_exhausted" });
    d.send(...run("a", "v2", true), done);
    expect(d.reports()).toEqual([expect.objectContaining({ acceptance: "passed", rounds: 1 })]);
    // A later loop run may follow up again.
    d.send(request(["a"], true, "turn"), ...run("a", "v2", false), done);
    expect(d.of("followUp")).toHaveLength(2);
  });

  for (const status of ["failed", "cancelled"] as const) {
    it(`a follow-up turn that ends ${status} ends the run without re-checking`, () => {
      const c = chart([A], 3);
      c.send(read("v1"), request(["a"], true, "turn"), ...run("a", "v1", false), done);
      c.send({ type: "round.ended", status });
      expect(c.snap().value).toBe("idle");
      expect(c.of("runChecks")).toHaveLength(1);
      expect(c.reports()).toEqual([
        expect.objectContaining({ acceptance: "failed", rounds: 1, interrupted: false }),
      ]);
    });
  }

  for (const status of ["completed", "budget_exhausted"] as const) {
    it(`an interrupt after the follow-up turn ended ${status} (while its version is read) ends the run without checking`, () => {
      const c = chart([A], 3);
      c.send(read("v1"), request(["a"], true, "turn"), ...run("a", "v1", false), done);
      c.send({ type: "acceptance.interrupt", reason: "user" });
      c.send(read("v2"), { type: "round.ended", status });
      expect(c.snap().value).toBe("idle");
      expect(c.of("runChecks")).toHaveLength(1);
      expect(c.reports()).toEqual([
        expect.objectContaining({ interrupted: true, rounds: 1, acceptance: "stale" }),
      ]);
    });
  }

  it("an interrupt during the follow-up turn marks the run interrupted; the turn's end reports it", () => {
    const c = chart([A], 3);
    c.send(read("v1"), request(["a"], true, "turn"), ...run("a", "v1", false), done);
    c.send({ type: "acceptance.interrupt", reason: "user" });
    expect(c.snap().value).toBe("followingUp");
    expect(c.of("abortChecks")).toEqual([]); // the interrupt goes to the turn itself
    c.send({ type: "round.ended", status: "cancelled" });
    expect(c.reports()).toEqual([
      expect.objectContaining({ acceptance: "failed", interrupted: true, rounds: 1 }),
    ]);
  });
});

describe("acceptance chart: restored evidence and spec changes", () => {
  it("restores evidence of the spec's checks with the same kind, and counts it only for its version", () => {
    const c = chart([A, B, O]);
    c.send({
      type: "evidence.restored",
      evidence: [
        ev("a", "v1"),
        ev("b", "v1", true, "opinion"),
        ev("o", "v1", false, "opinion"),
        ev("z", "v1"),
      ],
    });
    expect(Object.keys(c.snap().context.evidence).sort()).toEqual(["a", "o"]);
    expect(c.snap().context.evidence.a).toEqual(ev("a", "v1"));
    c.send(read("v1"));
    expect(acceptanceStatus(c.snap().context)).toBe("pending"); // b has none
    c.send({ type: "evidence.restored", evidence: [ev("b", "v1")] });
    expect(acceptanceStatus(c.snap().context)).toBe("passed"); // a kept, b added
    c.send(read("v2"));
    expect(acceptanceStatus(c.snap().context)).toBe("stale");
  });

  it("a spec change replaces the checks and drops every earlier evidence", () => {
    const c = chart([A]);
    c.send(read("v1"), request(["a"]), ...run("a", "v1", true), done);
    expect(acceptanceStatus(c.snap().context)).toBe("passed");
    c.send({ type: "spec.changed", specVersion: 2, checks: [A, B] });
    const { context } = c.snap();
    expect(context.specVersion).toBe(2);
    expect(context.checks).toEqual([A, B]);
    expect(context.evidence).toEqual({});
    expect(acceptanceStatus(context)).toBe("pending");
    expect(staleChecks(context)).toEqual(["a", "b"]);
  });
});

describe("acceptance chart: names", () => {
  it("the chart and its states are named acceptance.* (the session's inspector sees them)", () => {
    expect(acceptanceMachine.id).toBe("acceptance");
    expect(Object.values(acceptanceMachine.states).map((s) => s.id)).toEqual([
      "acceptance.idle",
      "acceptance.checking",
      "acceptance.stopping",
      "acceptance.followingUp",
    ]);
    expect(
      createActor(acceptanceMachine, {
        input: { specVersion: 1, checks: [], maxRounds: 0 },
      }).getSnapshot().value,
    ).toBe("idle");
  });
});
