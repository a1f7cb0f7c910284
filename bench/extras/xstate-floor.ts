/**
 * The statecharts' own share of a step: Keel's turn, batch and tool-call machines hosted as
 * XState actors exactly as the runtime hosts them (one turn actor, one batch per turn, one actor
 * per call), driven synchronously with no-op effects: no model, no log, no tool, no promise.
 * Whatever a step costs beyond this figure is Keel's own code and its awaits.
 * Run: `npx tsx bench/extras/xstate-floor.ts` (prints µs per step, 1 and 8 calls per step).
 */
import { type AnyActorRef, createActor } from "xstate";
import { batchMachine } from "../../machines/batch.machine.ts";
import type { BatchCallSpec } from "../../machines/batch-schedule.ts";
import { toolCallMachine } from "../../machines/tool-call.machine.ts";
import { turnMachine } from "../../machines/turn.machine.ts";

const recording: AnyActorRef[] = [];
let turn: AnyActorRef | undefined;
const toolCall = toolCallMachine.provide({
  actions: { recordStart: ({ self }) => void recording.push(self), execute: () => {} },
});
const batch = batchMachine.provide({
  actors: { toolCall },
  actions: { roundDone: () => turn?.send({ type: "batch.done" }) },
});
const machine = turnMachine.provide({ actors: { batch } });
const ok = { ok: true as const, content: "ok" };

/** One turn of `steps` steps with `calls` calls each; throws if the turn did not keep up. */
function run(steps: number, calls: number): void {
  const actor = createActor(machine, {
    input: {
      turnId: "t",
      limits: { maxSteps: steps + 1, maxTokens: 0, deadlineMs: 0 },
      maxParallelToolCalls: 8,
      stopDeadlineMs: 1000,
      finalizeDeadlineMs: 1000,
    },
  });
  turn = actor;
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

for (const calls of [1, 8]) {
  const warmUntil = performance.now() + 1500;
  while (performance.now() < warmUntil) run(20, calls);
  const samples: number[] = [];
  for (let r = 0; r < 7; r++) {
    const start = performance.now();
    run(500, calls);
    samples.push(((performance.now() - start) * 1000) / 500);
  }
  samples.sort((a, b) => a - b);
  console.log(
    `${calls} call(s)/step: ${samples[3].toFixed(1)} µs per step (median of 7 × 500 steps)`,
  );
}
