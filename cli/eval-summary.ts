// What `keel eval` measures of its runs: one record per run, and the figures of a task set
// (pass@k, pass^k, means, tool metrics). Pure.
import type { PromptResult } from "../index.ts";
import { type ToolCounts, type ToolMetrics, toolMetrics } from "./eval-tools.ts";

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
