/**
 * A CPU profile of the step workload of `ab.ts` (one prompt, N steps of `CPS` calls of a trivial
 * tool, then text) on one checkout, after a warm-up, for `profile-summary.ts` to read.
 *
 *   ENTRY=/tmp/keel-a/index.ts npx tsx bench/extras/step-profile.ts /tmp/a.cpuprofile [N=200] [rounds=40]
 *
 * ENTRY defaults to this checkout's sources. Prints µs per step over the profiled rounds (the
 * profiler adds its own cost: compare two checkouts with `ab.ts`, not with this figure).
 * `STORE=sqlite` for a SQLite store (durability "process", a temporary file), as in `ab.ts`.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { Session as InspectorSession } from "node:inspector/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { timedPrompt, touchTool } from "./keel-prompt.ts";

type Keel = typeof import("../../index.ts");
const keel = (await import(process.env.ENTRY ?? "../../index.ts")) as Keel;
const [out, nArg, roundsArg] = process.argv.slice(2);
if (!out) throw new Error("usage: step-profile.ts <out.cpuprofile> [N] [rounds]");
const steps = Number(nArg ?? 200);
const rounds = Number(roundsArg ?? 40);
const callsPerStep = Number(process.env.CPS ?? 1);
const logger = pino({ level: "silent" });
const touch = touchTool(keel);
const dir = mkdtempSync(join(tmpdir(), "keel-profile-"));
const store = process.env.STORE === "sqlite" ? keel.sqliteStore(join(dir, "s.db")) : undefined;

const once = async (n: number) =>
  (await timedPrompt(keel, n, callsPerStep, { logger, touch, store })).wall;

const warmUntil = performance.now() + 3000;
while (performance.now() < warmUntil) await once(20);
const profiler = new InspectorSession();
profiler.connect();
await profiler.post("Profiler.enable");
await profiler.post("Profiler.start");
const times: number[] = [];
for (let r = 0; r < rounds; r++) times.push(await once(steps));
const { profile } = await profiler.post("Profiler.stop");
writeFileSync(out, JSON.stringify(profile));
profiler.disconnect();
rmSync(dir, { recursive: true, force: true });
times.sort((a, b) => a - b);
console.log(`median ${times[times.length >> 1]?.toFixed(0)} µs/step (profiled), written ${out}`);
