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
} from "../index.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
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

/** How one run went. */
export interface RunRecord {
  task: string;
  run: number;
  status: PromptResult["status"];
  acceptance: string;
  tokens: number;
  steps: number;
  ms: number;
  rounds: number;
  /** A retry or an overflow compaction was tried and the run still failed. */
  recoveryFailed: boolean;
}

/** The figures of one task set under one configuration. */
export interface EvalSummary {
  k: number;
  tasks: {
    id: string;
    accepted: number;
    passAtK: boolean;
    passHatK: boolean;
    meanTokens: number;
    meanSteps: number;
    meanMs: number;
    completedNotAccepted: number;
    recoveryFailures: number;
  }[];
  /** Share of tasks with at least one accepted run of k. */
  passAtK: number;
  /** Share of tasks whose k runs were all accepted. */
  passHatK: number;
  meanTokens: number;
  meanSteps: number;
  meanMs: number;
  completedNotAccepted: number;
  recoveryFailures: number;
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
    };
  });
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
  };
}

/** Reads and checks a task set; a bad one is a usage error naming the field. */
export function loadTaskSet(file: string): TaskSet {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new CliError(`cannot read the task set ${file}: ${(err as Error).message}`, EXIT.usage);
  }
  const bad = (what: string) =>
    new CliError(
      `${file}: ${what} (expected { "budget": { "maxSteps", "maxSpendTokens", "timeMs" }, "tasks": [{ "id", "prompt", "files", "checks": [{ "name", "command" }] }] })`,
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
      if (typeof (c as { command?: unknown }).command !== "string")
        throw bad(
          `tasks[${i}].checks: every check needs a "command" (a task file holds no functions)`,
        );
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
 * `--model <module>`: an ES module whose default export makes the model of one run.
 * Contract of the factory: `({ task, run, seed, variant }) => Model`, called once per run.
 */
export type ModelFactory = (ctx: {
  task: string;
  run: number;
  seed: number;
  variant: "base" | Mechanism;
}) => Model | Promise<Model>;

async function loadFactory(module: string | undefined): Promise<ModelFactory> {
  if (!module) {
    const model = modelFromEnv();
    return () => model;
  }
  let mod: { default?: unknown };
  try {
    mod = await import(pathToFileURL(path.resolve(module)).href);
  } catch (err) {
    throw new CliError(`cannot load --model ${module}: ${(err as Error).message}`, EXIT.config);
  }
  if (typeof mod.default !== "function")
    throw new CliError(
      `--model ${module} must export a default function ({ task, run, seed, variant }) => Model`,
      EXIT.config,
    );
  return mod.default as ModelFactory;
}

/** Runs one task once, in a fresh workspace, with the fixed budget. */
async function runOnce(
  set: TaskSet,
  task: EvalTask,
  run: number,
  model: Model,
  variant: "base" | Mechanism,
): Promise<RunRecord> {
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
    const agent = createAgent({
      model,
      tools: builtinTools({ root: ws }),
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
    await agent.close();
    return {
      task: task.id,
      run,
      status: result.status,
      acceptance: result.acceptance ?? "pending",
      tokens: result.usage.inputTokens + result.usage.outputTokens,
      steps: result.steps,
      ms,
      rounds: result.rounds ?? 0,
      recoveryFailed: recoveries > 0 && result.status === "failed",
    };
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
}

/** A progress bar on stderr, drawn only when stderr is a terminal. */
function progressBar(total: number) {
  const tty = process.stderr.isTTY === true;
  let done = 0;
  const draw = (label: string) => {
    if (!tty) return;
    const width = 24;
    const filled = Math.round((done / total) * width);
    process.stderr.write(
      `\r[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${done}/${total} ${label}`.padEnd(72),
    );
  };
  return {
    tick(label: string) {
      done++;
      draw(label);
    },
    start: () => draw(""),
    end() {
      if (tty) process.stderr.write(`\r${" ".repeat(72)}\r`);
    },
  };
}

const pct = (x: number) => `${(100 * x).toFixed(0)}%`;

/** The table of one summary, or of two side by side (base | mechanism off). */
export function renderTable(
  base: EvalSummary,
  off?: { mechanism: Mechanism; summary: EvalSummary },
): string {
  const head = [
    "task",
    "accepted",
    "pass@k",
    "pass^k",
    "mean tokens",
    "mean steps",
    "mean ms",
    "done≠accepted",
    "recovery fails",
  ];
  const cells = (t: EvalSummary["tasks"][number] | EvalSummary, k: number) => [
    "accepted" in t ? `${t.accepted}/${k}` : "",
    "id" in t ? (t.passAtK ? "yes" : "no") : pct(t.passAtK as number),
    "id" in t ? (t.passHatK ? "yes" : "no") : pct(t.passHatK as number),
    Math.round(t.meanTokens).toString(),
    t.meanSteps.toFixed(1),
    Math.round(t.meanMs).toString(),
    String(t.completedNotAccepted),
    String(t.recoveryFailures),
  ];
  const rows: string[][] = [];
  const header = off ? ["task", ...head.slice(1).flatMap((h) => [h, `${h} (off)`])] : head;
  const zip = (a: string[], b?: string[]) => (b ? a.flatMap((x, i) => [x, b[i]]) : a);
  for (const [i, t] of base.tasks.entries()) {
    rows.push([
      t.id,
      ...zip(cells(t, base.k), off ? cells(off.summary.tasks[i], base.k) : undefined),
    ]);
  }
  rows.push(["all", ...zip(cells(base, base.k), off ? cells(off.summary, base.k) : undefined)]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) =>
    r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

export interface EvalOptions {
  k: number;
  json?: boolean;
  model?: string;
  seed?: number;
  compare?: string;
}

/** `keel eval <tasks.json> --k 5`: each task k times, graded by its checks. */
export async function runEval(file: string, options: EvalOptions): Promise<ExitCode> {
  const set = loadTaskSet(file);
  if (options.compare !== undefined && !(options.compare in MECHANISMS))
    throw new CliError(
      `--compare ${options.compare}: unknown mechanism; choose one of ${Object.keys(MECHANISMS).join(", ")}`,
      EXIT.usage,
    );
  const factory = await loadFactory(options.model);
  const seed = options.seed ?? 1;
  const variants: ("base" | Mechanism)[] = ["base"];
  if (options.compare) variants.push(options.compare as Mechanism);
  const bar = progressBar(set.tasks.length * options.k * variants.length);
  bar.start();
  const runs = new Map<string, RunRecord[]>();
  try {
    for (const variant of variants) {
      const list: RunRecord[] = [];
      runs.set(variant, list);
      for (const task of set.tasks) {
        for (let run = 0; run < options.k; run++) {
          const model = await factory({ task: task.id, run, seed, variant });
          list.push(await runOnce(set, task, run, model, variant));
          bar.tick(`${variant === "base" ? "" : `no ${variant} · `}${task.id} #${run + 1}`);
        }
      }
    }
  } finally {
    bar.end();
  }
  const ids = set.tasks.map((t) => t.id);
  const base = summarize(ids, runs.get("base")!, options.k);
  const offRuns = options.compare ? runs.get(options.compare) : undefined;
  const off = offRuns ? summarize(ids, offRuns, options.k) : undefined;
  if (options.json) {
    const out = {
      k: options.k,
      seed,
      budget: set.budget,
      base: { summary: base, runs: runs.get("base") },
      ...(off ? { compare: { mechanism: options.compare, summary: off, runs: offRuns } } : {}),
    };
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  } else {
    const mechanism = options.compare as Mechanism | undefined;
    process.stdout.write(
      `${renderTable(base, off && mechanism ? { mechanism, summary: off } : undefined)}\n`,
    );
    process.stdout.write(
      `k=${options.k}, seed ${seed}, budget ${set.budget.maxSteps} steps / ${set.budget.maxSpendTokens} tokens per turn, ${set.budget.timeMs} ms per run${mechanism ? `; "(off)": ${MECHANISMS[mechanism]} off` : ""}\n`,
    );
  }
  return EXIT.ok;
}
