// Durable steps per second under concurrency, each store beside the memory store (the CPU bound
// of a step), and each store's own ceiling. A step is one model request (scripted, instant) and
// one tool call, every write-ahead record durable before it is acknowledged, the session's lease
// held when the store has leases (heartbeat, fenced appends).
//
//   npx tsx bench/extras/durable-steps.ts [--quick] [--only=memory,sqlite-process,…] [--ns=1,10]
//     [--rows=single,multi,ceiling] [--multi=100]
//
// Rows: 1 / 10 / 100 / 1 000 sessions in one process for each store; 3 processes × 100 sessions
// on one store (PostgreSQL; SQLite too, for the file lock); the store alone (appends/s with 1 and
// 100 concurrent appenders). Columns: steps/s over the slowest process's timed run, × memory
// (steps/s ÷ the memory store's at the same processes × sessions, same side), p50/p99 of the time
// between a session's model requests, CPU µs a step of the Node processes and of the PostgreSQL
// server (its backends), the event loop's longest stall in any process, the mean group commit
// size, and prompts that did not complete.
//
// Side by side with another checkout (e.g. the commit before), rows interleaved A B / B A so the
// machine's load falls on both alike:
//   git worktree add --detach /tmp/keel-a HEAD~1 && ln -s "$PWD/node_modules" /tmp/keel-a/
//   A=/tmp/keel-a npx tsx bench/extras/durable-steps.ts
// B is this checkout. Both run this file's child (bench/extras/durable-steps-child.ts), which
// loads each side's index.ts, so a side needs only Keel's public API.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { type PostgresServer, startPostgres } from "../../test/support/postgres-server.ts";

const CHILD = fileURLToPath(new URL("./durable-steps-child.ts", import.meta.url));
const HERE = fileURLToPath(new URL("../../index.ts", import.meta.url));
const args = process.argv.slice(2);
const flag = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
const quick = args.includes("--quick");
const KINDS = ["memory", "sqlite-process", "sqlite-power", "postgres"] as const;
type Kind = (typeof KINDS)[number];
const kinds = (flag("only")?.split(",") ?? KINDS) as Kind[];
for (const k of kinds) if (!KINDS.includes(k)) throw new Error(`--only: unknown store ${k}`);
const NS = flag("ns")?.split(",").map(Number) ?? (quick ? [1, 10, 100] : [1, 10, 100, 1000]);
const MULTI = Number(flag("multi") ?? (quick ? 10 : 100)); // sessions per process with 3 processes
const ROWS = flag("rows")?.split(",") ?? ["single", "multi", "ceiling"];
const stepsFor = (n: number) =>
  quick ? Math.max(5, Math.floor(100 / n)) : Math.max(10, Math.floor(400 / n));
const CEILING_MS = quick ? 500 : 2000;

const entryOf = (path: string) => resolve(path.endsWith(".ts") ? path : join(path, "index.ts"));
const sides = [
  ...(process.env.A ? [{ name: "A", entry: entryOf(process.env.A) }] : []),
  { name: "B", entry: HERE },
];
for (const s of sides) if (!existsSync(s.entry)) throw new Error(`side ${s.name}: no ${s.entry}`);

interface ChildOut {
  steps?: number;
  latencies?: number[];
  appends?: number;
  ms: number;
  cpuUs: number;
  stallMs: number;
  failed?: number;
  failure?: string;
  groups?: number;
  items?: number;
}

const child = (argv: string[]) =>
  new Promise<ChildOut>((done, fail) => {
    const p = spawn(process.execPath, ["--import", "tsx", CHILD, ...argv], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => {
      err += d;
      process.stderr.write(d);
    });
    p.on("close", (code) => {
      if (code === 0) return done(JSON.parse(out));
      // The error's own line (e.g. a StoreError saying the lease expired), for the row.
      const why = err.split("\n").find((l) => /^\w*Error\b/.test(l)) ?? `exit code ${code}`;
      console.error(`child exited ${code}: ${argv.join(" ")}`);
      fail(new Error(`child exited ${code}: ${why.replace(/\/\S+\.db:?/g, "").slice(0, 160)}`));
    });
  });

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
};

/** CPU ms of the PostgreSQL server so far: the postmaster, its live backends, and the exited ones it reaped. */
function serverCpuMs(pid: number): number {
  const tick = 10; // USER_HZ 100 on Linux
  const stat = (p: string) => readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1].split(" ");
  let ms = 0;
  try {
    const own = stat(String(pid));
    ms += (Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14])) * tick;
  } catch {
    return Number.NaN;
  }
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const f = stat(p);
      if (Number(f[1]) === pid) ms += (Number(f[11]) + Number(f[12])) * tick;
    } catch {
      // exited meanwhile
    }
  }
  return ms;
}

const dir = mkdtempSync(join(tmpdir(), "keel-durable-"));
let pgServer: PostgresServer | undefined;
let files = 0;
const where = (kind: Kind) =>
  kind === "postgres" ? `${pgServer!.url}|d${++files}` : join(dir, `${kind}-${++files}.db`);

interface Row {
  side: string;
  kind: Kind;
  procs: number;
  n: number;
  steps: number;
  stepsPerS: number;
  p50: number;
  p99: number;
  cpuUsPerStep: number;
  serverUsPerStep: number;
  stallMs: number;
  group: number;
  failed: number;
  failure?: string;
}
const rows: Row[] = [];
const ceilings: {
  side: string;
  kind: Kind;
  writers: number;
  perS: number;
  cpuUs: number;
  stallMs: number;
  group: number;
}[] = [];

async function stepsRow(side: (typeof sides)[number], kind: Kind, procs: number, n: number) {
  const target = where(kind);
  const server0 = kind === "postgres" ? serverCpuMs(pgServer!.pid) : 0;
  // A side that cannot finish a row (its process died: A before group commit lost leases at
  // 1 000 sessions) is a result, not the end of the run. Every child has ended before the row
  // is recorded: the next row must not start while the others of this one still run.
  const settled = await Promise.allSettled(
    Array.from({ length: procs }, (_, i) =>
      child([
        "steps",
        side.entry,
        kind,
        target,
        String(n),
        String(stepsFor(n)),
        `${side.name}${i}`,
      ]),
    ),
  );
  const crash = settled.find((r) => r.status === "rejected");
  const outs = crash
    ? (crash.reason as Error)
    : settled.map((r) => (r as PromiseFulfilledResult<ChildOut>).value);
  if (outs instanceof Error) {
    rows.push({
      side: side.name,
      kind,
      procs,
      n,
      steps: 0,
      stepsPerS: Number.NaN,
      p50: Number.NaN,
      p99: Number.NaN,
      cpuUsPerStep: Number.NaN,
      serverUsPerStep: Number.NaN,
      stallMs: Number.NaN,
      group: Number.NaN,
      failed: n * procs,
      failure: outs.message,
    });
    console.error(`${side.name} ${kind} ${procs}×${n}: did not finish: ${outs.message}`);
    return;
  }
  const serverMs = kind === "postgres" ? serverCpuMs(pgServer!.pid) - server0 : 0;
  const latencies = outs.flatMap((o) => o.latencies ?? []);
  const steps = latencies.length;
  const busy = Math.max(...outs.map((o) => o.ms));
  const groups = outs.reduce((a, o) => a + (o.groups ?? 0), 0);
  const items = outs.reduce((a, o) => a + (o.items ?? 0), 0);
  const row: Row = {
    side: side.name,
    kind,
    procs,
    n,
    steps,
    stepsPerS: steps / (busy / 1000),
    p50: pct(latencies, 50),
    p99: pct(latencies, 99),
    cpuUsPerStep: outs.reduce((a, o) => a + o.cpuUs, 0) / steps,
    serverUsPerStep: (serverMs * 1000) / steps,
    stallMs: Math.max(...outs.map((o) => o.stallMs)),
    group: groups ? items / groups : Number.NaN,
    failed: outs.reduce((a, o) => a + (o.failed ?? 0), 0),
    failure: outs.find((o) => o.failure)?.failure,
  };
  rows.push(row);
  console.error(
    `${side.name} ${kind} ${procs}×${n}: ${Math.round(row.stepsPerS)} steps/s, p50 ${row.p50.toFixed(1)} ms, p99 ${row.p99.toFixed(1)} ms, CPU ${Math.round(row.cpuUsPerStep)} µs/step (server ${Math.round(row.serverUsPerStep)}), stall ${row.stallMs.toFixed(1)} ms, group ${row.group.toFixed(1)}, failed ${row.failed}`,
  );
}

async function ceilingRow(side: (typeof sides)[number], kind: Kind, writers: number) {
  const out = await child([
    "ceiling",
    side.entry,
    kind,
    where(kind),
    String(writers),
    String(CEILING_MS),
    side.name,
  ]);
  const appends = out.appends ?? 0;
  ceilings.push({
    side: side.name,
    kind,
    writers,
    perS: appends / (out.ms / 1000),
    cpuUs: out.cpuUs / appends,
    stallMs: out.stallMs,
    group: out.groups ? (out.items ?? 0) / out.groups : Number.NaN,
  });
  console.error(
    `${side.name} ${kind} ceiling ×${writers}: ${Math.round(appends / (out.ms / 1000))} appends/s`,
  );
}

/** Runs `fn` for every side, alternating which side goes first. */
let turn = 0;
async function bothSides(fn: (side: (typeof sides)[number]) => Promise<void>) {
  const order = turn++ % 2 === 0 ? sides : [...sides].reverse();
  for (const side of order) await fn(side);
}

const load0 = loadavg();
const started = new Date().toISOString();
try {
  if (kinds.includes("postgres")) pgServer = await startPostgres();
  for (const kind of ROWS.includes("single") ? kinds : []) {
    for (const n of NS) await bothSides((side) => stepsRow(side, kind, 1, n));
  }
  for (const kind of ROWS.includes("multi") ? kinds : []) {
    await bothSides((side) => stepsRow(side, kind, 3, MULTI));
  }
  for (const kind of ROWS.includes("ceiling") ? kinds : []) {
    for (const writers of [1, 100]) await bothSides((side) => ceilingRow(side, kind, writers));
  }
} finally {
  await pgServer?.stop();
  rmSync(dir, { recursive: true, force: true });
}
const load1 = loadavg();

const NAMES: Record<Kind, string> = {
  memory: "memory",
  "sqlite-process": "SQLite, durability process",
  "sqlite-power": "SQLite, durability power",
  postgres: "PostgreSQL, synchronous_commit on",
};
const f = (x: number, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : "–");
const memoryOf = (r: Row) =>
  rows.find((m) => m.kind === "memory" && m.side === r.side && m.procs === r.procs && m.n === r.n);
const out: string[] = [
  `Run ${started}; load average ${load0.map((l) => l.toFixed(2)).join(" ")} at start, ${load1.map((l) => l.toFixed(2)).join(" ")} at end; sides: ${sides.map((s) => `${s.name} = ${s.entry}`).join(", ")}.`,
  "",
  "| side | store | processes | sessions / process | steps | steps/s | × memory | p50 ms | p99 ms | CPU µs/step | server CPU µs/step | longest stall ms | mean group | failed |",
  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
];
for (const r of rows) {
  const m = memoryOf(r);
  out.push(
    `| ${r.side} | ${NAMES[r.kind]} | ${r.procs} | ${r.n} | ${r.steps} | ${f(r.stepsPerS)} | ${m ? f(r.stepsPerS / m.stepsPerS, 2) : "–"} | ${f(r.p50, 2)} | ${f(r.p99, 2)} | ${f(r.cpuUsPerStep)} | ${r.kind === "postgres" ? f(r.serverUsPerStep) : "–"} | ${f(r.stallMs, 1)} | ${f(r.group, 1)} | ${r.failed}${r.failure ? ` (${r.failure})` : ""} |`,
  );
}
out.push(
  "",
  "The store alone (appends of two entries, each appender awaiting its own):",
  "",
  "| side | store | appenders | appends/s | CPU µs/append | longest stall ms | mean group |",
  "|---|---|---:|---:|---:|---:|---:|",
);
for (const c of ceilings) {
  out.push(
    `| ${c.side} | ${NAMES[c.kind]} | ${c.writers} | ${f(c.perS)} | ${f(c.cpuUs, 1)} | ${f(c.stallMs, 1)} | ${f(c.group, 1)} |`,
  );
}
if (sides.length === 2) {
  out.push(
    "",
    "B ÷ A, steps/s:",
    "",
    "| store | processes | sessions / process | B ÷ A |",
    "|---|---:|---:|---:|",
  );
  for (const b of rows.filter((r) => r.side === "B")) {
    const a = rows.find(
      (r) => r.side === "A" && r.kind === b.kind && r.procs === b.procs && r.n === b.n,
    );
    if (a)
      out.push(`| ${NAMES[b.kind]} | ${b.procs} | ${b.n} | ${f(b.stepsPerS / a.stepsPerS, 2)} |`);
  }
}
console.log(out.join("\n"));
