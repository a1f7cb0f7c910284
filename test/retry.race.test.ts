import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SimulatedClock } from "xstate";
import { createAgent } from "../actors/agent.ts";
import {
  faultyModel,
  type ModelFault,
  scheduledClockSteps,
  scheduledModel,
} from "../actors/fault-injection.ts";
import { seededIds } from "../actors/ids.ts";
import type { Model } from "../contracts/model.ts";
import type { turnMachine } from "../machines/turn.machine.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { failWithSchedule } from "./support/harness.ts";
import { waitsRetryTwiceTurnMachine } from "./support/mutants/turn.mutants.ts";

/**
 * Invariant 7 of docs/architecture.md as an interleaving search over the real runtime: a session's model fails its
 * requests with 429/503 (with or without `Retry-After` in seconds) or a cut connection; the
 * scheduler orders each model answer against steps of the simulated clock. Checked from what the
 * test sent and saw on the clock, never from the retry policy's own numbers:
 * - requests ≤ maxRetries + 1;
 * - after a `Retry-After: r`, the next request starts at the first clock step at or past
 *   failure + r (not earlier, and not a second r later: waited once across layers);
 * - no request starts at or past the operation deadline.
 */
const STEP_MS = 250;

async function scenario(
  s: fc.Scheduler,
  plan: { faults: (ModelFault | undefined)[]; maxRetries: number; deadlineMs: number },
  machine?: typeof turnMachine,
): Promise<string | undefined> {
  const clock = new SimulatedClock();
  const issued: number[] = [];
  const failed: { at: number; fault: ModelFault }[] = [];
  const script = scriptedModel(() => ({ text: "answer" }));
  const faulty = faultyModel(script, (_req, i) => {
    const fault = plan.faults[i];
    if (fault) failed.push({ at: clock.now(), fault });
    return fault;
  });
  const scheduled = scheduledModel(faulty, s);
  const model: Model = {
    name: "faulty",
    stream(request) {
      issued.push(clock.now());
      return scheduled.stream(request);
    },
  };
  const session = createAgent({
    model,
    clock,
    ids: seededIds(7),
    turnMachine: machine,
    retry: {
      maxRetries: plan.maxRetries,
      baseDelayMs: 100,
      maxDelayMs: 400,
      operationDeadlineMs: plan.deadlineMs,
    },
  }).session("r");
  const done = session.prompt("go");
  // Enough clock steps to pass every wait the plan can ask for, each a task the scheduler orders.
  const ticking = scheduledClockSteps(clock, s, Array(60).fill(STEP_MS));
  await s.waitFor(done);
  void ticking;
  if (issued.length > plan.maxRetries + 1)
    return `${issued.length} requests with maxRetries ${plan.maxRetries}`;
  for (const at of issued) {
    if (at >= plan.deadlineMs)
      return `a request started at ${at} ms, at or past the operation deadline ${plan.deadlineMs} ms`;
  }
  for (let k = 0; k + 1 < issued.length; k++) {
    const f = failed[k];
    if (f?.fault.type !== "http" || typeof f.fault.retryAfter !== "number") continue;
    const due = f.at + f.fault.retryAfter * 1000;
    const next = issued[k + 1];
    if (next < due) return `request ${k + 2} started at ${next} ms, before Retry-After's ${due} ms`;
    // The clock moves only in steps: a timer (even a wait of 0) fires at the first step after
    // it was armed and at or past its due time.
    if (next >= Math.max(due, f.at + 1) + STEP_MS)
      return `request ${k + 2} started at ${next} ms: the Retry-After due at ${due} ms was waited more than once`;
  }
  return undefined;
}

const faultArb: fc.Arbitrary<ModelFault | undefined> = fc.oneof(
  fc.record({
    type: fc.constant("http" as const),
    status: fc.constantFrom(429, 503),
    retryAfter: fc.integer({ min: 0, max: 3 }),
  }),
  fc.record({ type: fc.constant("http" as const), status: fc.constantFrom(429, 503) }),
  fc.constant({ type: "network" as const }),
  fc.constant(undefined),
);

const planArb = fc.record({
  faults: fc.array(faultArb, { minLength: 1, maxLength: 5 }),
  maxRetries: fc.integer({ min: 0, max: 3 }),
  deadlineMs: fc.integer({ min: 1000, max: 8000 }),
});

const property = (machine?: typeof turnMachine) =>
  fc.asyncProperty(fc.scheduler(), planArb, async (s, plan) => {
    failWithSchedule(s, await scenario(s, plan, machine));
  });

describe("model failures against clock steps (invariant 7 of docs/architecture.md, interleaving search)", () => {
  it("requests ≤ maxRetries + 1, a Retry-After is waited once, and nothing starts past the deadline", async () => {
    await fc.assert(property(), { numRuns: 120, seed: 7 });
  });

  it("the search catches a turn that waits the retry delay twice", async () => {
    const out = await fc.check(property(waitsRetryTwiceTurnMachine), { numRuns: 200, seed: 7 });
    expect(out.failed).toBe(true);
    expect(String(out.errorInstance)).toMatch(/waited more than once|deadline/);
  });
});
