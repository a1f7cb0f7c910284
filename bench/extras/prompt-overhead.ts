/**
 * The fixed cost of a prompt with no tool step: a fresh agent, a session, its log, and one turn
 * that answers with text. Run: `npx tsx bench/extras/prompt-overhead.ts` (prints µs per phase).
 */
import pino from "pino";
import { createAgent, memoryStore, scriptedModel } from "../../index.ts";

const R = Number(process.env.R ?? 3000);
const WARM = 300;
const logger = pino({ level: "silent" });
const total = { agent: 0, session: 0, ready: 0, prompt: 0 };
for (let r = 0; r < R + WARM; r++) {
  const model = scriptedModel(() => ({ text: "done" }), { record: "none" });
  const t0 = performance.now();
  const agent = createAgent({ model, store: memoryStore(), logger });
  const t1 = performance.now();
  const session = agent.session();
  const t2 = performance.now();
  await session.ready;
  const t3 = performance.now();
  const out = await session.prompt("go");
  const t4 = performance.now();
  if (out.status !== "completed") throw new Error(`prompt ended ${out.status}: ${out.reason}`);
  if (r >= WARM) {
    total.agent += t1 - t0;
    total.session += t2 - t1;
    total.ready += t3 - t2;
    total.prompt += t4 - t3;
  }
}
for (const [phase, ms] of Object.entries(total)) {
  console.log(`${phase.padEnd(8)} ${((ms * 1000) / R).toFixed(1)} µs`);
}
