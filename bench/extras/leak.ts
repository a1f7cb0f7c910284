/**
 * Heap a process keeps per tool call after every agent, session and store is gone: the cost
 * of a process-lifetime cache keyed by something new per call. Runs `RUNS` prompts (50 steps ×
 * 8 calls, call ids unique across the whole run, as real providers' ids are), drops each agent,
 * then compares the heap after `gc()` with the heap before the loop.
 *
 *   node --expose-gc --import tsx bench/extras/leak.ts            # this checkout
 *   K=/tmp/keel-a/index.ts RUNS=120 node --expose-gc --import tsx bench/extras/leak.ts
 *
 * A constant figure as RUNS grows is a per-call leak; a figure that falls as RUNS grows is a
 * one-off (warm-up, code) spread over more calls. Found this way: XState's per-event-type
 * transition cache kept ≈ 340 B for every call while tool-call actors were named by call id.
 */
import pino from "pino";
import { stepModel, touchTool } from "./keel-prompt.ts";

type Keel = typeof import("../../index.ts");
const keel = (await import(process.env.K ?? "../../index.ts")) as Keel;
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc --import tsx bench/extras/leak.ts");

const touch = touchTool(keel);
const logger = pino({ level: "silent" });
const steps = 50;
const callsPerStep = 8;
let run = 0;

async function prompt(): Promise<void> {
  const model = stepModel(keel, steps, callsPerStep, `${run++}_`);
  const agent = keel.createAgent({
    model,
    tools: [touch],
    store: keel.memoryStore(),
    limits: { maxSteps: steps + 1 },
    logger,
  });
  const out = await agent.session().prompt("go");
  if (out.status !== "completed") throw new Error(`prompt ended ${out.status}`);
  await agent.close();
}

const settle = async () => {
  await new Promise((resolve) => setTimeout(resolve, 20));
  gc();
  gc();
};
await prompt();
await settle();
const before = process.memoryUsage().heapUsed;
const runs = Number(process.env.RUNS ?? 40);
for (let i = 0; i < runs; i++) await prompt();
await settle();
const after = process.memoryUsage().heapUsed;
const calls = runs * steps * callsPerStep;
console.log(
  `${calls} calls: ${((after - before) / calls).toFixed(0)} B per tool call left after the sessions are gone`,
);
