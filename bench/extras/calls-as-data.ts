/**
 * Data for a design decision, not a Keel feature: what a batch round would cost if a call's
 * lifecycle (recording → started → settled) were data in the batch statechart instead of one
 * XState actor per call. Side A is Keel's batch with its tool-call actors; side B a stripped
 * batch machine that keeps each call's phase in context and takes the same events (addressed by
 * call index) with no actors. B has no cancel, stop deadline or scheduling rules, so B/A is an
 * upper bound on what option (a) in issue #8's note could save on the statecharts' share.
 *
 *   npx tsx bench/extras/calls-as-data.ts        # CPS=8 for a round of 8 calls
 */
import { type AnyActorRef, assign, createActor, setup } from "xstate";
import type { ToolResult } from "../../contracts/tool-result.ts";
import { batchMachine } from "../../machines/batch.machine.ts";
import { toolCallMachine } from "../../machines/tool-call.machine.ts";

const ok: ToolResult = { ok: true, content: "ok" };
const calls = Number(process.env.CPS ?? 1);
const specs = Array.from({ length: calls }, (_, i) => ({
  callId: `c${i}`,
  name: "touch",
  concurrencySafe: true,
  cancellable: true,
  executionMode: "parallel" as const,
}));

/** A: the real batch; each started call is a tool-call actor. */
function actors() {
  const recording: AnyActorRef[] = [];
  const toolCall = toolCallMachine.provide({
    actions: { recordStart: ({ self }) => void recording.push(self), execute: () => {} },
  });
  let rounds = 0;
  const batch = createActor(
    batchMachine.provide({ actors: { toolCall }, actions: { roundDone: () => void rounds++ } }),
    { input: { stopDeadlineMs: 1000 } },
  ).start();
  return () => {
    batch.send({ type: "batch.run", calls: specs });
    for (const call of recording.splice(0)) {
      call.send({ type: "call.recorded" });
      call.send({ type: "call.complete", result: ok });
    }
    if (batch.getSnapshot().value !== "idle") throw new Error("A: the round did not end");
  };
}

type Phase = "recording" | "started" | "settled";
type DataEvent =
  | { type: "batch.run"; count: number }
  | { type: "call.recorded"; index: number }
  | { type: "call.complete"; index: number; result: ToolResult };

/** B: the same round with every call's phase as data in one machine. */
const dataBatch = setup({
  types: {
    context: {} as { phases: Phase[]; results: (ToolResult | undefined)[] },
    events: {} as DataEvent,
  },
  actions: {
    recordStart: (_, _params: { count: number }) => {},
    execute: (_, _params: { index: number }) => {},
    roundDone: () => {},
    settle: assign(({ context, event }) => {
      if (event.type !== "call.complete") return {};
      const phases = [...context.phases];
      const results = [...context.results];
      phases[event.index] = "settled";
      results[event.index] = event.result;
      return { phases, results };
    }),
  },
  guards: {
    lastOpen: ({ context, event }) =>
      event.type === "call.complete" &&
      context.phases.every((p, i) => i === event.index || p === "settled"),
  },
}).createMachine({
  context: { phases: [], results: [] },
  initial: "idle",
  states: {
    idle: {
      on: {
        "batch.run": {
          target: "running",
          actions: [
            assign(({ event }) => ({
              phases: new Array<Phase>(event.count).fill("recording"),
              results: new Array<ToolResult | undefined>(event.count).fill(undefined),
            })),
            { type: "recordStart", params: ({ event }) => ({ count: event.count }) },
          ],
        },
      },
    },
    running: {
      on: {
        "call.recorded": {
          actions: [
            assign(({ context, event }) => {
              const phases = [...context.phases];
              phases[event.index] = "started";
              return { phases };
            }),
            { type: "execute", params: ({ event }) => ({ index: event.index }) },
          ],
        },
        "call.complete": [
          { guard: "lastOpen", target: "idle", actions: ["settle", "roundDone"] },
          { actions: "settle" },
        ],
      },
    },
  },
});

function data() {
  const batch = createActor(dataBatch).start();
  return () => {
    batch.send({ type: "batch.run", count: calls });
    for (let i = 0; i < calls; i++) {
      batch.send({ type: "call.recorded", index: i });
      batch.send({ type: "call.complete", index: i, result: ok });
    }
    if (batch.getSnapshot().value !== "idle") throw new Error("B: the round did not end");
  };
}

const A = actors();
const B = data();
const rounds = calls === 1 ? 4000 : 1000;
const time = (f: () => void) => {
  const start = performance.now();
  for (let i = 0; i < rounds; i++) f();
  return ((performance.now() - start) * 1000) / rounds;
};
for (let i = 0; i < 5; i++) {
  time(A);
  time(B);
}
const samples = { A: [] as number[], B: [] as number[] };
for (let r = 0; r < 20; r++) {
  samples.A.push(time(A));
  samples.B.push(time(B));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(
  `round of ${calls}: actors ${median(samples.A).toFixed(1)} µs, calls as data ${median(samples.B).toFixed(1)} µs, data/actors ${(median(samples.B) / median(samples.A)).toFixed(2)}×`,
);
