/**
 * Two Keel checkouts side by side, each in its OWN process (so neither shares XState's JIT state
 * with the other, as they do in `ab.ts`), processes alternated A B, B A, … for `pairs` pairs:
 * each process warms up (on the same workload, `WARM_S` seconds, default 12), then runs `rounds` prompts of N steps of the step workload (one prompt,
 * N steps of `CPS` calls of a trivial tool, then text) and reports its median wall and CPU time
 * per step. Prints the medians over the processes of each side and the ratios B / A.
 *
 *   A=/tmp/keel-a/index.ts npx tsx bench/extras/ab-procs.ts [N=200] [rounds=10] [pairs=6]
 *
 * B defaults to this checkout. `CPS=8` for 8 calls per step.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import pino from "pino";
import { timedPrompt, touchTool } from "./keel-prompt.ts";

type Keel = typeof import("../../index.ts");
const steps = Number(process.argv[2] ?? 200);
const rounds = Number(process.argv[3] ?? 10);
const callsPerStep = Number(process.env.CPS ?? 1);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

if (process.env.KEEL_AB_CHILD) {
  const keel = (await import(process.env.KEEL_AB_CHILD)) as Keel;
  const logger = pino({ level: "silent" });
  const touch = touchTool(keel);
  const once = (n: number) => timedPrompt(keel, n, callsPerStep, { logger, touch });
  // The JIT settles slowly: per-step time still falls after 5 000 steps of this workload, so
  // each process warms up on the measured N for WARM_S seconds (default 12) first.
  const warmUntil = performance.now() + 1000 * Number(process.env.WARM_S ?? 12);
  while (performance.now() < warmUntil) await once(steps);
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t = await once(steps);
    wall.push(t.wall);
    cpu.push(t.cpu);
  }
  console.log(JSON.stringify({ wall: median(wall), cpu: median(cpu) }));
  process.exit(0);
}

const aPath = process.env.A;
if (!aPath) throw new Error("set A to the index.ts of the checkout to compare against");
const bPath = process.env.B ?? fileURLToPath(new URL("../../index.ts", import.meta.url));
const pairs = Number(process.argv[4] ?? 6);
const self = fileURLToPath(import.meta.url);
const runs = { A: [] as { wall: number; cpu: number }[], B: [] as { wall: number; cpu: number }[] };
for (let p = 0; p < pairs; p++) {
  for (const side of p % 2 === 0 ? (["A", "B"] as const) : (["B", "A"] as const)) {
    const out = execFileSync(
      process.execPath,
      ["--import", "tsx", self, String(steps), String(rounds)],
      {
        env: { ...process.env, KEEL_AB_CHILD: side === "A" ? aPath : bPath },
        encoding: "utf8",
      },
    );
    runs[side].push(JSON.parse(out.trim().split("\n").at(-1)!));
  }
}
console.log(`N=${steps} calls/step=${callsPerStep} rounds=${rounds} processes=${pairs} per side`);
for (const kind of ["wall", "cpu"] as const) {
  const a = runs.A.map((r) => r[kind]);
  const b = runs.B.map((r) => r[kind]);
  console.log(
    `${kind.padEnd(4)} A ${median(a).toFixed(1)} µs/step, B ${median(b).toFixed(1)} µs/step, B/A ${(median(b) / median(a)).toFixed(2)}× (per process: A ${a.map((x) => x.toFixed(0)).join(" ")}; B ${b.map((x) => x.toFixed(0)).join(" ")})`,
  );
}
