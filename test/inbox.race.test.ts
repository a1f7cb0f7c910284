import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { InboxLane } from "../contracts/status.ts";
import {
  type DrainMode,
  drain,
  emptyInbox,
  type InboxEvent,
  lanesToDrain,
  type PollPoint,
  queued,
  receive,
} from "../machines/policies/inbox.ts";

/** Fixed so every run explores the same interleavings; change it to explore others. */
const SEED = 0x6b65656c;

type Policy = (point: PollPoint) => readonly InboxLane[];

interface TurnPlan {
  batches: { calls: number; order: boolean[]; slowPrep: boolean }[];
  arrivals: { gap: number; lane: "next-step" | "next-turn" }[];
  mode: DrainMode;
}

const planArb: fc.Arbitrary<TurnPlan> = fc.record({
  batches: fc.array(
    fc.record({
      calls: fc.integer({ min: 1, max: 3 }),
      order: fc.array(fc.boolean(), { minLength: 1, maxLength: 6 }),
      slowPrep: fc.boolean(),
    }),
    { maxLength: 4 },
  ),
  arrivals: fc.array(
    fc.record({ gap: fc.nat({ max: 40 }), lane: fc.constantFrom("next-step", "next-turn") }),
    { maxLength: 8 },
  ),
  mode: fc.constantFrom<DrainMode>("all", "one-at-a-time"),
});

/** The points of one turn: per batch, calls start and finish in a random interleaving. */
function skeleton(plan: TurnPlan): PollPoint[] {
  const points: PollPoint[] = [{ type: "turn.started" }];
  for (const batch of plan.batches) {
    points.push({ type: "sampling" });
    let started = 0;
    let results = 0;
    for (let j = 0; results < batch.calls; j++) {
      const canStart = started < batch.calls;
      const canFinish = results < started;
      if (canStart && (!canFinish || batch.order[j % batch.order.length])) {
        points.push({ type: "call.started" });
        started += 1;
      } else {
        points.push({ type: "call.result" });
        results += 1;
      }
    }
    points.push({ type: "batch.committed" });
    if (batch.slowPrep) points.push({ type: "step.prepared", pendingBefore: false });
  }
  points.push({ type: "sampling" }, { type: "turn.natural_end" });
  return points;
}

/**
 * Runs one turn under `policy`, with inbox arrivals before the given points, and checks
 * invariant §10.11 after every poll. Returns the first violation, or null.
 */
function simulateTurn(plan: TurnPlan, policy: Policy): string | null {
  const points = skeleton(plan);
  let inbox = emptyInbox();
  let open = 0;
  let uncommitted = 0;
  let drainedAtCommit = false;
  let arrivedDuringPrep = false;
  const length = points.length; // arrivals land within the planned points
  for (let at = 0; at < points.length; at++) {
    let point = points[at];
    for (const [i, a] of plan.arrivals.entries()) {
      if (a.gap % length !== at) continue;
      const event: InboxEvent = { id: `m${i}`, source: "user", lane: a.lane, body: "", seq: i };
      inbox = receive(inbox, event).inbox;
      if (point.type === "step.prepared" && a.lane === "next-step") arrivedDuringPrep = true;
    }
    if (point.type === "call.started") open += 1;
    if (point.type === "call.result") {
      open -= 1;
      uncommitted += 1;
    }
    if (point.type === "batch.committed") uncommitted = 0;
    if (point.type === "step.prepared") point = { ...point, pendingBefore: drainedAtCommit };
    const safe = open === 0 && uncommitted === 0 && point.type !== "sampling";
    const steerQueued = queued(inbox, "next-step").length > 0;
    let took: InboxLane | null = null;
    for (const lane of policy(point)) {
      const result = drain(inbox, lane, plan.mode);
      if (result.events.length === 0) continue;
      inbox = result.inbox;
      took = lane;
      break;
    }
    const where = `${point.type} (open ${open}, uncommitted ${uncommitted})`;
    if (took === "next-step" && !safe) return `steering drained at ${where}`;
    if (took === "next-turn" && point.type !== "turn.natural_end") {
      return `follow-up drained mid-turn at ${where}`;
    }
    if (point.type === "batch.committed") drainedAtCommit = took === "next-step";
    if (point.type === "step.prepared") {
      if (!point.pendingBefore && arrivedDuringPrep && took !== "next-step") {
        return "a steer that arrived during a slow preparation missed the next model call";
      }
      arrivedDuringPrep = false;
    }
    if (point.type === "turn.natural_end") {
      if (took === "next-step") points.push({ type: "sampling" }, { type: "turn.natural_end" });
      else if (steerQueued) return "the turn ended with steering still queued";
      else if (took === null && queued(inbox, "next-turn").length > 0) {
        return "the turn ended without reading its queued follow-ups";
      }
    }
  }
  return null;
}

const property = (policy: Policy) =>
  fc.property(planArb, (plan) => {
    const violation = simulateTurn(plan, policy);
    if (violation !== null) throw new Error(violation);
  });

/** MUTANT: drains steering at every point, including between a call and its result. */
const drainsSteerAnywhere: Policy = (point) =>
  point.type === "turn.natural_end" ? lanesToDrain(point) : ["interrupt", "next-step"];
/** MUTANT: reads follow-ups at every safe point, not only at a natural end. */
const followUpsMidTurn: Policy = (point) => {
  const lanes = lanesToDrain(point);
  return lanes.length > 0 && !lanes.includes("next-turn") ? [...lanes, "next-turn"] : lanes;
};
/** MUTANT: never polls again after a slow preparation. */
const noPollAfterPreparation: Policy = (point) =>
  point.type === "step.prepared" ? ["interrupt"] : lanesToDrain(point);

describe("inbox poll points under random turns and arrivals (invariant 11)", () => {
  it("steering is only drained after a batch commits and before the next model call, never between a call and its result; follow-ups only at a natural end; nothing is left queued when the turn ends", () => {
    fc.assert(property(lanesToDrain), { numRuns: 1000, seed: SEED });
  });

  it.each([
    ["drains steering at any point", drainsSteerAnywhere, /steering drained at (call|sampling)/],
    ["reads follow-ups mid-turn", followUpsMidTurn, /follow-up drained mid-turn/],
    ["skips the poll after a slow preparation", noPollAfterPreparation, /slow preparation/],
  ])("the property FAILS on a drain policy that %s", (_name, policy, message) => {
    const result = fc.check(property(policy), { numRuns: 1000, seed: SEED });
    expect(result.failed).toBe(true);
    expect(String(result.errorInstance)).toMatch(message);
  });
});
