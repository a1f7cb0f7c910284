import { beforeAll, describe, expect, it } from "vitest";
import { runChild } from "../lib/child.ts";
import { buildKeel } from "../lib/keel-entry.ts";
import type { StepBenchResult } from "../lib/protocol.ts";

describe("runChild", () => {
  it("runs a runtime harness in its own process and returns its measured points", async () => {
    const out = await runChild<StepBenchResult>(
      "runtimes/bare.ts",
      { ns: [10], reps: 1, warmupMs: 0, callsPerStep: 8, budgetPerPointMs: 5000 },
      "[test]",
      15_000,
    );
    expect(out.ok).toBe(true);
    if (!out.ok || !out.value.ok) throw new Error("expected a result");
    expect(out.value.label).toBe("bare loop");
    expect(out.value.points[0].usPerStep).toBeGreaterThan(0);
  });

  describe("Keel", () => {
    // Like `npm run bench`: the child imports the built package, rebuilt from the sources.
    beforeAll(() => buildKeel());

    it("measures Keel as its built package, dist/index.js", async () => {
      const out = await runChild<StepBenchResult>(
        "runtimes/keel.ts",
        { ns: [10], reps: 1, warmupMs: 0, callsPerStep: 8, budgetPerPointMs: 5000 },
        "[test]",
        15_000,
      );
      if (!out.ok || !out.value.ok) throw new Error(`expected a result: ${JSON.stringify(out)}`);
      expect(out.value.version).toBe("keel (this checkout, dist/index.js)");
      expect(out.value.points[0].usPerStep).toBeGreaterThan(0);
    });
  });

  it("passes on a helper bench's absence as a clear 'not available' answer", async () => {
    const out = await runChild<{ ok: boolean; error?: string }>(
      "extras/helper-bench.ts",
      { file: "no-such.bench.ts", exports: ["benchNothing"], args: [] },
      "[test]",
      15_000,
    );
    expect(out.ok && out.value).toEqual({
      ok: false,
      error: "not available: bench/no-such.bench.ts does not exist",
    });
  });

  it("kills a child that outlives its time limit and says so", async () => {
    const out = await runChild(
      "runtimes/bare.ts",
      { ns: [10], reps: 1, warmupMs: 60_000, callsPerStep: 1, budgetPerPointMs: 1 },
      "[test]",
      300,
    );
    expect(out).toMatchObject({ ok: false, error: "killed after the 0.3 s time limit" });
  });
});
