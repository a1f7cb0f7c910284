import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import {
  type AcceptanceCheck,
  type AgentEvent,
  builtinTools,
  createAgent,
  type Model,
  type PromptResult,
  type RetryPolicy,
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
import {
  compileExpectations,
  countToolCalls,
  type ExpectedCall,
  type ToolCounts,
  type ToolMetrics,
  toolMetrics,
} from "./eval-tools.ts";
import { modelFromEnv } from "./run.ts";

/** One task of a task set: a prompt, a fresh workspace and the checks that grade it. */
export interface EvalTask {
  id: string;
  prompt: string;
  /** The workspace each run starts from: relative path → content. */
  files: Record<string, string>;
  /** Command checks (`{ name, command, cwd?, timeoutMs?, files? }`), run in the workspace. */
  checks: AcceptanceCheck[];
  /** The acceptance loop for this task (`until: "passed"`, `maxRounds`). */
  acceptance?: { until?: "passed"; maxRounds?: number };
  /**
   * The tool calls the task expects (cli/eval-tools.ts): eval then reports tool-choice precision
   * and recall and the argument validity rate of its runs.
   */
  expectedCalls?: ExpectedCall[];
}

/** The fixed budget of every run: model steps and tokens per turn, wall time per run. */
export interface EvalBudget {
  maxSteps: number;
  maxSpendTokens: number;
  timeMs: number;
}

export interface TaskSet {
  budget: EvalBudget;
  tasks: EvalTask[];
  /** Retry policy for the runs (e.g. shorter waits for a local model). */
  retry?: Partial<RetryPolicy>;
}

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

/** How one run went. */
export interface RunRecord {
  task: string;
  run: number;
  /** The model's name (`Model.name`). */
  model: string;
  /** The digest of the tools it was offered (`toolSetRecord`). */
  toolSet: string;
  status: PromptResult["status"];
  acceptance: string;
  tokens: number;
  steps: number;
  ms: number;
  rounds: number;
  /** A retry or an overflow compaction was tried and the run still failed. */
  recoveryFailed: boolean;
  /** The run's tool calls against the task's `expectedCalls` (absent when it declares none). */
  tools?: ToolCounts;
}

/** The figures of one task set under one configuration. */
export interface EvalSummary {
  k: number;
  tasks: ({
    id: string;
    accepted: number;
    passAtK: boolean;
    passHatK: boolean;
    meanTokens: number;
    meanSteps: number;
    meanMs: number;
    completedNotAccepted: number;
    recoveryFailures: number;
  } & Partial<ToolMetrics>)[];
  /** Share of tasks with at least one accepted run of k. */
  passAtK: number;
  /** Share of tasks whose k runs were all accepted. */
  passHatK: number;
  meanTokens: number;
  meanSteps: number;
  meanMs: number;
  completedNotAccepted: number;
  recoveryFailures: number;
  /** Over the runs of every task that declares `expectedCalls` (absent when none does). */
  tools?: ToolMetrics;
}

const mean = (xs: number[]) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);

/** The figures of `runs` (k per task). This is a pure function. */
export function summarize(taskIds: string[], runs: RunRecord[], k: number): EvalSummary {
  const tasks = taskIds.map((id) => {
    const mine = runs.filter((r) => r.task === id);
    const accepted = mine.filter((r) => r.acceptance === "passed").length;
    return {
      id,
      accepted,
      passAtK: accepted > 0,
      passHatK: mine.length > 0 && accepted === mine.length,
      meanTokens: mean(mine.map((r) => r.tokens)),
      meanSteps: mean(mine.map((r) => r.steps)),
      meanMs: mean(mine.map((r) => r.ms)),
      completedNotAccepted: mine.filter(
        (r) => r.status === "completed" && r.acceptance !== "passed",
      ).length,
      recoveryFailures: mine.filter((r) => r.recoveryFailed).length,
      ...metricsOf(mine),
    };
  });
  const measured = metricsOf(runs);
  return {
    k,
    tasks,
    passAtK: mean(tasks.map((t) => (t.passAtK ? 1 : 0))),
    passHatK: mean(tasks.map((t) => (t.passHatK ? 1 : 0))),
    meanTokens: mean(runs.map((r) => r.tokens)),
    meanSteps: mean(runs.map((r) => r.steps)),
    meanMs: mean(runs.map((r) => r.ms)),
    completedNotAccepted: tasks.reduce((a, t) => a + t.completedNotAccepted, 0),
    recoveryFailures: tasks.reduce((a, t) => a + t.recoveryFailures, 0),
    ...(measured ? { tools: measured } : {}),
  };
}

/** The tool metrics of runs that counted their calls, or undefined when none did. */
function metricsOf(runs: readonly RunRecord[]): ToolMetrics | undefined {
  const counts = runs.flatMap((r) => (r.tools ? [r.tools] : []));
  return counts.length === 0 ? undefined : toolMetrics(counts);
}

/** Reads and checks a JSON task set; a bad one is a usage error naming the field. */
export function loadTaskSet(file: string): TaskSet {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new CliError(`cannot read the task set ${file}: ${(err as Error).message}`, EXIT.usage);
  }
  return checkTaskSet(raw, file);
}

/**
 * Reads a task set: JSON, or an ES module (`.mjs`, `.js`, `.ts`) whose default export is the
 * task set (or a function returning it), which may hold what JSON cannot: predicates on a
 * task's expected call arguments, function checks.
 */
export async function readTaskSet(file: string): Promise<TaskSet> {
  if (!/\.(mjs|cjs|js|mts|ts)$/.test(file)) return loadTaskSet(file);
  let mod: { default?: unknown };
  try {
    mod = await import(pathToFileURL(path.resolve(file)).href);
  } catch (err) {
    throw new CliError(`cannot load the task set ${file}: ${(err as Error).message}`, EXIT.usage);
  }
  const set = typeof mod.default === "function" ? await mod.default() : mod.default;
  return checkTaskSet(set, file);
}

/** Checks a task set; a bad one is a usage error naming the field. */
export function checkTaskSet(raw: unknown, file: string): TaskSet {
  const module = !file.endsWith(".json");
  const bad = (what: string) =>
    new CliError(
      `${file}: ${what} (expected { "budget": { "maxSteps", "maxSpendTokens", "timeMs" }, "tasks": [{ "id", "prompt", "files", "checks": [{ "name", "command" }], "expectedCalls"?: [{ "name", "arguments"? }] }] })`,
      EXIT.usage,
    );
  const set = raw as TaskSet;
  const b = set?.budget;
  for (const key of ["maxSteps", "maxSpendTokens", "timeMs"] as const) {
    if (!(Number.isInteger(b?.[key]) && b[key] > 0))
      throw bad(`budget.${key} must be a positive integer`);
  }
  if (!Array.isArray(set.tasks) || set.tasks.length === 0)
    throw bad("tasks must be a non-empty array");
  const ids = new Set<string>();
  for (const [i, t] of set.tasks.entries()) {
    if (typeof t?.id !== "string" || !t.id || ids.has(t.id))
      throw bad(`tasks[${i}].id must be a unique non-empty string`);
    // The id names a temporary folder: no separator or dot-dot may take it elsewhere.
    if (!/^[A-Za-z0-9_.-]+$/.test(t.id) || t.id === "." || t.id === "..")
      throw bad(
        `tasks[${i}].id ${JSON.stringify(t.id)} may hold only letters, digits, ".", "_" and "-"`,
      );
    ids.add(t.id);
    if (typeof t.prompt !== "string" || !t.prompt) throw bad(`tasks[${i}].prompt must be a string`);
    if (typeof t.files !== "object" || t.files === null)
      throw bad(`tasks[${i}].files must be an object`);
    for (const rel of Object.keys(t.files)) {
      const why = outsideWorkspace(rel);
      if (why) throw bad(`tasks[${i}].files[${JSON.stringify(rel)}] ${why}`);
    }
    if (!Array.isArray(t.checks) || t.checks.length === 0)
      throw bad(`tasks[${i}].checks must be a non-empty array`);
    for (const c of t.checks) {
      if (!module && typeof (c as { command?: unknown }).command !== "string")
        throw bad(
          `tasks[${i}].checks: every check needs a "command" (a task file holds no functions)`,
        );
    }
    if (t.expectedCalls !== undefined) {
      try {
        compileExpectations(t.expectedCalls, `tasks[${i}].expectedCalls`);
      } catch (err) {
        throw bad((err as Error).message);
      }
    }
  }
  return set;
}

/**
 * Why a task file's path would be written outside its run's workspace (absolute, `..` segments,
 * empty), or undefined when it stays inside. This is a pure function.
 */
export function outsideWorkspace(rel: string): string | undefined {
  if (rel === "" || rel.includes("\0")) return "is not a usable path";
  if (path.isAbsolute(rel) || path.win32.isAbsolute(rel))
    return "is absolute; task files are relative to the run's workspace";
  const normal = path.posix.normalize(rel.replaceAll("\\", "/"));
  if (normal === ".." || normal.startsWith("../") || normal === ".")
    return "leaves the run's workspace (a '..' segment); task files must stay inside it";
  return undefined;
}

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
