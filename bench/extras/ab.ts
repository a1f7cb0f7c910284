/**
 * Two Keel checkouts side by side in ONE process, rounds interleaved (A B, B A, …), so machine
 * noise hits both alike: µs per step of the step workload (one prompt, N steps of `CPS` calls of
 * a trivial tool, then text), median and minimum, and the ratio B / A, in wall time and in CPU
 * time (the process's user + system time, GC threads included).
 *
 *   git worktree add --detach /tmp/keel-a <rev> && ln -s "$PWD/node_modules" /tmp/keel-a/
 *   A=/tmp/keel-a/index.ts npx tsx bench/extras/ab.ts [N=200] [rounds=30]
 *
 * B defaults to this checkout. `CPS=8` for 8 calls per step; `STORE=sqlite` for a SQLite store
 * (durability "process", one temporary file per side).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { timedPrompt, touchTool } from "./keel-prompt.ts";

type Keel = typeof import("../../index.ts");

const aPath = process.env.A;
if (!aPath)
  throw new Error("set A to the index.ts of the checkout to compare against (see the header)");
const sides = {
  A: (await import(aPath)) as Keel,
  B: (await import(process.env.B ?? "../../index.ts")) as Keel,
};
const steps = Number(process.argv[2] ?? 200);
const rounds = Number(process.argv[3] ?? 30);
const callsPerStep = Number(process.env.CPS ?? 1);
const sqlite = process.env.STORE === "sqlite";
const logger = pino({ level: "silent" });
const dir = mkdtempSync(join(tmpdir(), "keel-ab-"));

function harness(keel: Keel, name: string) {
  const touch = touchTool(keel);
  const store = sqlite ? keel.sqliteStore(join(dir, `${name}.db`)) : undefined;
  return (n: number) =>
    timedPrompt(keel, n, callsPerStep, { logger, touch, store }).catch((err: Error) => {
      throw new Error(`${name}: ${err.message}`);
    });
}

const run = { A: harness(sides.A, "a"), B: harness(sides.B, "b") };
// The JIT settles slowly: per-step time still falls after 5 000 steps of this workload, so both
// sides warm up on the measured N for WARM_S seconds (default 12) first.
const warmUntil = performance.now() + 1000 * Number(process.env.WARM_S ?? 12);
while (performance.now() < warmUntil) {
  await run.A(steps);
  await run.B(steps);
}
const samples = {
  A: { wall: [] as number[], cpu: [] as number[] },
  B: { wall: [] as number[], cpu: [] as number[] },
};
for (let r = 0; r < rounds; r++) {
  for (const side of r % 2 === 0 ? (["A", "B"] as const) : (["B", "A"] as const)) {
    const { wall, cpu } = await run[side](steps);
    samples[side].wall.push(wall);
    samples[side].cpu.push(cpu);
  }
}
rmSync(dir, { recursive: true, force: true });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (xs: number[]) => `median ${median(xs).toFixed(1)} min ${Math.min(...xs).toFixed(1)}`;
const ratio = (b: number[], a: number[]) =>
  `median ${(median(b) / median(a)).toFixed(2)}× min ${(Math.min(...b) / Math.min(...a)).toFixed(2)}×`;
console.log(
  `N=${steps} calls/step=${callsPerStep} store=${sqlite ? "sqlite" : "memory"} rounds=${rounds}`,
);
// Wall time is what a caller waits; CPU time (the process's, GC threads included) is what a
// step costs, and holds up better on a machine that runs something else.
for (const kind of ["wall", "cpu"] as const) {
  console.log(
    `${kind.padEnd(4)} A ${fmt(samples.A[kind])} µs/step, B ${fmt(samples.B[kind])} µs/step`,
  );
  console.log(`${kind.padEnd(4)} B/A ${ratio(samples.B[kind], samples.A[kind])}`);
}
