/**
 * `xstate-floor.ts` for two checkouts at once: the turn, batch and tool-call machines of
 * checkout A and of this one, hosted as XState actors with no-op effects, interleaved in one
 * process (the only comparison that survives this machine's noise). Prints µs per step and B/A.
 *
 *   git worktree add --detach /tmp/keel-a <rev> && ln -s "$PWD/node_modules" /tmp/keel-a/
 *   A=/tmp/keel-a npx tsx bench/extras/xstate-floor-ab.ts        # CPS=8 for 8 calls per step
 */
import { type AnyActorRef, type AnyStateMachine, createActor } from "xstate";

const ok = { ok: true as const, content: "ok" };

/** One side: a function that runs a turn of `steps` steps with `calls` calls each. */
async function side(root: string) {
  const { batchMachine } = await import(`${root}/machines/batch.machine.ts`);
  const { toolCallMachine } = await import(`${root}/machines/tool-call.machine.ts`);
  const { turnMachine } = await import(`${root}/machines/turn.machine.ts`);
  const recording: AnyActorRef[] = [];
  let turn: AnyActorRef | undefined;
  const toolCall = (toolCallMachine as AnyStateMachine).provide({
    actions: { recordStart: ({ self }) => void recording.push(self), execute: () => {} },
  });
  const batch = (batchMachine as AnyStateMachine).provide({
    actors: { toolCall },
    actions: { roundDone: () => turn?.send({ type: "batch.done" }) },
  });
  // A chart with a `preparing` state waits for `step.prepared` (older ones ignore the event).
  const machine = (turnMachine as AnyStateMachine).provide({
    actors: { batch },
    actions: { prepare: ({ self }) => self.send({ type: "step.prepared", compact: false }) },
  });
  return (steps: number, calls: number) => {
    const actor = createActor(machine, {
      input: {
        turnId: "t",
        limits: { maxSteps: steps + 1, maxTokens: 0, maxSpendTokens: 0, deadlineMs: 0 },
        maxParallelToolCalls: 8,
        stopDeadlineMs: 1000,
        finalizeDeadlineMs: 1000,
        maxOverflowRecoveries: 1,
      },
    });
    turn = actor;
    actor.start();
    for (let s = 1; s <= steps; s++) {
      const specs = Array.from({ length: calls }, (_, i) => ({
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
      if (recording.length !== calls) throw new Error(`step ${s}: ${recording.length} started`);
      for (const call of recording.splice(0)) {
        call.send({ type: "call.recorded" });
        call.send({ type: "call.complete", result: ok });
      }
    }
    if (!JSON.stringify(actor.getSnapshot().value).includes("sampling"))
      throw new Error("the turn did not keep up");
    actor.stop();
  };
}

const aRoot = process.env.A;
if (!aRoot)
  throw new Error("set A to the root of the checkout to compare against (see the header)");
const A = await side(aRoot);
const B = await side("../..");
const calls = Number(process.env.CPS ?? 1);
const steps = 300;
const warmUntil = performance.now() + 2000;
while (performance.now() < warmUntil) {
  A(20, calls);
  B(20, calls);
}
const samples = { A: [] as number[], B: [] as number[] };
const time = (f: typeof A) => {
  const start = performance.now();
  f(steps, calls);
  return ((performance.now() - start) * 1000) / steps;
};
for (let r = 0; r < 20; r++) {
  if (r % 2) {
    samples.A.push(time(A));
    samples.B.push(time(B));
  } else {
    samples.B.push(time(B));
    samples.A.push(time(A));
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(
  `${calls} call(s)/step: A ${median(samples.A).toFixed(1)} B ${median(samples.B).toFixed(1)} µs per step, B/A ${(median(samples.B) / median(samples.A)).toFixed(2)}×`,
);
