// A task set of `keel eval` (docs/acceptance.md): its tasks, their fixed budget, and reading
// one from JSON or an ES module, checked field by field.
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { AcceptanceCheck, RetryPolicy } from "../index.ts";
import { CliError, EXIT } from "./errors.ts";
import { compileExpectations, type ExpectedCall } from "./eval-tools.ts";

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
