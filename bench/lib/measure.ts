import { performance } from "node:perf_hooks";
import {
  emitResult,
  type PointResult,
  readChildOptions,
  type StepBenchOptions,
  type StepBenchResult,
} from "./protocol.ts";
import { formatUs, median, projectRunMs } from "./stats.ts";

/** What one run of a harness did, and what it keeps alive for the retained-heap reading. */
export interface RunOutcome {
  /** Tool executions the trivial tool counted during the run. */
  toolExecutions: number;
  /** The runtime's handle (agent, session, result with history): held while the heap is read. */
  keep: unknown;
}

/** One runtime's side of the step benchmark. */
export interface StepHarness {
  /** Shown in the tables, e.g. "pi-agent-core". */
  label: string;
  /** Package and version, e.g. "@mariozechner/pi-agent-core 0.73.1". */
  version: string;
  /** Configuration worth stating next to the numbers. */
  notes?: string[];
  /**
   * Contract: runs one prompt of `steps` model calls, each answered by the fake model with
   * `callsPerStep` calls to one trivial tool whose results are fed back, then one call answered
   * with final text; resolves when the runtime reports the prompt finished.
   */
  run(steps: number, callsPerStep: number): Promise<RunOutcome>;
  /** Releases files and handles (e.g. a SQLite database). */
  close?(): Promise<void>;
}

type Gc = () => void;

const macrotask = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Lets deferred clean-up that a runtime scheduled after its prompt resolved run (a few event-loop
 * turns), then collects twice. Without the turns, memory that a finished run pins until its next
 * macrotask would count against the following run's baseline and hide its retained heap.
 */
async function collect(gc: Gc): Promise<void> {
  for (let i = 0; i < 3; i++) await macrotask();
  await new Promise<void>((resolve) => setTimeout(resolve, 0));
  gc();
  gc();
}

/** Module-level so the optimiser cannot drop the handle before the heap is read. */
let _kept: unknown;

async function runChecked(h: StepHarness, steps: number, callsPerStep: number): Promise<void> {
  const outcome = await h.run(steps, callsPerStep);
  const expected = steps * callsPerStep;
  if (outcome.toolExecutions !== expected) {
    throw new Error(
      `${h.label} executed the tool ${outcome.toolExecutions} times for ${steps} steps × ${callsPerStep} calls (expected ${expected}): the harness is not doing the work it reports`,
    );
  }
  _kept = outcome.keep;
}

/**
 * Heap readings per N: fewer than timed repetitions (each costs a run and two full GCs); one at
 * N ≥ 10 000, where GC noise is small against the history kept.
 */
const heapReps = (steps: number, reps: number) => (steps >= 10_000 ? 1 : Math.min(reps, 3));

/** A repetition lasts at least this long: short runs are repeated back to back (timer noise). */
const minRepMs = 20;

async function timeShortRuns(h: StepHarness, steps: number, callsPerStep: number): Promise<number> {
  let runs = 0;
  const start = performance.now();
  let elapsedMs = 0;
  do {
    await runChecked(h, steps, callsPerStep);
    runs++;
    elapsedMs = performance.now() - start;
  } while (elapsedMs < minRepMs);
  _kept = undefined;
  return (elapsedMs * 1000) / (runs * steps);
}

/**
 * Warms the harness up for at least `warmupMs`, then measures every step count `reps` times:
 * median µs per step and median retained heap. A repetition shorter than 20 ms is timed again
 * as back-to-back runs lasting at least 20 ms (the first run of each still gives the heap). A step count whose projected time exceeds the
 * budget is reported as skipped with the projection.
 */
export async function measureSteps(
  h: StepHarness,
  o: StepBenchOptions,
): Promise<StepBenchResult & { ok: true }> {
  const gc = (globalThis as { gc?: Gc }).gc;
  if (gc === undefined) {
    throw new Error("global gc() is missing: start bench children with `node --expose-gc`");
  }
  const tag = `[${h.label} ×${o.callsPerStep}]`;
  const warmSteps = 20;
  let warmupRuns = 0;
  const warmStart = performance.now();
  while (performance.now() - warmStart < o.warmupMs) {
    await runChecked(h, warmSteps, o.callsPerStep);
    warmupRuns++;
  }
  _kept = undefined;
  const warmupMs = performance.now() - warmStart;
  process.stderr.write(`${tag} warmed up: ${warmupRuns} runs of ${warmSteps} steps\n`);

  // Every N is timed first, back to back; the retained heap is read afterwards in runs of its
  // own. No timed run may follow a forced GC: a full `gc()` drops V8's type feedback for object
  // shapes with no live instance, so the prompts after it run de-optimised for a while (Keel ≈ 2×
  // slower; bench/extras/gc-effect.ts) — a cost no agent pays in steady operation.
  const points: PointResult[] = [];
  const measured: { steps: number; usPerStep: number }[] = [];
  for (const steps of o.ns) {
    const projectedMs = projectRunMs(measured, steps) * (o.reps + heapReps(steps, o.reps));
    if (projectedMs > o.budgetPerPointMs) {
      const why = `projected ${(projectedMs / 1000).toFixed(0)} s for ${o.reps} timed and ${heapReps(steps, o.reps)} heap runs (budget ${(o.budgetPerPointMs / 1000).toFixed(0)} s)`;
      process.stderr.write(`${tag} N=${steps} skipped: ${why}\n`);
      points.push({ steps, usPerStep: null, samplesUs: [], retainedBytes: null, skipped: why });
      continue;
    }
    const samplesUs: number[] = [];
    for (let r = 0; r < o.reps; r++) {
      const start = performance.now();
      await runChecked(h, steps, o.callsPerStep);
      const elapsedMs = performance.now() - start;
      _kept = undefined;
      samplesUs.push(
        elapsedMs >= minRepMs
          ? (elapsedMs * 1000) / steps
          : await timeShortRuns(h, steps, o.callsPerStep),
      );
    }
    const usPerStep = median(samplesUs);
    measured.push({ steps, usPerStep });
    points.push({ steps, usPerStep, samplesUs, retainedBytes: null });
    process.stderr.write(`${tag} N=${steps}: ${formatUs(usPerStep)} µs/step\n`);
  }
  // The heap: collect, run, collect while the runtime's handle is held.
  for (const point of points) {
    if (point.usPerStep === null) continue;
    const retained: number[] = [];
    for (let r = 0; r < heapReps(point.steps, o.reps); r++) {
      await collect(gc);
      const before = process.memoryUsage().heapUsed;
      await runChecked(h, point.steps, o.callsPerStep);
      await collect(gc);
      retained.push(process.memoryUsage().heapUsed - before);
      _kept = undefined;
    }
    point.retainedBytes = median(retained);
  }
  return {
    ok: true,
    label: h.label,
    version: h.version,
    callsPerStep: o.callsPerStep,
    warmupMs,
    warmupRuns,
    points,
    notes: h.notes ?? [],
  };
}

/** A thrown value as one readable line (with the cause chain). */
export function describeError(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const cause = e.cause === undefined ? "" : ` (cause: ${describeError(e.cause)})`;
  return `${e.name}: ${e.message}${cause}`;
}

/** Entry point of a step-benchmark child: builds the harness, measures, prints the result. */
export async function runStepChild(
  create: (o: StepBenchOptions) => Promise<StepHarness>,
): Promise<void> {
  try {
    const o = readChildOptions<StepBenchOptions>();
    const h = await create(o);
    const result = await measureSteps(h, o);
    await h.close?.();
    emitResult(result);
    process.exit(0);
  } catch (e) {
    emitResult({ ok: false, error: describeError(e) } satisfies StepBenchResult);
    process.exit(1);
  }
}
