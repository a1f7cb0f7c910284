/**
 * The JSON that passes between `bench/run.ts` and the child processes it spawns. Every child
 * prints exactly one line starting with {@link RESULT_MARKER} on stdout, followed by JSON;
 * progress goes to stderr.
 */

/** Prefix of the single stdout line that carries a child's result. */
export const RESULT_MARKER = "@@KEEL-BENCH-RESULT ";

/** What the runner asks a step-benchmark child to measure. */
export interface StepBenchOptions {
  /** Step counts to measure, ascending (e.g. 10, 100, 1 000, 10 000). */
  ns: number[];
  /** Repetitions per step count; the median is reported. */
  reps: number;
  /** Minimum warm-up time before the first measured run. */
  warmupMs: number;
  /** Tool calls per model response (1, or 8 for the parallel variant). */
  callsPerStep: number;
  /** A step count whose projected time for all repetitions exceeds this is skipped. */
  budgetPerPointMs: number;
  /** Runtime-specific variant, e.g. "memory" or "sqlite" for Keel's store. */
  variant?: string;
}

/** One measured (or skipped) step count. */
export interface PointResult {
  steps: number;
  /** Median µs per step over the repetitions; null when skipped. */
  usPerStep: number | null;
  /** Every repetition's µs per step, in run order. */
  samplesUs: number[];
  /** Median heap still reachable after a run while the runtime's handle is kept (bytes). */
  retainedBytes: number | null;
  /** Why this step count was not measured. */
  skipped?: string;
}

/** A step-benchmark child's answer. */
export type StepBenchResult =
  | {
      ok: true;
      label: string;
      version: string;
      callsPerStep: number;
      warmupMs: number;
      warmupRuns: number;
      points: PointResult[];
      notes: string[];
    }
  | { ok: false; error: string };

/** Parses the child's stdout; returns the error text when no result line is present. */
export function parseChildOutput<T>(stdout: string): { ok: true; value: T } | { ok: false } {
  const line = stdout
    .split("\n")
    .reverse()
    .find((l) => l.startsWith(RESULT_MARKER));
  if (line === undefined) return { ok: false };
  return { ok: true, value: JSON.parse(line.slice(RESULT_MARKER.length)) as T };
}

/** Prints the result line (the child's last stdout output). */
export function emitResult(value: unknown): void {
  process.stdout.write(`${RESULT_MARKER}${JSON.stringify(value)}\n`);
}

/** Reads the JSON options a child was started with (argv[2]); throws with a usage hint. */
export function readChildOptions<T>(): T {
  const raw = process.argv[2];
  if (raw === undefined) {
    throw new Error(
      "missing options: bench children are started by `npm run bench` with their options as one JSON argument",
    );
  }
  return JSON.parse(raw) as T;
}
