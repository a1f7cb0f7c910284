/**
 * Keel's step beside the charts' own floor, in one process (the only comparison this shared
 * machine's load leaves readable): rounds interleaved, medians of µs per step.
 * - `keel N`: one prompt of N steps (one `touch` call a step, then the text answer) on a session
 *   of the memory store, through the public API (the agent and session made once);
 * - `floor N`: the same N steps through the turn, batch and tool-call charts alone
 *   (bench/extras/xstate-floor.ts: XState's public interpreter, no-op effects);
 * - `short`: a short session, agent + session + a one-step prompt + close
 *   (bench/extras/prompt-overhead.ts does the same one phase at a time).
 *
 *   npx tsx bench/extras/step-vs-floor.ts        # KEEL_ENTRY=index.ts for the sources
 *
 * Targets (docs/architecture.md#performance): keel ≤ 1.5 × floor per step; short ≤ 300 µs.
 */
import pino from "pino";
import { stepModel, touchTool } from "./keel-prompt.ts";
import { floorTurn } from "./xstate-floor.ts";

const entry = process.env.KEEL_ENTRY ?? "dist/index.js";
const keel = (await import(
  new URL(`../../${entry}`, import.meta.url).href
)) as typeof import("../../index.ts");
const logger = pino({ level: "silent" });
const touch = touchTool(keel);
const NS = (process.env.NS ?? "1,10,100").split(",").map(Number);
const ROUNDS = Number(process.env.ROUNDS ?? 9);

let tag = 0;
/** µs per step of `reps` prompts of `steps` steps each, on one long-lived session. */
async function keelSteps(steps: number, reps: number): Promise<number> {
  const agent = keel.createAgent({
    model: keel.scriptedModel(
      (request) => {
        // Each prompt counts its own steps: the tool results since its user message.
        const done = request.messages.filter((m) => m.role === "tool").length;
        const mine = done - (request.messages.filter((m) => m.role === "user").length - 1) * steps;
        return mine >= steps
          ? { text: "done" }
          : { toolCalls: [{ id: `c${tag++}`, name: "touch", arguments: '{"path":"a.txt"}' }] };
      },
      { record: "none" },
    ),
    tools: [touch],
    store: keel.memoryStore(),
    logger,
    limits: { maxSteps: steps + 1 },
  });
  const session = await agent.openSession();
  const start = performance.now();
  for (let r = 0; r < reps; r++) {
    const out = await session.prompt("go");
    if (out.status !== "completed") throw new Error(`prompt ended ${out.status}: ${out.reason}`);
  }
  const us = ((performance.now() - start) * 1000) / (reps * steps);
  await agent.close();
  return us;
}

function floorSteps(steps: number, reps: number): number {
  const start = performance.now();
  for (let r = 0; r < reps; r++) floorTurn(steps, 1);
  return ((performance.now() - start) * 1000) / (reps * steps);
}

async function shortSession(reps: number): Promise<number> {
  const start = performance.now();
  for (let r = 0; r < reps; r++) {
    const agent = keel.createAgent({
      model: stepModel(keel, 1, 1),
      tools: [touch],
      store: keel.memoryStore(),
      logger,
    });
    const out = await agent.session().prompt("go");
    await agent.close();
    if (out.status !== "completed") throw new Error(`prompt ended ${out.status}: ${out.reason}`);
  }
  return ((performance.now() - start) * 1000) / reps;
}

const repsFor = (n: number) => Math.max(3, Math.ceil(200 / n));
const warmUntil = performance.now() + 2500;
while (performance.now() < warmUntil) {
  for (const n of NS) {
    await keelSteps(n, 1);
    floorSteps(n, 1);
  }
  await shortSession(5);
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const samples = new Map<string, number[]>();
const add = (k: string, v: number) => samples.set(k, [...(samples.get(k) ?? []), v]);
for (let r = 0; r < ROUNDS; r++) {
  for (const n of NS) {
    // Alternate which goes first, so the machine's load falls on both alike.
    if (r % 2 === 0) {
      add(`keel ${n}`, await keelSteps(n, repsFor(n)));
      add(`floor ${n}`, floorSteps(n, repsFor(n)));
    } else {
      add(`floor ${n}`, floorSteps(n, repsFor(n)));
      add(`keel ${n}`, await keelSteps(n, repsFor(n)));
    }
  }
  add("short", await shortSession(100));
}
console.log(`${entry}; median of ${ROUNDS} interleaved rounds, µs per step`);
console.log("| steps a prompt | Keel µs/step | charts' floor µs/step | Keel ÷ floor |");
console.log("|---:|---:|---:|---:|");
for (const n of NS) {
  const k = median(samples.get(`keel ${n}`)!);
  const f = median(samples.get(`floor ${n}`)!);
  console.log(`| ${n} | ${k.toFixed(1)} | ${f.toFixed(1)} | ${(k / f).toFixed(2)} |`);
}
console.log(
  `short session (agent + session + one-step prompt + close): ${median(samples.get("short")!).toFixed(0)} µs (budget 300 µs)`,
);
