/**
 * The fixed cost of a short session: a fresh agent, a session, its log, one prompt, and closing
 * the agent. `STEPS=1` (default) makes the prompt one tool step (one `touch` call) then the text
 * answer; `STEPS=0` a text answer only. Measures the built package (`dist/index.js`; set
 * `KEEL_ENTRY=index.ts` for the sources). Run: `npx tsx bench/extras/prompt-overhead.ts`
 * (prints µs per phase and the total against the ≤ 300 µs budget of docs/architecture.md).
 * `CPU_PROFILE=<file>` writes a CPU profile of the measured rounds only (after the warm-up, so
 * module loading and JIT warm-up are left out); `bench/extras/profile-summary.ts` reads it.
 */
import { writeFileSync } from "node:fs";
import { Session as InspectorSession } from "node:inspector/promises";
import pino from "pino";
import { stepModel, touchTool } from "./keel-prompt.ts";

const entry = process.env.KEEL_ENTRY ?? "dist/index.js";
const keel = (await import(
  new URL(`../../${entry}`, import.meta.url).href
)) as typeof import("../../index.ts");
const R = Number(process.env.R ?? 3000);
const STEPS = Number(process.env.STEPS ?? 1);
const WARM = 300;
const logger = pino({ level: "silent" });
const touch = touchTool(keel);
const phases = { agent: 0, session: 0, ready: 0, prompt: 0, close: 0 };
const profileTo = process.env.CPU_PROFILE;
const profiler = profileTo ? new InspectorSession() : undefined;
for (let r = 0; r < R + WARM; r++) {
  if (profiler && r === WARM) {
    profiler.connect();
    await profiler.post("Profiler.enable");
    await profiler.post("Profiler.start");
  }
  const model = stepModel(keel, STEPS, 1);
  const t0 = performance.now();
  const agent = keel.createAgent({ model, tools: [touch], store: keel.memoryStore(), logger });
  const t1 = performance.now();
  const session = agent.session();
  const t2 = performance.now();
  await session.ready;
  const t3 = performance.now();
  const out = await session.prompt("go");
  const t4 = performance.now();
  await agent.close();
  const t5 = performance.now();
  if (out.status !== "completed") throw new Error(`prompt ended ${out.status}: ${out.reason}`);
  if (r >= WARM) {
    phases.agent += t1 - t0;
    phases.session += t2 - t1;
    phases.ready += t3 - t2;
    phases.prompt += t4 - t3;
    phases.close += t5 - t4;
  }
}
if (profiler && profileTo) {
  const { profile } = await profiler.post("Profiler.stop");
  writeFileSync(profileTo, JSON.stringify(profile));
  profiler.disconnect();
}
let sum = 0;
for (const [phase, ms] of Object.entries(phases)) {
  sum += ms;
  console.log(`${phase.padEnd(8)} ${((ms * 1000) / R).toFixed(1)} µs`);
}
console.log(
  `total    ${((sum * 1000) / R).toFixed(1)} µs (${entry}, ${STEPS} tool step(s); budget 300 µs)`,
);
