import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import {
  type AgentEvent,
  builtinTools,
  createAgent,
  type Model,
  type PromptResult,
  type ToolDefinition,
} from "../index.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import {
  keelRecord,
  type ModelRecord,
  modelRecord,
  type ToolSetRecord,
  toolSetRecord,
} from "./eval-record.ts";
import { progressBar, renderTable } from "./eval-report.ts";
import { type RunRecord, summarize } from "./eval-summary.ts";
import { type EvalTask, outsideWorkspace, readTaskSet, type TaskSet } from "./eval-tasks.ts";
import { compileExpectations, countToolCalls } from "./eval-tools.ts";
import { modelFromEnv } from "./run.ts";

/** A mechanism `--compare` switches off. */
export const MECHANISMS = {
  compaction: "automatic compaction (context.compactAt: false)",
  "acceptance-loop": "the acceptance loop (no follow-ups with failing evidence)",
  "loop-guard": "the loop guard (loopGuard: false)",
} as const;
export type Mechanism = keyof typeof MECHANISMS;

/** What `--compare` compares the base runs with: a mechanism off, another model, another tool set. */
export type Comparison =
  | { kind: "mechanism"; mechanism: Mechanism }
  | { kind: "model"; module: string }
  | { kind: "tools"; module: string };

/** Which side of a comparison a run is: "base", the mechanism switched off, or the other model or tools. */
export type Variant = "base" | Mechanism | "compare";

/**
 * `--model <module>` (and `--compare-model`): an ES module whose default export makes the model
 * of one run. Contract of the factory: `({ task, run, seed, variant }) => Model`, called once
 * per run.
 */
export type ModelFactory = (ctx: {
  task: string;
  run: number;
  seed: number;
  variant: Variant;
}) => Model | Promise<Model>;

/**
 * `--tools <module>` (and `--compare-tools`): an ES module whose default export makes the tools
 * of one run in its workspace. Contract: `({ workspace, task, run, seed, variant }) =>
 * ToolDefinition[]`, called once per run. Default: the built-in tools on the workspace.
 */
export type ToolsFactory = (ctx: {
  workspace: string;
  task: string;
  run: number;
  seed: number;
  variant: Variant;
}) => readonly ToolDefinition[] | Promise<readonly ToolDefinition[]>;

/** How a message names the option that gave a module: `--model ./m.mjs`, `--compare model:./m.mjs`. */
const given = (option: string, module: string) =>
  `${option}${option.endsWith(":") ? "" : " "}${module}`;

async function loadDefault(option: string, module: string, shape: string): Promise<unknown> {
  let mod: { default?: unknown };
  try {
    mod = await import(pathToFileURL(path.resolve(module)).href);
  } catch (err) {
    throw new CliError(
      `cannot load ${given(option, module)}: ${(err as Error).message}`,
      EXIT.config,
    );
  }
  if (typeof mod.default !== "function")
    throw new CliError(
      `${given(option, module)} must export a default function ${shape}`,
      EXIT.config,
    );
  return mod.default;
}

async function loadFactory(option: string, module: string | undefined): Promise<ModelFactory> {
  if (!module) {
    const model = modelFromEnv();
    return () => model;
  }
  return (await loadDefault(
    option,
    module,
    "({ task, run, seed, variant }) => Model",
  )) as ModelFactory;
}

async function loadTools(option: string, module: string | undefined): Promise<ToolsFactory> {
  if (!module) return ({ workspace }) => builtinTools({ root: workspace });
  const make = (await loadDefault(
    option,
    module,
    "({ workspace, task, run, seed, variant }) => ToolDefinition[]",
  )) as ToolsFactory;
  return async (ctx) => {
    const tools = await make(ctx);
    if (!Array.isArray(tools))
      throw new CliError(
        `${given(option, module)} returned ${typeof tools}, not an array of tools`,
        EXIT.config,
      );
    return tools;
  };
}

/** What one run is made of. */
interface RunSetup {
  set: TaskSet;
  task: EvalTask;
  run: number;
  seed: number;
  model: Model;
  tools: ToolsFactory;
  variant: Variant;
}

/** How one run went, and the tools it offered the model. */
interface RunOutcome {
  record: RunRecord;
  toolSet: ToolSetRecord;
}

/** Runs one task once, in a fresh workspace, with the fixed budget. */
async function runOnce({
  set,
  task,
  run,
  seed,
  model,
  tools,
  variant,
}: RunSetup): Promise<RunOutcome> {
  const ws = mkdtempSync(path.join(tmpdir(), `keel-eval-${task.id}-`));
  try {
    for (const [rel, content] of Object.entries(task.files)) {
      const file = path.resolve(ws, rel);
      // Checked at load; checked again here, where it is written (a task set built in code).
      if (outsideWorkspace(rel) || !file.startsWith(`${ws}${path.sep}`))
        throw new CliError(
          `task ${task.id}: the file ${JSON.stringify(rel)} is outside its workspace`,
          EXIT.usage,
        );
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, content);
    }
    const loop = variant === "acceptance-loop" ? {} : (task.acceptance ?? {});
    const offered = await tools({ workspace: ws, task: task.id, run, seed, variant });
    const agent = createAgent({
      model,
      tools: offered,
      limits: { maxSteps: set.budget.maxSteps, maxSpendTokens: set.budget.maxSpendTokens },
      retry: set.retry,
      context: variant === "compaction" ? { compactAt: false } : undefined,
      ...(variant === "loop-guard" ? { loopGuard: false as const } : {}),
      acceptance: { workspace: ws, checks: task.checks, ...loop },
      // The model's calls run unattended in the task's throwaway workspace (`shell` in its
      // sandbox where bubblewrap works): high-risk tools are what is being evaluated.
      permissions: { defaults: { high: "allow" } },
    });
    const session = await agent.openSession(`eval-${task.id}-${run}`);
    let recoveries = 0;
    session.subscribe((e: AgentEvent) => {
      if (e.type === "retry.scheduled") recoveries++;
      if (e.type === "context.compacted" && e.mode === "overflow") recoveries++;
    });
    const started = Date.now();
    // The time budget covers the whole run (every round of the loop): then it is interrupted.
    const timer = setTimeout(
      () => void session.interrupt("eval time budget spent"),
      set.budget.timeMs,
    );
    let result: PromptResult;
    try {
      result = await session.prompt(task.prompt);
    } finally {
      clearTimeout(timer);
    }
    const ms = Date.now() - started;
    const toolSet = toolSetRecord(agent.registry.modelTools());
    const expected = task.expectedCalls
      ? compileExpectations(task.expectedCalls, `task ${task.id}: expectedCalls`)
      : undefined;
    const counts = expected ? countToolCalls(session.entries(), expected) : undefined;
    await agent.close();
    const record: RunRecord = {
      task: task.id,
      run,
      model: model.name,
      toolSet: toolSet.digest,
      status: result.status,
      acceptance: result.acceptance ?? "pending",
      tokens: result.usage.inputTokens + result.usage.outputTokens,
      steps: result.steps,
      ms,
      rounds: result.rounds ?? 0,
      recoveryFailed: recoveries > 0 && result.status === "failed",
      ...(counts ? { tools: counts } : {}),
    };
    return { record, toolSet };
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
}

export interface EvalOptions {
  k: number;
  json?: boolean;
  model?: string;
  tools?: string;
  seed?: number;
  /** `<mechanism>` (switched off), `model:<module>` (another model), `tools:<module>` (other tools). */
  compare?: string;
}

/**
 * The comparison `--compare` asks for, or undefined: `model:<module>` and `tools:<module>` name
 * a module as `--model` and `--tools` do; anything else names a mechanism to switch off. A
 * usage error for an unknown mechanism or a missing module.
 */
export function comparisonOf(options: Pick<EvalOptions, "compare">): Comparison | undefined {
  const { compare } = options;
  if (compare === undefined) return undefined;
  const prefixed = /^(model|tools):(.*)$/.exec(compare);
  if (prefixed) {
    const [, kind, module] = prefixed as unknown as [string, "model" | "tools", string];
    if (module === "")
      throw new CliError(
        `--compare ${compare}: name the module after "${kind}:", e.g. --compare ${kind}:./${kind === "model" ? "other-model" : "tools-v2"}.mjs`,
        EXIT.usage,
      );
    return { kind, module };
  }
  if (!(compare in MECHANISMS))
    throw new CliError(
      `--compare ${compare}: unknown mechanism; choose one of ${Object.keys(MECHANISMS).join(", ")} (or another model with --compare model:<module>, other tools with --compare tools:<module>)`,
      EXIT.usage,
    );
  return { kind: "mechanism", mechanism: compare as Mechanism };
}

/** The runs of one side of the eval and what they ran with. */
interface Side {
  variant: Variant;
  models: ModelRecord[];
  toolSets: ToolSetRecord[];
  runs: RunRecord[];
}

/** `keel eval <tasks.json> --k 5`: each task k times, graded by its checks. */
export async function runEval(file: string, options: EvalOptions): Promise<ExitCode> {
  const comparison = comparisonOf(options);
  const set = await readTaskSet(file);
  const seed = options.seed ?? 1;
  const baseModels = await loadFactory("--model", options.model);
  const baseTools = await loadTools("--tools", options.tools);
  const sides: { variant: Variant; models: ModelFactory; tools: ToolsFactory }[] = [
    { variant: "base", models: baseModels, tools: baseTools },
  ];
  if (comparison?.kind === "mechanism")
    sides.push({ variant: comparison.mechanism, models: baseModels, tools: baseTools });
  if (comparison?.kind === "model")
    sides.push({
      variant: "compare",
      models: await loadFactory("--compare model:", comparison.module),
      tools: baseTools,
    });
  if (comparison?.kind === "tools")
    sides.push({
      variant: "compare",
      models: baseModels,
      tools: await loadTools("--compare tools:", comparison.module),
    });
  const bar = progressBar(set.tasks.length * options.k * sides.length);
  bar.start();
  const results: Side[] = [];
  try {
    for (const side of sides) {
      const done: Side = { variant: side.variant, models: [], toolSets: [], runs: [] };
      results.push(done);
      for (const task of set.tasks) {
        for (let run = 0; run < options.k; run++) {
          const { variant } = side;
          const model = await side.models({ task: task.id, run, seed, variant });
          const { record, toolSet } = await runOnce({
            set,
            task,
            run,
            seed,
            model,
            tools: side.tools,
            variant,
          });
          done.runs.push(record);
          if (!done.models.some((m) => m.name === model.name)) done.models.push(modelRecord(model));
          if (!done.toolSets.some((t) => t.digest === toolSet.digest)) done.toolSets.push(toolSet);
          bar.tick(
            `${variant === "base" ? "" : `${labelOf(comparison)} · `}${task.id} #${run + 1}`,
          );
        }
      }
    }
  } finally {
    bar.end();
  }
  const ids = set.tasks.map((t) => t.id);
  const [base, other] = results.map((side) => ({
    ...side,
    summary: summarize(ids, side.runs, options.k),
  }));
  if (options.json) {
    const report = (side: typeof base) => ({
      models: side.models,
      toolSets: side.toolSets,
      summary: side.summary,
      runs: side.runs,
    });
    const out = {
      keel: keelRecord(),
      node: process.version,
      k: options.k,
      seed,
      budget: set.budget,
      base: report(base),
      ...(other && comparison ? { compare: { ...comparison, ...report(other) } } : {}),
    };
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    return EXIT.ok;
  }
  const label = comparison?.kind === "mechanism" ? "off" : "B";
  process.stdout.write(
    `${renderTable(base.summary, other ? { label, summary: other.summary } : undefined)}\n`,
  );
  const names = (side: Side) => side.models.map((m) => m.name).join(", ");
  const what =
    comparison?.kind === "mechanism"
      ? `; "(off)": ${MECHANISMS[comparison.mechanism]} off`
      : comparison?.kind === "model"
        ? `; "(B)": the models of ${comparison.module} (${names(other!)})`
        : comparison?.kind === "tools"
          ? `; "(B)": the tools of ${comparison.module} (${other!.toolSets.map((t) => t.digest.slice(0, 12)).join(", ")})`
          : "";
  process.stdout.write(
    `k=${options.k}, seed ${seed}, model ${names(base)}, budget ${set.budget.maxSteps} steps / ${set.budget.maxSpendTokens} tokens per turn, ${set.budget.timeMs} ms per run${what}\n`,
  );
  return EXIT.ok;
}

/** How the progress bar names the compared side. */
function labelOf(comparison: Comparison | undefined): string {
  if (comparison?.kind === "mechanism") return `no ${comparison.mechanism}`;
  return comparison ? `${comparison.kind} B` : "";
}
