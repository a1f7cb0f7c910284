import { beforeAll, describe, expect, it } from "vitest";
import { measureSteps, type StepHarness } from "../lib/measure.ts";
import type { StepBenchOptions } from "../lib/protocol.ts";
import { exposeGc } from "./support.ts";

beforeAll(exposeGc);

const options: StepBenchOptions = {
  ns: [10, 100],
  reps: 3,
  warmupMs: 0,
  callsPerStep: 2,
  budgetPerPointMs: 60_000,
};

/** Does the work it claims (or `short` fewer executions) and burns `usPerStep` per step. */
function harness(
  opts: { short?: number; usPerStep?: (steps: number) => number } = {},
): StepHarness & {
  calls: number[];
} {
  const calls: number[] = [];
  return {
    label: "fake",
    version: "fake 1",
    calls,
    async run(steps, callsPerStep) {
      calls.push(steps);
      const until = performance.now() + ((opts.usPerStep?.(steps) ?? 0) * steps) / 1000;
      while (performance.now() < until) {
        // busy: a deterministic amount of work per step
      }
      return { toolExecutions: steps * callsPerStep - (opts.short ?? 0), keep: new Array(steps) };
    },
  };
}

describe("measureSteps", () => {
  it("reports the median of the repetitions for every N, in order", async () => {
    const h = harness();
    const r = await measureSteps(h, options);
    expect(r.points.map((p) => p.steps)).toEqual([10, 100]);
    for (const p of r.points) {
      expect(p.samplesUs).toHaveLength(3);
      expect(p.usPerStep).toBe([...p.samplesUs].sort((a, b) => a - b)[1]);
    }
  });

  it("fails a harness that did fewer tool executions than N × calls per step", async () => {
    await expect(measureSteps(harness({ short: 1 }), options)).rejects.toThrow(
      /executed the tool 19 times for 10 steps × 2 calls \(expected 20\)/,
    );
  });

  it("skips an N whose projected time is over the budget and says why", async () => {
    const h = harness({ usPerStep: (steps) => steps }); // per-step cost grows ×10 per decade
    const r = await measureSteps(h, { ...options, ns: [10, 100, 10_000], budgetPerPointMs: 500 });
    const last = r.points[2];
    expect(last.usPerStep).toBeNull();
    expect(last.skipped).toMatch(/projected \d+ s for 3 timed and 1 heap runs/);
    expect(h.calls).not.toContain(10_000);
  });

  it("warms up for at least the asked time before measuring", async () => {
    const h = harness();
    const r = await measureSteps(h, { ...options, warmupMs: 30 });
    expect(r.warmupMs).toBeGreaterThanOrEqual(30);
    expect(r.warmupRuns).toBeGreaterThan(0);
    expect(h.calls.slice(0, r.warmupRuns).every((n) => n === 20)).toBe(true);
  });

  it("never times a run after a forced GC: every N is timed before any heap reading", async () => {
    const gc = (globalThis as unknown as { gc: () => void }).gc;
    // A forced GC de-optimises the runs after it for a while (here: the next 50 runs).
    let slowRuns = 0;
    (globalThis as unknown as { gc: () => void }).gc = () => {
      slowRuns = 50;
      gc();
    };
    try {
      // 1 µs a step normally, 1 000 µs a step while de-optimised.
      const h = harness({
        usPerStep: () => {
          if (slowRuns === 0) return 1;
          slowRuns--;
          return 1000;
        },
      });
      const r = await measureSteps(h, { ...options, ns: [10, 100, 1000] });
      for (const p of r.points) expect(p.usPerStep).toBeLessThan(100);
      expect(r.points.every((p) => p.retainedBytes !== null)).toBe(true);
    } finally {
      (globalThis as unknown as { gc: () => void }).gc = gc;
    }
  });

  it("retains more heap for a run that keeps more", async () => {
    const r = await measureSteps(harness(), { ...options, ns: [10, 100_000], reps: 1 });
    // the fake keeps an array of N slots: ≈ 8 bytes a slot at N = 100 000
    expect(r.points[1].retainedBytes).toBeGreaterThan(400_000);
  });

  it("charges memory a runtime pins until its next macrotask to that run, not to the next one", async () => {
    let _pinned: unknown;
    const h: StepHarness = {
      label: "pinning",
      version: "fake 1",
      async run(steps, callsPerStep) {
        const keep = new Array(steps).fill(0);
        _pinned = keep; // deferred clean-up, as a runtime's settle timer would do
        setTimeout(() => {
          _pinned = undefined;
        }, 0);
        return { toolExecutions: steps * callsPerStep, keep };
      },
    };
    const r = await measureSteps(h, { ...options, ns: [100_000], reps: 3 });
    expect(r.points[0].retainedBytes).toBeGreaterThan(400_000);
  });
});
