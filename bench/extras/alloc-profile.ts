/**
 * Where the step workload of `ab.ts` allocates: a sampling heap profile (collected objects
 * included) over `rounds` prompts of N steps after a warm-up, summed by function, in bytes per
 * step. Compare two checkouts with ENTRY:
 *
 *   ENTRY=/tmp/keel-a/index.ts npx tsx bench/extras/alloc-profile.ts [N=200] [rounds=20] [top=30]
 *
 * ENTRY defaults to this checkout's sources. The figures are sampled (one sample per 512 bytes):
 * read differences of a few hundred bytes per step as noise.
 */
import { Session as InspectorSession } from "node:inspector/promises";
import pino from "pino";
import { timedPrompt, touchTool } from "./keel-prompt.ts";

type Keel = typeof import("../../index.ts");
interface SamplingNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SamplingNode[];
}
const keel = (await import(process.env.ENTRY ?? "../../index.ts")) as Keel;
const [nArg, roundsArg, topArg] = process.argv.slice(2);
const steps = Number(nArg ?? 200);
const rounds = Number(roundsArg ?? 20);
const top = Number(topArg ?? 30);
const callsPerStep = Number(process.env.CPS ?? 1);
const logger = pino({ level: "silent" });
const touch = touchTool(keel);
const once = (n: number) => timedPrompt(keel, n, callsPerStep, { logger, touch });

const warmUntil = performance.now() + 3000;
while (performance.now() < warmUntil) await once(20);
const inspector = new InspectorSession();
inspector.connect();
await inspector.post("HeapProfiler.enable");
await inspector.post("HeapProfiler.startSampling", {
  samplingInterval: 512,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
} as never);
for (let r = 0; r < rounds; r++) await once(steps);
const { profile } = (await inspector.post("HeapProfiler.stopSampling")) as {
  profile: { head: SamplingNode };
};
inspector.disconnect();

const byFunction = new Map<string, number>();
let total = 0;
const walk = (node: SamplingNode) => {
  const { functionName, url, lineNumber } = node.callFrame;
  const where = `${functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}:${lineNumber}`;
  byFunction.set(where, (byFunction.get(where) ?? 0) + node.selfSize);
  total += node.selfSize;
  for (const child of node.children) walk(child);
};
walk(profile.head);
const perStep = (bytes: number) => bytes / (rounds * steps);
console.log(`${perStep(total).toFixed(0)} bytes allocated per step (sampled)`);
for (const [where, bytes] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top))
  console.log(`${perStep(bytes).toFixed(0).padStart(7)}  ${where}`);
