// One process of bench/extras/durable-steps.ts. It loads Keel from the checkout it is given
// (`entry`: an index.ts), so the same workload runs against this checkout and another one, and
// uses only Keel's public API. Prints one JSON line.
//
//   steps   <entry> <kind> <where> <sessions> <steps> <tag>
//     `sessions` concurrent sessions on one store, each `steps` steps of one tool call, then
//     text: {steps, ms, latencies (ms between a session's model requests), cpuUs, stallMs (the
//     event loop's longest delay), failed, failure, groups, items (group commit, when the
//     checkout has it)}
//   ceiling <entry> <kind> <where> <writers> <ms> <tag>
//     the store alone: `writers` concurrent appenders, each appending two entries (the size of a
//     step's flush) and awaiting it, for `ms`: {appends, ms, cpuUs, stallMs, groups, items}
//
// kind: memory | sqlite-process | sqlite-power | postgres; where: a SQLite file, or
// `<url>|<schema>` for PostgreSQL.
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import pino from "pino";
import { z } from "zod";

type Keel = typeof import("../../index.ts");
type Store = import("../../index.ts").SessionStore;
type Stats = { groups: number; items: number } | undefined;

const [mode, entry, kind, where, countArg, amountArg, tag] = process.argv.slice(2);
const keel = (await import(pathToFileURL(entry).href)) as Keel;
// Group commit's counters, in checkouts that have them (session/stores/group-commit.ts).
let statsOf: (store: object) => Stats = () => undefined;
try {
  const gc = await import(
    pathToFileURL(join(dirname(entry), "session/stores/group-commit.ts")).href
  );
  statsOf = gc.groupCommitStats;
} catch {
  // a checkout from before group commit
}

async function openStore(): Promise<Store> {
  if (kind === "memory") return keel.memoryStore();
  if (kind === "postgres") {
    const [url, schema] = where.split("|");
    return keel.postgresStore(url, { schema, max: Math.min(20, Number(countArg) + 2) });
  }
  return keel.sqliteStore(where, {
    durability: kind === "sqlite-power" ? "power" : "process",
    busyTimeoutMs: 30_000,
  });
}

const store = await openStore();
const count = Number(countArg);
const amount = Number(amountArg);
const out = mode === "ceiling" ? await ceiling(count, amount) : await steps(count, amount);
await store.close();
process.stdout.write(`${JSON.stringify(out)}\n`);

/**
 * The event loop's longest stall: the longest gap between ticks of a 5 ms timer, from the start
 * to the end (a run made only of microtasks never lets the timer fire: its whole length is one
 * stall). `monitorEventLoopDelay` records nothing then, so it is not used.
 */
function stallMeter(): () => number {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 5);
  return () => {
    clearInterval(timer);
    return Math.max(longest, performance.now() - last);
  };
}

/** Times `fn` with CPU, the event loop's longest stall and group-commit counters. */
async function measured<T extends object>(fn: () => Promise<T>) {
  const before = statsOf(store);
  const g0 = before ? { ...before } : undefined;
  const cpu0 = process.cpuUsage();
  const stall = stallMeter();
  const t0 = performance.now();
  const result = await fn();
  const ms = performance.now() - t0;
  const stallMs = stall();
  const cpu = process.cpuUsage(cpu0);
  const after = statsOf(store);
  return {
    ...result,
    ms,
    cpuUs: cpu.user + cpu.system,
    stallMs,
    groups: after && g0 ? after.groups - g0.groups : undefined,
    items: after && g0 ? after.items - g0.items : undefined,
  };
}

async function steps(sessions: number, perSession: number) {
  const noop = keel.defineTool({
    name: "noop",
    description: "Does nothing.",
    parameters: z.object({ i: z.number() }),
    traits: { concurrencySafe: true },
    execute: ({ i }) => `ok ${i}`,
  });
  let calls = 0;
  const model = (n: number) =>
    keel.scriptedModel(
      (request) => {
        const results = request.messages.filter((m) => m.role === "tool").length;
        if (results >= n) return { text: "done" };
        const args = JSON.stringify({ i: results });
        return { toolCalls: [{ id: `c${++calls}`, name: "noop", arguments: args }] };
      },
      { record: "none" },
    );
  const agentFor = (n: number) =>
    keel.createAgent({
      model: model(n),
      tools: [noop],
      store,
      limits: { maxSteps: n + 5 },
      logger: pino({ level: "silent" }),
    });
  // Warm-up (untimed): one session of 30 steps, so the timed run is not the JIT's first.
  const warm = agentFor(30);
  await warm.session(`${tag}-warm`).prompt("go");
  await warm.close();
  const agent = agentFor(perSession);
  const latencies: number[] = [];
  let failed = 0;
  let failure: string | undefined;
  const result = await measured(async () => {
    await Promise.all(
      Array.from({ length: sessions }, async (_, i) => {
        const session = agent.session(`${tag}-${i}`);
        let last = 0;
        session.subscribe((e) => {
          if (e.type !== "attempt.started") return;
          const now = performance.now();
          if (last) latencies.push(now - last);
          last = now;
        });
        try {
          const r = await session.prompt("go");
          if (r.status !== "completed") {
            failed++;
            failure ??= `${r.status}: ${r.reason ?? ""}`;
          }
        } catch (error) {
          failed++;
          failure ??= String(error);
        }
      }),
    );
    return {};
  });
  await agent.close();
  return { steps: latencies.length, latencies, failed, failure, ...result };
}

async function ceiling(writers: number, ms: number) {
  const body = (seq: number) => ({
    type: "user_message" as const,
    text: `a tool result of a typical size, step ${seq}: ${"x".repeat(200)}`,
  });
  let appends = 0;
  const result = await measured(async () => {
    const end = performance.now() + ms;
    await Promise.all(
      Array.from({ length: writers }, async (_, w) => {
        const sessionId = `${tag}-w${w}`;
        for (let seq = 1; performance.now() < end; seq += 2) {
          const at = Date.now();
          const entries = [seq, seq + 1].map((s) => ({
            ...body(s),
            id: `${sessionId}-${s}`,
            parentId: s > 1 ? `${sessionId}-${s - 1}` : null,
            seq: s,
            at,
          }));
          await store.append(sessionId, entries as Parameters<Store["append"]>[1]);
          appends++;
        }
      }),
    );
    return {};
  });
  return { appends, ...result };
}
