// Durable steps per second and step latency (p50/p99) with 1, 10 and 100 concurrent sessions
// per process, one process and three sharing the store, for SQLite (durability process, power)
// and PostgreSQL (synchronous_commit on, off) on a fresh loopback server. A step is one model
// request (scripted, instant) and one tool call, with every write-ahead record durable before
// it is acknowledged, and the session's lease held (heartbeat, fenced appends).
//   npx tsx bench/extras/durable-steps.ts
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startPostgres } from "../../test/support/postgres-server.ts";

const CHILD = fileURLToPath(new URL("./durable-steps-child.ts", import.meta.url));
const NS = [1, 10, 100];
const stepsFor = (n: number) => Math.max(10, Math.floor(400 / n));

const child = (args: string[]) =>
  new Promise<{ steps: number; ms: number; latencies: number[] }>((resolve, reject) => {
    const p = spawn(process.execPath, ["--import", "tsx", CHILD, ...args], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.on("exit", (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`child exited ${code}`)),
    );
  });
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

const on = await startPostgres();
const off = await startPostgres({ settings: { synchronous_commit: "off" } });
const dir = mkdtempSync(join(tmpdir(), "keel-durable-"));
const rows = [
  "| store | processes | sessions / process | steps | steps/s | p50 ms | p99 ms |",
  "|---|---:|---:|---:|---:|---:|---:|",
];
let run = 0;
try {
  const stores: [string, string, () => string][] = [
    ["SQLite, durability process", "sqlite-process", () => join(dir, `p${++run}.db`)],
    ["SQLite, durability power", "sqlite-power", () => join(dir, `f${++run}.db`)],
    ["PostgreSQL, synchronous_commit on", "postgres", () => on.url],
    ["PostgreSQL, synchronous_commit off", "postgres", () => off.url],
  ];
  for (const [name, kind, where] of stores) {
    for (const procs of [1, 3]) {
      for (const n of NS) {
        const target = where();
        const t0 = performance.now();
        const results = await Promise.all(
          Array.from({ length: procs }, (_, i) =>
            child([kind, target, String(n), String(stepsFor(n)), `r${run}-${procs}-${n}-${i}`]),
          ),
        );
        const wall = performance.now() - t0;
        const latencies = results.flatMap((r) => r.latencies);
        const steps = latencies.length;
        const busy = Math.max(...results.map((r) => r.ms)); // the sessions' own time, not process start-up
        const line = `| ${name} | ${procs} | ${n} | ${steps} | ${Math.round(steps / (busy / 1000))} | ${pct(latencies, 50).toFixed(2)} | ${pct(latencies, 99).toFixed(2)} |`;
        rows.push(line);
        console.error(line, `(wall ${Math.round(wall)} ms)`);
      }
    }
  }
  console.log(rows.join("\n"));
} finally {
  await on.stop();
  await off.stop();
  rmSync(dir, { recursive: true, force: true });
}
