/**
 * The statecharts' own share of a step: Keel's turn, batch and tool-call charts hosted as
 * XState actors exactly as the runtime hosts them (one turn actor, one batch per turn, one actor
 * per call), driven synchronously with no-op effects: no model, no log, no tool, no promise.
 * Whatever a step costs beyond this figure is Keel's own code and its awaits.
 *
 * Two hostings of the calls, rounds interleaved in this one process: `logic` (the runtime's:
 * each call's actor runs `toolCallLogic`, the hand-compiled chart) and `machine` (each call's
 * actor runs `toolCallMachine` through XState's interpreter, as until 2026-11-30).
 * Run: `npx tsx bench/extras/xstate-floor.ts` (µs per step, 1 and 8 calls per step, and the
 * ratio logic / machine).
 */
import { type AnyActorRef, createActor } from "xstate";
import { toolCallLogic } from "../../actors/tool-call-logic.ts";
import { batchMachine } from "../../machines/batch.machine.ts";
import type { BatchCallSpec } from "../../machines/batch-schedule.ts";
import { type ToolCallMachine, toolCallMachine } from "../../machines/tool-call.machine.ts";
import { turnMachine } from "../../machines/turn.machine.ts";

const recording: AnyActorRef[] = [];
let turn: AnyActorRef | undefined;
const hostings = {
  logic: toolCallLogic({
    recordStart: (self) => void recording.push(self),
    execute: () => {},
    abort: () => {},
  }) as unknown as ToolCallMachine,
  machine: toolCallMachine.provide({
    actions: { recordStart: ({ self }) => void recording.push(self), execute: () => {} },
  }),
};
type Hosting = keyof typeof hostings;
const machines = Object.fromEntries(
  Object.entries(hostings).map(([name, toolCall]) => {
    const batch = batchMachine.provide({
      actors: { toolCall },
      actions: { roundDone: () => turn?.send({ type: "batch.done" }) },
    });
    return [name, turnMachine.provide({ actors: { batch } })];
  }),
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
  while (performance.now() < warmUntil) {
    run("logic", 20, calls);
    run("machine", 20, calls);
  }
  const samples: Record<Hosting, number[]> = { logic: [], machine: [] };
  for (let r = 0; r < 9; r++) {
    for (const hosting of (r % 2 ? ["machine", "logic"] : ["logic", "machine"]) as Hosting[]) {
      const start = performance.now();
      run(hosting, 500, calls);
      samples[hosting].push(((performance.now() - start) * 1000) / 500);
    }
  }
  const [logic, machine] = [median(samples.logic), median(samples.machine)];
  console.log(
    `${calls} call(s)/step: logic ${logic.toFixed(1)} µs, machine ${machine.toFixed(1)} µs per step ` +
      `(median of 9 × 500 steps); logic / machine ${(logic / machine).toFixed(2)}×`,
  );
}
