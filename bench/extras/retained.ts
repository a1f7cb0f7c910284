/**
 * Heap one long prompt leaves behind while its session is still held, per step: what a live
 * session costs in memory as it grows (its log, projection and store), for the memory store or
 * SQLite (`STORE=sqlite`, durability "process", a temporary file), `CPS` calls per step.
 *
 *   node --expose-gc --import tsx bench/extras/retained.ts [steps=3000]
 *   K=/tmp/keel-a/index.ts STORE=sqlite CPS=8 node --expose-gc --import tsx bench/extras/retained.ts
 *
 * `K` points at another checkout's index.ts, to compare (one process per side: heap figures do
 * not mix). `npm run bench` reports the same quantity for every runtime; this is the quick probe.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { stepModel, touchTool } from "./keel-prompt.ts";

type Keel = typeof import("../../index.ts");
const keel = (await import(process.env.K ?? "../../index.ts")) as Keel;
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc --import tsx bench/extras/retained.ts");

const steps = Number(process.argv[2] ?? 3000);
const callsPerStep = Number(process.env.CPS ?? 1);
const sqlite = process.env.STORE === "sqlite";
const dir = mkdtempSync(join(tmpdir(), "keel-retained-"));
const agent = keel.createAgent({
  model: stepModel(keel, steps, callsPerStep),
  tools: [touchTool(keel)],
  store: sqlite ? keel.sqliteStore(join(dir, "keel.db")) : keel.memoryStore(),
  limits: { maxSteps: steps + 1 },
  maxParallelToolCalls: 8,
  logger: pino({ level: "silent" }),
});
const session = agent.session();
await session.ready;
gc();
gc();
const before = process.memoryUsage().heapUsed;
const out = await session.prompt("go");
if (out.status !== "completed") throw new Error(`prompt ended ${out.status}`);
await new Promise((resolve) => setTimeout(resolve, 50));
gc();
gc();
const after = process.memoryUsage().heapUsed;
console.log(
  `${sqlite ? "sqlite" : "memory"} store, ${callsPerStep} call(s)/step, ${steps} steps: ${((after - before) / steps / 1024).toFixed(2)} KB per step retained while the session is held`,
);
await agent.close();
rmSync(dir, { recursive: true, force: true });
