/**
 * Why no timed bench run follows a forced GC: Keel's µs per step for a 300-step prompt in steady
 * operation, and for the same prompt right after `gc()` twice (what the bench did before it
 * separated timing from heap readings). A full GC drops V8's type feedback for object shapes that
 * have no live instance at that moment, so the next prompt runs de-optimised.
 * Run: `node --expose-gc --import tsx bench/extras/gc-effect.ts`.
 */
import pino from "pino";
import { z } from "zod";
import { createAgent, defineTool, memoryStore, scriptedModel } from "../../index.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc --import tsx bench/extras/gc-effect.ts");
const STEPS = 300;
const ROUNDS = 7;
const logger = pino({ level: "silent" });
const touch = defineTool({
  name: "touch",
  description: "touch a file",
  parameters: z.object({ path: z.string() }),
  traits: { concurrencySafe: true, readOnly: true, risk: "low" },
  execute: async () => "ok",
});

async function prompt(steps: number): Promise<number> {
  const model = scriptedModel(
    (_request, i) =>
      i + 1 > steps
        ? { text: "done" }
        : { toolCalls: [{ id: `c${i}`, name: "touch", arguments: '{"path":"a"}' }] },
    { record: "none" },
  );
  const agent = createAgent({
    model,
    tools: [touch],
    store: memoryStore(),
    limits: { maxSteps: steps + 1 },
    logger,
  });
  const start = performance.now();
  const out = await agent.session().prompt("go");
  if (out.status !== "completed") throw new Error(`prompt ended ${out.status}`);
  return ((performance.now() - start) * 1000) / steps;
}

const turns = async () => {
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
};
const warmUntil = performance.now() + 2000;
while (performance.now() < warmUntil) await prompt(20);
const steady: number[] = [];
const afterGc: number[] = [];
// Steady first (back to back), then the same prompts each right after a forced GC: the
// de-optimisation outlasts one prompt, so alternating them would slow the steady ones too.
for (let r = 0; r < ROUNDS; r++) steady.push(await prompt(STEPS));
for (let r = 0; r < ROUNDS; r++) {
  await turns();
  gc();
  gc();
  afterGc.push(await prompt(STEPS));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`steady:       ${median(steady).toFixed(1)} µs/step (median of ${ROUNDS})`);
console.log(`after gc() ×2: ${median(afterGc).toFixed(1)} µs/step`);
console.log(`ratio:        ${(median(afterGc) / median(steady)).toFixed(2)}×`);
