import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SimulatedClock } from "xstate";
import {
  type RetryBudget,
  tokenBucketBudget,
  unlimitedRetryBudget,
} from "../actors/retry-budget.ts";

describe("tokenBucketBudget", () => {
  it("each provider key starts with `burst` tokens, then refuses until the clock refills it", () => {
    const clock = new SimulatedClock();
    const budget = tokenBucketBudget({ ratePerSec: 2, burst: 3, clock });
    expect([1, 2, 3, 4].map(() => budget.tryAcquire("openai"))).toEqual([true, true, true, false]);
    clock.increment(499);
    expect(budget.tryAcquire("openai")).toBe(false);
    clock.increment(1);
    expect(budget.tryAcquire("openai")).toBe(true);
    expect(budget.tryAcquire("openai")).toBe(false);
  });

  it("keys are independent: one provider's storm does not spend another's allowance", () => {
    const budget = tokenBucketBudget({ ratePerSec: 0, burst: 1, clock: new SimulatedClock() });
    expect(budget.tryAcquire("a")).toBe(true);
    expect(budget.tryAcquire("a")).toBe(false);
    expect(budget.tryAcquire("b")).toBe(true);
  });

  it("refills at most up to burst, however long the idle time", () => {
    const clock = new SimulatedClock();
    const budget = tokenBucketBudget({ ratePerSec: 10, burst: 2, clock });
    budget.tryAcquire("k");
    clock.increment(3_600_000);
    expect(budget.available("k")).toBe(2);
  });

  it("fractional refills accumulate exactly (ten 0.1 s steps at 1/s give one token)", () => {
    const clock = new SimulatedClock();
    const budget = tokenBucketBudget({ ratePerSec: 1, burst: 1, clock });
    budget.tryAcquire("k");
    for (let i = 0; i < 10; i++) {
      expect(budget.tryAcquire("k")).toBe(false);
      clock.increment(100);
    }
    expect(budget.tryAcquire("k")).toBe(true);
  });

  it("a clock stepping backwards neither adds nor drains tokens", () => {
    let t = 10_000;
    const clock = { now: () => t, setTimeout: () => 0, clearTimeout: () => {} };
    const budget = tokenBucketBudget({ ratePerSec: 1, burst: 2, clock });
    budget.tryAcquire("k");
    t = 0;
    expect(budget.available("k")).toBe(1);
    t = 500;
    expect(budget.available("k")).toBe(1);
  });

  it("rejects bad options with what was wrong", () => {
    expect(() => tokenBucketBudget({ ratePerSec: -1, burst: 1 })).toThrow(
      /ratePerSec must be a finite number ≥ 0/,
    );
    expect(() => tokenBucketBudget({ ratePerSec: 1, burst: 0 })).toThrow(
      /burst must be an integer ≥ 1/,
    );
    expect(() => tokenBucketBudget({ ratePerSec: Number.NaN, burst: 1 })).toThrow(/ratePerSec/);
  });

  it("the unlimited budget always allows", () => {
    expect(unlimitedRetryBudget.tryAcquire("x")).toBe(true);
  });
});

type Op = { type: "advance"; ms: number } | { type: "acquire"; key: string };
const opsArb = fc.array(
  fc.oneof(
    fc.record({ type: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 5000 }) }),
    fc.record({ type: fc.constant("acquire" as const), key: fc.constantFrom("a", "b") }),
  ),
  { maxLength: 200 },
);

/** Grants per key never exceed burst + rate·elapsed: the bound that stops a retry storm. */
function boundHolds(
  make: (clock: SimulatedClock) => RetryBudget,
  rate: number,
  burst: number,
  ops: Op[],
) {
  const clock = new SimulatedClock();
  const budget = make(clock);
  const granted: Record<string, number> = { a: 0, b: 0 };
  for (const op of ops) {
    if (op.type === "advance") clock.increment(op.ms);
    else if (budget.tryAcquire(op.key)) granted[op.key]++;
    for (const key of ["a", "b"])
      if (granted[key] > burst + (rate * clock.now()) / 1000 + 1e-9)
        throw new Error(`key ${key}: ${granted[key]} grants by t=${clock.now()} ms`);
  }
}

describe("the shared bound, as a property", () => {
  it("grants per provider never exceed burst + ratePerSec × elapsed seconds", () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 5, noNaN: true }),
        fc.integer({ min: 1, max: 10 }),
        opsArb,
        (rate, burst, ops) => {
          boundHolds(
            (clock) => tokenBucketBudget({ ratePerSec: rate, burst, clock }),
            rate,
            burst,
            ops,
          );
        },
      ),
      { numRuns: 500, seed: 1 },
    );
  });

  it("catches a mutant that gives every session its own full bucket", () => {
    const out = fc.check(
      fc.property(
        fc.double({ min: 0, max: 5, noNaN: true }),
        fc.integer({ min: 1, max: 10 }),
        opsArb,
        (rate, burst, ops) => {
          boundHolds(
            (clock) => ({
              tryAcquire: (key) =>
                tokenBucketBudget({ ratePerSec: rate, burst, clock }).tryAcquire(key),
            }),
            rate,
            burst,
            ops,
          );
        },
      ),
      { numRuns: 500, seed: 1 },
    );
    expect(out.failed).toBe(true);
  });
});
