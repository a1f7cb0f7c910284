/**
 * `npm run bench`: runs every runtime of the step benchmark in its own child process, then the
 * extra sections, and writes bench/RESULTS.md and bench/steps.svg.
 *
 *   npm run bench                      full run (≈ 15 min on 2 cores)
 *   npm run bench -- --quick           ≈ 1 min, writes RESULTS.quick.md / steps.quick.svg
 *   npm run bench -- --only=bare,keel-memory   those runtimes only; prints, writes nothing
 *   npm run bench -- --profile         also write each child's V8 CPU profile (to a tmp dir)
 *
 * Keel is measured as its built package, dist/index.js, which this rebuilds first
 * (`KEEL_ENTRY=index.ts npm run bench` measures the sources through tsx instead).
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { renderStepChart } from "./lib/chart.ts";
import { type ChildOutcome, PROFILE_ENV, runChild } from "./lib/child.ts";
import { buildKeel, KEEL_ENTRY_ENV, keelEntry } from "./lib/keel-entry.ts";
import { currentLoad, describeMachine } from "./lib/machine.ts";
import type { StepBenchOptions, StepBenchResult } from "./lib/protocol.ts";
import { renderStepSection } from "./lib/report.ts";
import type { BenchResults, ExtraResult, StepRun } from "./lib/results.ts";
import { renderResultsMarkdown } from "./lib/results-md.ts";
import { benchDir } from "./lib/workload.ts";

interface RuntimeSpec {
  id: string;
  label: string;
  script: string;
  variant?: string;
}

/** The step-benchmark runtimes, in table order (the bare loop first: it is the floor). */
export const runtimes: RuntimeSpec[] = [
  { id: "bare", label: "bare loop", script: "runtimes/bare.ts" },
  { id: "keel-memory", label: "Keel (memory)", script: "runtimes/keel.ts", variant: "memory" },
  { id: "keel-sqlite", label: "Keel (SQLite)", script: "runtimes/keel.ts", variant: "sqlite" },
  { id: "pi-agent-core", label: "pi-agent-core", script: "runtimes/pi-agent-core.ts" },
  { id: "vercel-ai", label: "Vercel ai", script: "runtimes/vercel-ai.ts" },
  { id: "openai-agents", label: "@openai/agents", script: "runtimes/openai-agents.ts" },
  // The durable peer: LangGraph.js checkpoints every superstep (MemorySaver or SqliteSaver).
  {
    id: "langgraph-memory",
    label: "LangGraph (MemorySaver)",
    script: "runtimes/langgraph.ts",
    variant: "memory",
  },
  {
    id: "langgraph-sqlite",
    label: "LangGraph (SQLite)",
    script: "runtimes/langgraph.ts",
    variant: "sqlite",
  },
];

interface Profile {
  settings: Omit<StepBenchOptions, "callsPerStep" | "variant">;
  /** Time for all step children together; each child's per-N budget shrinks to fit. */
  stepsDeadlineMs: number;
  /** The per-N budget never shrinks below this (so Keel's N = 10 000 is not starved). */
  minBudgetPerPointMs: number;
  childTimeoutMs: number;
  sessions: { idle: number; afterTurn: number; midTurn: number };
  /** Arguments for the helpers' bench functions (none: their defaults). */
  argPreview: unknown[];
  store: unknown[];
}

const profiles: Record<"full" | "quick", Profile> = {
  full: {
    settings: { ns: [10, 100, 1000, 10_000], reps: 5, warmupMs: 2500, budgetPerPointMs: 90_000 },
    stepsDeadlineMs: 540_000,
    minBudgetPerPointMs: 60_000,
    // The skip rule projects from the last two N; LangGraph's per-step cost grows faster than
    // that between N = 100 and 1 000 (≈ 1.8× then ≈ 6× a decade), so a point it lets through
    // can take 2.5–5 min: room for that on a busy machine.
    childTimeoutMs: 600_000,
    sessions: { idle: 10_000, afterTurn: 10_000, midTurn: 10_000 },
    argPreview: [],
    store: [],
  },
  quick: {
    settings: { ns: [10, 100, 1000], reps: 3, warmupMs: 500, budgetPerPointMs: 4000 },
    stepsDeadlineMs: 40_000,
    minBudgetPerPointMs: 3000,
    childTimeoutMs: 60_000,
    sessions: { idle: 2000, afterTurn: 200, midTurn: 200 },
    argPreview: [{ sizes: [10_000, 100_000], runs: 5, partialJsonBudgetMs: 300 }],
    store: [{ steps: 1000, recoveryEntries: 10_000 }],
  },
};

function parseArgs(argv: string[]): { quick: boolean; only?: string[]; profile: boolean } {
  let quick = false;
  let profile = false;
  let only: string[] | undefined;
  for (const arg of argv) {
    if (arg === "--quick") quick = true;
    else if (arg === "--profile") profile = true;
    else if (arg.startsWith("--only=")) only = arg.slice(7).split(",").filter(Boolean);
    else {
      throw new Error(
        `unknown option ${arg}: use --quick, --profile and/or --only=${runtimes.map((r) => r.id).join(",")}`,
      );
    }
  }
  const unknown = only?.filter((id) => !runtimes.some((r) => r.id === id)) ?? [];
  if (unknown.length > 0) {
    throw new Error(
      `--only: no runtime ${unknown.join(", ")}; known: ${runtimes.map((r) => r.id).join(", ")}`,
    );
  }
  return { quick, only, profile };
}

async function runSteps(specs: RuntimeSpec[], p: (typeof profiles)["full"]): Promise<StepRun[]> {
  const jobs = [1, 8].flatMap((callsPerStep) => specs.map((spec) => ({ spec, callsPerStep })));
  const deadline = performance.now() + p.stepsDeadlineMs;
  const out: StepRun[] = [];
  for (const [i, { spec, callsPerStep }] of jobs.entries()) {
    const fairShare = (deadline - performance.now()) / (jobs.length - i) / 1.25;
    const options: StepBenchOptions = {
      ...p.settings,
      budgetPerPointMs: Math.round(
        Math.min(p.settings.budgetPerPointMs, Math.max(p.minBudgetPerPointMs, fairShare)),
      ),
      callsPerStep,
      variant: spec.variant,
    };
    process.stderr.write(`▶ ${spec.label}, ${callsPerStep} call(s)/step\n`);
    const outcome = await runChild<StepBenchResult>(
      spec.script,
      options,
      `[${spec.id}]`,
      p.childTimeoutMs,
    );
    const result: StepBenchResult = outcome.ok
      ? outcome.value
      : { ok: false, error: outcome.error };
    out.push({ id: spec.id, label: spec.label, callsPerStep, result, ms: outcome.ms });
  }
  return out;
}

function extra(
  outcome: ChildOutcome<{ ok: boolean; value?: unknown; error?: string; ms?: number }>,
  inner: boolean,
): ExtraResult {
  if (!outcome.ok) return { ok: false, error: outcome.error };
  const v = outcome.value;
  if (!v.ok) return { ok: false, error: v.error ?? "unknown error" };
  return inner
    ? { ok: true, value: v.value, ms: v.ms ?? outcome.ms }
    : { ok: true, value: v, ms: outcome.ms };
}

async function helper(
  file: string,
  exports: string[],
  args: unknown[],
  timeoutMs: number,
): Promise<ExtraResult> {
  process.stderr.write(`▶ ${file}\n`);
  return extra(
    await runChild("extras/helper-bench.ts", { file, exports, args }, `[${file}]`, timeoutMs),
    true,
  );
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const mode = args.quick ? "quick" : "full";
  if (args.profile) {
    process.env[PROFILE_ENV] = mkdtempSync(join(tmpdir(), "keel-bench-prof-"));
    process.stderr.write(
      `CPU profiles (they slow the runs down) go to ${process.env[PROFILE_ENV]}\n`,
    );
  }
  const p = profiles[mode];
  const entry = keelEntry();
  if (entry.built) {
    // Keel is measured as its built package: rebuild it so it is the current sources.
    process.stderr.write(`▶ node scripts/build.mjs (${entry.shown})\n`);
    buildKeel();
  } else {
    // The children run in the repository: hand them the path as this process resolved it.
    process.env[KEEL_ENTRY_ENV] = entry.file;
    process.stderr.write(`Keel from ${entry.shown} (${KEEL_ENTRY_ENV}), not its built package\n`);
  }
  const machine = describeMachine();
  const started = performance.now();
  const startedAt = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  const specs = args.only ? runtimes.filter((r) => args.only?.includes(r.id)) : runtimes;
  const steps = await runSteps(specs, p);
  const partial: BenchResults = {
    mode,
    startedAt,
    durationS: 0,
    machine,
    loadAtEnd: 0,
    settings: p.settings,
    steps,
    sessions: { ok: false, error: "not run" },
    argPreview: { ok: false, error: "not run" },
    store: { ok: false, error: "not run" },
    prepareCall: { ok: false, error: "not run" },
  };
  if (args.only) {
    process.stdout.write(
      `\n${renderStepSection(partial, 1)}\n\n${renderStepSection(partial, 8)}\n`,
    );
    return;
  }
  process.stderr.write("▶ sessions memory\n");
  partial.sessions = extra(
    await runChild("extras/sessions.ts", p.sessions, "[sessions]", p.childTimeoutMs),
    false,
  );
  partial.argPreview = await helper(
    "arg-preview.bench.ts",
    ["benchArgPreview"],
    p.argPreview,
    p.childTimeoutMs,
  );
  partial.store = await helper(
    "store.bench.ts",
    ["runStoreBench", "benchStore", "storeBench"],
    p.store,
    p.childTimeoutMs,
  );
  partial.prepareCall = await helper(
    "prepare-call.bench.ts",
    ["benchPrepareCall"],
    [],
    p.childTimeoutMs,
  );
  partial.durationS = (performance.now() - started) / 1000;
  partial.loadAtEnd = currentLoad();

  const suffix = mode === "quick" ? ".quick" : "";
  const chartFile = `steps${suffix}.svg`;
  const chart = renderStepChart(
    [1, 8].map((cps) => ({
      title: cps === 1 ? "1 tool call per step" : "8 parallel tool calls per step",
      series: steps
        .filter((s) => s.callsPerStep === cps && s.result.ok)
        .map((s) => ({
          label: s.label,
          points: s.result.ok
            ? s.result.points.flatMap((pt) =>
                pt.usPerStep === null ? [] : [{ steps: pt.steps, usPerStep: pt.usPerStep }],
              )
            : [],
        })),
    })),
  );
  writeFileSync(join(benchDir, chartFile), chart);
  writeFileSync(join(benchDir, `RESULTS${suffix}.md`), renderResultsMarkdown(partial, chartFile));
  process.stdout.write(`\n${renderStepSection(partial, 1)}\n\n${renderStepSection(partial, 8)}\n`);
  process.stderr.write(
    `wrote bench/RESULTS${suffix}.md and bench/${chartFile} in ${(partial.durationS / 60).toFixed(1)} min\n`,
  );
}

main().catch((e: unknown) => {
  process.stderr.write(`bench: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
