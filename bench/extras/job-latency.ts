// Enqueue-to-start latency of the two PostgreSQL job libraries Keel could dispatch sessions
// with, side by side on one fresh loopback server (docs/many-processes.md): graphile-worker 0.17 (the
// chosen one) and pg-boss 10 (the last line that runs on Node 20). Each job is enqueued in SQL
// with its enqueue time; the latency is start − enqueue, measured one job at a time (an idle
// worker waiting, as a session's first input finds it) and in a burst of 200.
//   npx tsx bench/extras/job-latency.ts
import { Logger, run, runMigrations } from "graphile-worker";
import pg from "pg";
import { startPostgres } from "../../test/support/postgres-server.ts";
import { loadPeer } from "../lib/workload.ts";

/** The slice of pg-boss 10 this bench uses (a bench/ peer: `npm install` in bench/). */
interface PgBossLike {
  on(event: "error", handler: (err: unknown) => void): void;
  start(): Promise<unknown>;
  createQueue(name: string): Promise<void>;
  work(
    name: string,
    options: { pollingIntervalSeconds: number; batchSize: number },
    handler: (jobs: { data: { sent: number } }[]) => Promise<void>,
  ): Promise<string>;
  send(name: string, data: { sent: number }): Promise<string | null>;
  stop(options: { graceful: boolean; wait: boolean }): Promise<void>;
}
type PgBossClass = new (options: { connectionString: string; max: number }) => PgBossLike;

const SINGLE = 50;
const BURST = 200;

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const line = (name: string, mode: string, xs: number[]) =>
  `| ${name} | ${mode} | ${xs.length} | ${pct(xs, 50).toFixed(1)} | ${pct(xs, 99).toFixed(1)} | ${Math.max(...xs).toFixed(1)} |`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function graphile(url: string): Promise<string[]> {
  const pool = new pg.Pool({ connectionString: url, max: 8 });
  pool.on("error", () => {});
  pool.on("connect", (c) => c.on("error", () => {}));
  const logger = new Logger(() => () => {});
  await runMigrations({ pgPool: pool, logger });
  let onStart: ((ms: number) => void) | null = null;
  const runner = await run({
    pgPool: pool,
    concurrency: 8,
    noHandleSignals: true,
    pollInterval: 2000,
    logger,
    taskList: {
      bench: async (payload) => {
        const sent = (payload as { sent: number }).sent;
        onStart?.(performance.timeOrigin + performance.now() - sent);
      },
    },
  });
  const enqueue = () =>
    pool.query("SELECT graphile_worker.add_job('bench', json_build_object('sent', $1::float8))", [
      performance.timeOrigin + performance.now(),
    ]);
  const rows = await measure(enqueue, (f) => {
    onStart = f;
  });
  await runner.stop();
  await pool.end();
  return [
    line("graphile-worker 0.17.3", "one at a time", rows.single),
    line("graphile-worker 0.17.3", `burst of ${BURST}`, rows.burst),
  ];
}

async function pgBoss(url: string): Promise<string[]> {
  const PgBoss = (await loadPeer<{ default: PgBossClass }>("pg-boss")).default;
  const boss = new PgBoss({ connectionString: url, max: 8 });
  boss.on("error", () => {});
  await boss.start();
  await boss.createQueue("bench");
  let onStart: ((ms: number) => void) | null = null;
  // pollingIntervalSeconds: 0.5 is pg-boss 10's minimum; batchSize 8 ≈ graphile's concurrency.
  await boss.work("bench", { pollingIntervalSeconds: 0.5, batchSize: 8 }, async (jobs) => {
    for (const job of jobs)
      onStart?.(performance.timeOrigin + performance.now() - (job.data as { sent: number }).sent);
  });
  const enqueue = () => boss.send("bench", { sent: performance.timeOrigin + performance.now() });
  const rows = await measure(enqueue, (f) => {
    onStart = f;
  });
  await boss.stop({ graceful: false, wait: true });
  return [
    line("pg-boss 10.4.2", "one at a time", rows.single),
    line("pg-boss 10.4.2", `burst of ${BURST}`, rows.burst),
  ];
}

async function measure(enqueue: () => Promise<unknown>, listen: (f: (ms: number) => void) => void) {
  const single: number[] = [];
  for (let i = 0; i < SINGLE; i++) {
    const started = new Promise<number>((r) => listen(r));
    await enqueue();
    single.push(await started);
    await sleep(20 + Math.random() * 80); // the worker is idle again, at a random phase of any poll
  }
  const burst: number[] = [];
  const all = new Promise<void>((r) =>
    listen((ms) => {
      burst.push(ms);
      if (burst.length === BURST) r();
    }),
  );
  await Promise.all(Array.from({ length: BURST }, enqueue));
  await all;
  return { single, burst };
}

const server = await startPostgres();
try {
  const out = [
    "| library | mode | jobs | p50 ms | p99 ms | max ms |",
    "|---|---|---:|---:|---:|---:|",
  ];
  out.push(...(await graphile(server.url)));
  out.push(...(await pgBoss(server.url)));
  console.log(out.join("\n"));
} finally {
  await server.stop();
}
