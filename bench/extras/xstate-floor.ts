/**
 * The statecharts' own share of a step: Keel's turn, batch and tool-call charts hosted exactly
 * as the runtime hosts them (`hostedTurnMachine` and `bindEffects` from actors/charts.ts: one
 * turn actor, one batch per turn, one actor per call), driven synchronously with no-op effects:
 * no model, no log, no tool, no promise. Whatever a step costs beyond this figure is Keel's own
 * code and its awaits.
 *
 * Run: `npx tsx bench/extras/xstate-floor.ts` (µs per step, 1 and 8 calls per step); imported
 * (bench/extras/step-vs-floor.ts), it only exports `floorTurn`.
 * `KEEL_ROOT=/path/to/other/checkout` measures that checkout's charts in the same way (it must
 * have actors/charts.ts).
 */
import { pathToFileURL } from "node:url";
import type { AnyActorRef } from "xstate";
import { createActor } from "xstate";
import type { BatchCallSpec } from "../../machines/policies/batch-schedule.ts";
import type { TurnEffects } from "../../machines/turn.types.ts";

const root = process.env.KEEL_ROOT ?? new URL("../..", import.meta.url).pathname;
const charts: typeof import("../../actors/charts.ts") = await import(`${root}/actors/charts.ts`);

const recording: AnyActorRef[] = [];
let turn: AnyActorRef | undefined;
const none = () => {};
const effects: TurnEffects = {
  recordStart: (self) => void recording.push(self),
  execute: none,
  abort: none,
  stopping: none,
  callSettled: none,
  roundDone: () => turn?.send({ type: "batch.done" }),
  prepare: (self, { attempt }) => self.send({ type: "attempt.recorded", attempt }),
  compact: none,
  abortCompaction: none,
  pollInbox: none,
  recordAttempt: (self, { attempt }) => self.send({ type: "attempt.recorded", attempt }),
  startAttempt: none,
  abortAttempt: none,
  pollAtEnd: none,
  refuseCalls: none,
  checkPermissions: none,
  correctCalls: none,
  declineCalls: none,
  rejectInvalid: none,
  commitBatch: none,
  loopWarned: none,
  retryScheduled: none,
  loopStopped: none,
  cancelAcknowledged: none,
  executionStopped: none,
  finalize: none,
  ended: none,
};
const machine = charts.hostedTurnMachine();
const ok = { ok: true as const, content: "ok" };

/** One turn of `steps` steps with `calls` calls each; throws if the turn did not keep up. */
function run(steps: number, calls: number): void {
  const actor = createActor(machine, {
    input: {
      turnId: "t",
      limits: { maxSteps: steps + 1, maxSpendTokens: 0, deadlineMs: 0 },
      maxParallelToolCalls: 8,
      stopDeadlineMs: 1000,
      finalizeDeadlineMs: 1000,
      maxOverflowRecoveries: 1,
    },
  });
  turn = actor;
  charts.bindEffects(actor.system, effects);
  actor.start();
  for (let s = 1; s <= steps; s++) {
    const specs: BatchCallSpec[] = Array.from({ length: calls }, (_, i) => ({
      callId: `c${s}_${i}`,
      name: "touch",
      concurrencySafe: true,
      cancellable: true,
      executionMode: "parallel",
    }));
    actor.send({
      type: "attempt.done",
      attempt: s,
      finishReason: "tool_calls",
      callCount: calls,
      calls: specs,
      tokens: 0,
    });
    if (recording.length !== calls) throw new Error(`step ${s}: ${recording.length} calls started`);
    for (const call of recording.splice(0)) {
      call.send({ type: "call.recorded" });
      call.send({ type: "call.complete", result: ok });
    }
  }
  const value = JSON.stringify(actor.getSnapshot().value);
  if (!value.includes("sampling")) throw new Error(`the turn ended in ${value}, not sampling`);
  actor.stop();
}

/** Runs one turn of `steps` steps with `calls` calls each (for benches that compare with it). */
export const floorTurn = run;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const main =
  process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
for (const calls of main ? [1, 8] : []) {
  const warmUntil = performance.now() + 1500;
  while (performance.now() < warmUntil) run(20, calls);
  const samples: number[] = [];
  for (let r = 0; r < 9; r++) {
    const start = performance.now();
    run(500, calls);
    samples.push(((performance.now() - start) * 1000) / 500);
  }
  console.log(`${calls} call(s)/step, median of 9 × 500 steps: ${median(samples).toFixed(1)} µs`);
}
