/**
 * The statecharts' own share of a step: Keel's turn, batch and tool-call charts hosted as
 * XState actors exactly as the runtime hosts them (one turn actor, one batch per turn, one actor
 * per call), driven synchronously with no-op effects: no model, no log, no tool, no promise.
 * Whatever a step costs beyond this figure is Keel's own code and its awaits.
 *
 * Three hostings of the batch and its calls, rounds interleaved in this one process: `logic`
 * (the runtime's: `batchLogic` and `toolCallLogic`, the charts compiled by hand),
 * `machine+calls` (`batchMachine` hosting `toolCallLogic` calls) and `machine` (both machines
 * through XState's interpreter, as until 2026-11-30). The turn is `turnMachine` in all three.
 * Run: `npx tsx bench/extras/xstate-floor.ts` (µs per step, 1 and 8 calls per step, and each
 * hosting's ratio to `machine`).
 */
import { type AnyActorRef, createActor } from "xstate";
import { batchLogic } from "../../actors/batch-logic.ts";
import { toolCallLogic } from "../../actors/tool-call-logic.ts";
import { type BatchMachine, batchMachine } from "../../machines/batch.machine.ts";
import type { BatchCallSpec } from "../../machines/batch-schedule.ts";
import { type ToolCallMachine, toolCallMachine } from "../../machines/tool-call.machine.ts";
import { turnMachine } from "../../machines/turn.machine.ts";

const recording: AnyActorRef[] = [];
let turn: AnyActorRef | undefined;
const callLogic = toolCallLogic({
  recordStart: (self) => void recording.push(self),
  execute: () => {},
  abort: () => {},
}) as unknown as ToolCallMachine;
const callMachine = toolCallMachine.provide({
  actions: { recordStart: ({ self }) => void recording.push(self), execute: () => {} },
});
const roundDone = () => turn?.send({ type: "batch.done" });
const batchOf = (toolCall: ToolCallMachine) =>
  batchMachine.provide({ actors: { toolCall }, actions: { roundDone } });
const batches = {
  /** The runtime's: both charts hand-compiled. */
  logic: batchLogic({
    toolCall: callLogic,
    effects: { callSettled: () => {}, roundDone },
  }) as unknown as BatchMachine,
  /** The batch machine hosting hand-compiled calls. */
  "machine+calls": batchOf(callLogic),
  /** Both through XState's interpreter, as until 2026-11-30. */
  machine: batchOf(callMachine),
};
type Hosting = keyof typeof batches;
const hostingNames = Object.keys(batches) as Hosting[];
const machines = Object.fromEntries(
  hostingNames.map((name) => [name, turnMachine.provide({ actors: { batch: batches[name] } })]),
) as Record<Hosting, typeof turnMachine>;
const ok = { ok: true as const, content: "ok" };

/** One turn of `steps` steps with `calls` calls each; throws if the turn did not keep up. */
function run(hosting: Hosting, steps: number, calls: number): void {
  const machine = machines[hosting];
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

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
for (const calls of [1, 8]) {
  const warmUntil = performance.now() + 1500;
  while (performance.now() < warmUntil) for (const h of hostingNames) run(h, 20, calls);
  const samples = Object.fromEntries(hostingNames.map((h) => [h, [] as number[]])) as Record<
    Hosting,
    number[]
  >;
  for (let r = 0; r < 9; r++) {
    const order = r % 2 ? [...hostingNames].reverse() : hostingNames;
    for (const hosting of order) {
      const start = performance.now();
      run(hosting, 500, calls);
      samples[hosting].push(((performance.now() - start) * 1000) / 500);
    }
  }
  const machine = median(samples.machine);
  const parts = hostingNames.map((h) => {
    const us = median(samples[h]);
    return `${h} ${us.toFixed(1)} µs (${(us / machine).toFixed(2)}×)`;
  });
  console.log(`${calls} call(s)/step, median of 9 × 500 steps: ${parts.join(", ")}`);
}
