/**
 * One tool call's life (created already started, `call.recorded`, `call.complete`) hosted two
 * ways: as an XState actor, as Keel runs it, and as a snapshot driven by XState's pure
 * `initialTransition` / `transition` (what a batch would do if it kept calls as snapshots
 * instead of child actors). Run: `npx tsx bench/extras/pure-vs-actor.ts` (µs per life).
 */
import { createActor, initialTransition, transition } from "xstate";
import { toolCallMachine } from "../../machines/tool-call.machine.ts";

const LIVES = 100_000;
const input = {
  callId: "c1",
  name: "touch",
  cancellable: true,
  stopDeadlineMs: 1000,
};
const result = { ok: true as const, content: "ok" };
const machine = toolCallMachine.provide({ actions: { recordStart: () => {}, execute: () => {} } });

function asActor(): void {
  const call = createActor(machine, { input }).start();
  call.send({ type: "call.recorded" });
  call.send({ type: "call.complete", result });
  if (call.getSnapshot().status !== "done") throw new Error("the actor did not settle");
}

function asSnapshot(): void {
  let [snapshot] = initialTransition(machine, input);
  [snapshot] = transition(machine, snapshot, { type: "call.recorded" });
  [snapshot] = transition(machine, snapshot, { type: "call.complete", result });
  if (snapshot.status !== "done") throw new Error("the snapshot did not settle");
}

function usPerLife(life: () => void): number {
  for (let i = 0; i < LIVES; i++) life();
  const start = performance.now();
  for (let i = 0; i < LIVES; i++) life();
  return ((performance.now() - start) * 1000) / LIVES;
}

for (let round = 1; round <= 3; round++) {
  const actor = usPerLife(asActor);
  const pure = usPerLife(asSnapshot);
  console.log(
    `round ${round}: actor ${actor.toFixed(1)} µs, pure transition() ${pure.toFixed(1)} µs (${(pure / actor).toFixed(2)}×)`,
  );
}
