import { describe, expect, it } from "vitest";
import { flatness, renderStepSection, renderValue } from "../lib/report.ts";
import type { StepRun } from "../lib/results.ts";
import { renderResultsMarkdown } from "../lib/results-md.ts";
import { results, stepRun } from "./support.ts";

const failed: StepRun = {
  id: "vercel-ai",
  label: "Vercel ai",
  callsPerStep: 1,
  ms: 10,
  result: { ok: false, error: "Error: ai@7 needs Node 22" },
};

const runs = [
  stepRun("bare", "bare loop", 1, [2, 2, 2, 2]),
  stepRun("keel-memory", "Keel (memory)", 1, [20, 20, 22, 24]),
  stepRun("pi-agent-core", "pi-agent-core", 1, [40, 40, 80, 400]),
  stepRun("openai-agents", "@openai/agents", 1, [100, 1000, null, null]),
  failed,
];

describe("flatness", () => {
  it("divides µs/step at the largest measured N by µs/step at the smallest", () => {
    expect(flatness(runs[2])).toEqual({ ratio: 10, from: 10, to: 10_000 });
  });
  it("stops at the largest N actually measured when larger ones were skipped", () => {
    expect(flatness(runs[3])).toEqual({ ratio: 10, from: 10, to: 100 });
  });
  it("has no figure for a runtime that failed", () => {
    expect(flatness(failed)).toBeNull();
  });
});

describe("renderStepSection", () => {
  const md = renderStepSection(results(runs), 1);
  it("lists µs per step per N for every runtime", () => {
    expect(md).toContain("| Keel (memory) | 20.0 | 20.0 | 22.0 | 24.0 |");
  });
  it("divides by the bare loop and by pi-agent-core at the same N", () => {
    expect(md).toContain("| pi-agent-core | 20.0× | 20.0× | 40.0× | 200× |");
    expect(md).toContain("| Keel (memory) | 0.50× | 0.50× | 0.28× | 0.06× |");
  });
  it("marks skipped N and shows the error of a runtime that failed", () => {
    expect(md).toContain("| @openai/agents | 100 | 1 000 | skipped¹ | skipped¹ |");
    expect(md).toContain("failed: Error: ai@7 needs Node 22");
  });
});

describe("renderStepSection with the durable peer", () => {
  const md = renderStepSection(
    results([
      stepRun("keel-memory", "Keel (memory)", 1, [20, 20, 22, 24]),
      stepRun("keel-sqlite", "Keel (SQLite)", 1, [200, 100, 100, 100]),
      stepRun("langgraph-memory", "LangGraph (MemorySaver)", 1, [1000, 2000, 20_000, null]),
      stepRun("langgraph-sqlite", "LangGraph (SQLite)", 1, [2000, 4000, null, null]),
    ]),
    1,
  );
  it("divides each Keel store by LangGraph with the matching checkpointer at the same N", () => {
    expect(md).toContain("| Keel memory ÷ LangGraph MemorySaver | 0.020× | 0.010× | 0.0011× | — |");
    expect(md).toContain("| Keel SQLite ÷ LangGraph SQLite | 0.10× | 0.025× | — | — |");
  });
  it("has no such table when LangGraph was not run", () => {
    expect(renderStepSection(results(runs), 1)).not.toContain("÷ LangGraph");
  });
});

describe("renderResultsMarkdown", () => {
  const md = renderResultsMarkdown(results(runs), "steps.svg");
  it("embeds the chart and names the machine and package versions", () => {
    expect(md).toContain("](steps.svg)");
    expect(md).toContain("Test CPU (2 cores");
    expect(md).toContain("| xstate | 5.33.3 |");
  });
  it("says why each runtime runs in its own process", () => {
    expect(md).toMatch(/AsyncLocalStorage/);
  });
  it("says Keel is measured as its built package, and names the entry in the Machine table", () => {
    expect(md).toContain(
      "- **Keel as its built package.** Keel is measured as its built package, `dist/index.js`",
    );
    expect(md).toMatch(
      /that `npm ci` builds and an embedder's `import "keel"` loads, as the peers/,
    );
    expect(md).toContain("| Keel entry measured | dist/index.js (the built package) |");
  });
  it("says so when KEEL_ENTRY made it measure the sources instead", () => {
    const r = results(runs);
    r.machine.keelEntry = { shown: "index.ts", built: false, label: "index.ts (KEEL_ENTRY)" };
    const src = renderResultsMarkdown(r, "steps.svg");
    expect(src).toContain(
      "- **Keel not as its built package.** This run measured Keel from `index.ts`",
    );
    expect(src).toContain("keepNames");
    expect(src).not.toContain("Keel as its built package.");
    expect(src).toContain("| Keel entry measured | index.ts (KEEL_ENTRY) |");
  });
  it("lists the runtime that could not run with its exact error", () => {
    expect(md).toContain("- **Vercel ai** (1 call(s)/step): `Error: ai@7 needs Node 22`");
  });
  it("says plainly when another helper's bench is not available", () => {
    expect(md).toContain("Not available: not available: bench/arg-preview.bench.ts does not exist");
  });
});

describe("renderValue", () => {
  it("turns a list of rows into one table with a column per key", () => {
    const md = renderValue([
      { shape: "file", bytes: 10_000, ms: 1.5 },
      { shape: "records", bytes: 100_000, ms: 20 },
    ]);
    expect(md.split("\n")[0]).toBe("| shape | bytes | ms |");
    expect(md).toContain("| records | 100 000 | 20 |");
  });
  it("turns nested figures into dotted keys", () => {
    expect(renderValue({ recovery: { openMs: 12.5 } })).toContain("| recovery.openMs | 12.5 |");
  });
});
