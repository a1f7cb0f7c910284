// A child process for multi-process PostgreSQL tests. Modes:
//   runner <url> <schema> <sessionId>   open one session and keep it open (owner or follower)
//   worker <url> <schema> <concurrency> a `keel worker` with the test model and tools
//   ledger <url> <schema> <n>           race n keys through postgresLedger
// It prints one JSON object per line on stdout: {ev: "role" | "request" | "effect" | ...}.
import pg from "pg";
import { z } from "zod";
import { createAgent } from "../../actors/agent.ts";
import { startWorker } from "../../actors/worker.ts";
import { textOf } from "../../contracts/messages.ts";
import type { ModelRequest } from "../../contracts/model.ts";
import { scriptedModel } from "../../providers/scripted-model.ts";
import { postgresLedger } from "../../session/stores/postgres-ledger.ts";
import { postgresStore } from "../../session/stores/postgres-store.ts";
import { defineTool } from "../../tools/define-tool.ts";

const [mode, url, schema, arg] = process.argv.slice(2);
const say = (o: Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify({ pid: process.pid, ...o })}\n`);
const TTL = Number(process.env.KEEL_TEST_TTL ?? 1500);
const POLL = Number(process.env.KEEL_TEST_POLL ?? 150);

const store = await postgresStore(url, { schema, max: 6 });
const effects = new pg.Pool({ connectionString: url, max: 2 });
await effects.query(
  `CREATE TABLE IF NOT EXISTS "${schema}".effects (session_id text, call_id text, label text, pid int, at timestamptz DEFAULT clock_timestamp())`,
);

/**
 * The model: a user message "do <label> [<label>…]" calls `mark` for each label (then `wait` if
 * the label is "slow"); after tool results it answers "done". Every request is printed.
 */
const model = scriptedModel((request: ModelRequest) => {
  const last = request.messages[request.messages.length - 1];
  say({
    ev: "request",
    messages: request.messages.map((m) => ("content" in m ? m.content : null)),
  });
  const lastText = last?.role === "user" ? textOf(last.content) : "";
  if (lastText.startsWith("do ")) {
    const labels = lastText.slice(3).split(" ");
    return {
      toolCalls: labels.map((label, i) => ({
        id: `c${Math.random().toString(36).slice(2, 10)}${i}`,
        name: label.startsWith("wait") ? "wait" : "mark",
        arguments: JSON.stringify(
          label.startsWith("wait") ? { ms: Number(label.slice(4)) } : { label },
        ),
      })),
    };
  }
  return { text: "done" };
});

const mark = defineTool({
  name: "mark",
  description: "Records a side effect (not idempotent); a label ending in '!' then hangs.",
  parameters: z.object({ label: z.string() }),
  traits: { concurrencySafe: true },
  execute: async ({ label }, ctx) => {
    await effects.query(
      `INSERT INTO "${schema}".effects (session_id, call_id, label, pid) VALUES ($1, $2, $3, $4)`,
      [process.env.KEEL_TEST_SESSION ?? "", ctx.callId, label, process.pid],
    );
    say({ ev: "effect", label, callId: ctx.callId });
    if (label.endsWith("!")) await new Promise(() => {});
    return `marked ${label}`;
  },
});
const wait = defineTool({
  name: "wait",
  description: "Waits ms milliseconds, then returns.",
  parameters: z.object({ ms: z.number() }),
  traits: { concurrencySafe: true },
  execute: async ({ ms }, ctx) => {
    say({ ev: "waiting", callId: ctx.callId });
    await new Promise((r) => setTimeout(r, ms));
    say({ ev: "waited", callId: ctx.callId });
    return `waited ${ms}`;
  },
});

if (mode === "runner") {
  const agent = createAgent({
    model,
    tools: [mark, wait],
    store,
    lease: {
      ttlMs: TTL,
      pollMs: POLL,
      // KEEL_TEST_OWNER: a name without this host's pid, as a runner on another machine has.
      owner: process.env.KEEL_TEST_OWNER,
      onRole: (_id, role) => say({ ev: "role", role }),
    },
  });
  const session = agent.session(arg);
  session.subscribe((e) => {
    if (e.type === "turn.started" || e.type === "turn.ended") say({ ev: e.type });
  });
  await session.ready;
  process.stdin.resume(); // stay up until killed
} else if (mode === "worker") {
  const worker = await startWorker({
    store,
    model,
    tools: [mark, wait],
    concurrency: Number(arg),
    leaseTtlMs: TTL,
    pollMs: POLL,
    sweepMs: 500,
    shutdownGraceMs: 5000,
  });
  say({ ev: "worker-ready" });
  process.once("SIGTERM", () => {
    void worker.stop().then(async () => {
      say({ ev: "worker-stopped" });
      await store.close();
      await effects.end();
      process.exit(0);
    });
  });
} else if (mode === "ledger") {
  const ledger = postgresLedger(store, {
    clock: { now: () => Date.now(), setTimeout, clearTimeout },
  });
  const n = Number(arg);
  let ran = 0;
  // A barrier in the database: both racers start within a poll of each other, whatever their
  // start-up times on a loaded machine (a wall-clock start time was missed under load).
  const parties = Number(process.env.KEEL_TEST_BARRIER ?? 0);
  // (The test creates the table: two CREATE IF NOT EXISTS at once can collide in pg_type.)
  if (parties > 0)
    await effects.query(`INSERT INTO "${schema}".barrier VALUES ($1)`, [process.pid]);
  while (parties > 0) {
    const r = await effects.query(`SELECT count(*)::int AS n FROM "${schema}".barrier`);
    if (r.rows[0].n >= parties) break;
    await new Promise((done) => setTimeout(done, 5));
  }
  await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const out = await ledger.run("race", `k${i}`, { i }, async () => {
        await effects.query(
          `INSERT INTO "${schema}".effects (session_id, call_id, label, pid) VALUES ('ledger', $1, 'ledger', $2)`,
          [`k${i}`, process.pid],
        );
        return i;
      });
      if (out.type === "ran") ran++;
    }),
  );
  say({ ev: "ledger-done", ran });
  await store.close();
  await effects.end();
  process.exit(0);
} else {
  throw new Error(`unknown mode ${mode}: runner, worker or ledger`);
}
