import type { MachineInfo } from "./machine.ts";
import type { StepBenchResult } from "./protocol.ts";

/** One runtime × calls-per-step child, as the runner recorded it. */
export interface StepRun {
  id: string;
  label: string;
  callsPerStep: number;
  result: StepBenchResult;
  /** Wall time of the child process, including start-up and warm-up. */
  ms: number;
}

/** An extra section's child answer (helpers' benches, session memory). */
export type ExtraResult = { ok: true; value: unknown; ms: number } | { ok: false; error: string };

/** Everything one `npm run bench` measured: the input of the RESULTS.md writer. */
export interface BenchResults {
  mode: "full" | "quick";
  startedAt: string;
  durationS: number;
  machine: MachineInfo;
  loadAtEnd: number;
  settings: { ns: number[]; reps: number; warmupMs: number; budgetPerPointMs: number };
  steps: StepRun[];
  sessions: ExtraResult;
  argPreview: ExtraResult;
  store: ExtraResult;
  prepareCall: ExtraResult;
}
