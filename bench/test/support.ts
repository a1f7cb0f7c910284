import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { BenchResults, StepRun } from "../lib/results.ts";

/** Makes `globalThis.gc` available in a test process started without `--expose-gc`. */
export function exposeGc(): void {
  if ((globalThis as { gc?: unknown }).gc) return;
  setFlagsFromString("--expose-gc");
  (globalThis as { gc?: unknown }).gc = runInNewContext("gc");
}

/** A measured step run with the given µs per step at N = 10, 100, 1 000, 10 000 (null = skipped). */
export function stepRun(id: string, label: string, cps: number, us: (number | null)[]): StepRun {
  const ns = [10, 100, 1000, 10_000];
  return {
    id,
    label,
    callsPerStep: cps,
    ms: 1000,
    result: {
      ok: true,
      label,
      version: `${label} 1.0.0`,
      callsPerStep: cps,
      warmupMs: 1500,
      warmupRuns: 10,
      notes: [`${label} notes`],
      points: ns.map((steps, i) => {
        const u = us[i] ?? null;
        return u === null
          ? {
              steps,
              usPerStep: null,
              samplesUs: [],
              retainedBytes: null,
              skipped: "projected 999 s",
            }
          : { steps, usPerStep: u, samplesUs: [u, u, u], retainedBytes: steps * 100 };
      }),
    },
  };
}

/** Results around the given step runs, extras unavailable. */
export function results(steps: StepRun[]): BenchResults {
  return {
    mode: "full",
    startedAt: "2026-01-01T00:00:00Z",
    durationS: 60,
    machine: {
      cpuModel: "Test CPU",
      cores: 2,
      memoryGiB: 24,
      node: "v20.0.0",
      os: "Linux",
      loadAtStart: 0.1,
      keel: "abc1234",
      keelEntry: {
        shown: "dist/index.js",
        built: true,
        label: "dist/index.js (the built package)",
      },
      packages: { xstate: "5.33.3" },
    },
    loadAtEnd: 0.2,
    settings: { ns: [10, 100, 1000, 10_000], reps: 5, warmupMs: 1500, budgetPerPointMs: 60_000 },
    steps,
    sessions: { ok: false, error: "not run" },
    argPreview: { ok: false, error: "not available: bench/arg-preview.bench.ts does not exist" },
    store: { ok: false, error: "not run" },
    prepareCall: { ok: false, error: "not run" },
  };
}
