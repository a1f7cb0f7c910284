/**
 * Session store benchmarks. Run: `npx tsx bench/store.bench.ts` (prints JSON), or import
 * `runStoreBench()` for the figures.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import pino from "pino";
import { createAgent } from "../actors/agent.ts";
import { seededIds } from "../actors/ids.ts";
import type { Clock } from "../contracts/clock.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { exportJsonl } from "../session/branches.ts";
import type { EntryInput } from "../session/entries.ts";
import { SessionLog } from "../session/log.ts";
import { planRecovery } from "../session/recovery.ts";
import type { SessionStore } from "../session/store.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";

export interface RecoveryFigures {
  entries: number;
  /** Open from the store (checkpoint + tail) + messages() + openWork(). */
  openMs: number;
  /**
   * What resuming costs an application: `createAgent(...).session(id)` until `ready` (open,
   * crash recovery, inbox), with a SQLite store.
   */
  agentOpenMs: number;
  /** The same without checkpoints: decode and replay every entry. */
  fullReplayMs: number;
  /** readFileSync + split + JSON.parse of every line of the session's JSONL export. */
  jsonlParseMs: number;
  /** Entries after the last checkpoint (decoded and replayed at open). */
  tailEntries: number;
  /** openMs / jsonlParseMs (target ≤ 0.6). */
  ratio: number;
}

export interface StoreBenchFigures {
  /** Entries per second with one flush per step (8 entries a step). */
  appendsPerSecond: { memory: number; sqliteProcess: number; sqlitePower: number };
  /** Mean µs per step (8 appends + 1 flush), wall clock and CPU (the machine may be shared). */
  usPerStep: { memory: number; sqliteProcess: number; sqlitePower: number };
  cpuUsPerStep: { memory: number; sqliteProcess: number; sqlitePower: number };
  /** After a clean close (checkpoint at the end) and after a crash (last automatic checkpoint + tail). */
  recovery: { afterClose: RecoveryFigures; afterCrash: RecoveryFigures };
  /** µs per `append` + `messages()` with this many entries already in the log. */
  appendAndMessagesUs: { at10: number; at10000: number };
}

let tick = 0;
const clock: Clock = { now: () => ++tick, setTimeout: () => 0, clearTimeout: () => {} };

/** One typical step: attempt, assistant message with 2 calls, starts, results, attempt end. */
function stepEntries(i: number): EntryInput[] {
  const turnId = `t${Math.floor(i / 10)}`;
  const attemptId = `a${i}`;
  const calls = [0, 1].map((k) => ({
    type: "tool-call" as const,
    id: `c${i}_${k}`,
    name: k ? "read_file" : "grep",
    arguments: JSON.stringify({ path: `src/file${i}.ts`, pattern: "foo" }),
  }));
  const out: EntryInput[] = [
    { type: "attempt_start", turnId, attemptId, step: i },
    {
      type: "assistant_message",
      turnId,
      attemptId,
      content: [{ type: "text", text: `Looking at file ${i} for the definition.` }, ...calls],
      finishReason: "tool_calls",
      usage: { inputTokens: 1000 + i, outputTokens: 40 },
    },
    { type: "attempt_end", attemptId, status: "completed" },
  ];
  for (const c of calls) {
    out.push({
      type: "call_started",
      callId: c.id,
      name: c.name,
      args: { path: `src/file${i}.ts` },
      idempotencyKey: `k_${c.id}`,
      idempotent: true,
    });
  }
  for (const c of calls) {
    out.push({
      type: "call_result",
      callId: c.id,
      name: c.name,
      outcome: "completed",
      result: { ok: true, content: `export function f${i}() {\n  return ${i};\n}\n`.repeat(3) },
    });
  }
  out.push({ type: "note", text: `step ${i} done` });
  return out;
}

async function stepsPerSecond(
  store: SessionStore,
  steps: number,
): Promise<{ perSecond: number; usPerStep: number; cpuUsPerStep: number }> {
  const log = await SessionLog.open({ sessionId: "bench", store, clock, ids: seededIds(1) });
  const batches = Array.from({ length: steps }, (_, i) => stepEntries(i));
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (const batch of batches) {
    for (const e of batch) log.append(e);
    await log.flush();
  }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return {
    perSecond: Math.round((steps * 8) / (ms / 1000)),
    usPerStep: Math.round((ms * 1000) / steps),
    cpuUsPerStep: Math.round((cpu.user + cpu.system) / steps),
  };
}

async function buildBigSession(
  dir: string,
  entries: number,
  closeCleanly: boolean,
): Promise<{ db: string; jsonl: string; count: number }> {
  const db = join(dir, `recovery-${closeCleanly}.db`);
  const store = sqliteStore(db);
  const log = await SessionLog.open({ sessionId: "big", store, clock, ids: seededIds(2) });
  for (let i = 0; log.entries().length < entries; i++) {
    if (i % 10 === 0) log.append({ type: "user_message", text: `Please look at module ${i}.` });
    for (const e of stepEntries(i)) log.append(e);
    if (i % 5 === 0) await log.flush();
  }
  if (closeCleanly) await log.close();
  else await log.flush();
  const jsonl = join(dir, "big.jsonl");
  writeFileSync(jsonl, exportJsonl(log));
  const count = log.entries().length;
  await store.close();
  return { db, jsonl, count };
}

const best = async (fn: () => Promise<void> | void) => {
  let min = Number.POSITIVE_INFINITY;
  for (let r = 0; r < 5; r++) {
    const t0 = performance.now();
    await fn();
    min = Math.min(min, performance.now() - t0);
  }
  return min;
};

/** Reopen + projection + recovery plan, vs reading and JSON.parse-ing every line of the JSONL export. */
async function recovery(
  dir: string,
  entries: number,
  closeCleanly: boolean,
): Promise<RecoveryFigures> {
  const { db, jsonl, count } = await buildBigSession(dir, entries, closeCleanly);
  const jsonlParseMs = await best(() => {
    const lines = readFileSync(jsonl, "utf8").split("\n");
    for (const line of lines) if (line) JSON.parse(line);
  });
  const openMs = await best(async () => {
    const s = sqliteStore(db);
    const reopened = await SessionLog.open({
      sessionId: "big",
      store: s,
      clock,
      ids: seededIds(3),
    });
    reopened.messages();
    reopened.openWork();
    await s.close();
  });
  // On a fresh copy each time: resuming writes (recovery entries, a checkpoint at close).
  let agentOpenMs = Number.POSITIVE_INFINITY;
  for (let r = 0; r < 5; r++) {
    const copy = join(dir, `resume-${closeCleanly}-${r}.db`);
    copyFileSync(db, copy);
    const s = sqliteStore(copy);
    const agent = createAgent({
      model: scriptedModel([{ text: "resumed" }]),
      store: s,
      logger: pino({ level: "silent" }),
    });
    const t0 = performance.now();
    await agent.session("big").ready;
    agentOpenMs = Math.min(agentOpenMs, performance.now() - t0);
    await agent.close();
    await s.close();
    rmSync(copy, { force: true });
  }
  const fullReplayMs = await best(async () => {
    const s = sqliteStore(db);
    const reopened = await SessionLog.open({
      sessionId: "big",
      store: s,
      clock,
      ids: seededIds(3),
      checkpoints: false,
    });
    planRecovery(await s.load("big"));
    reopened.messages();
    await s.close();
  });
  const probe = sqliteStore(db);
  const tailEntries = (await probe.loadFromCheckpoint("big"))?.tail.length ?? count;
  await probe.close();
  return {
    entries: count,
    tailEntries,
    openMs: round(openMs),
    agentOpenMs: round(agentOpenMs),
    fullReplayMs: round(fullReplayMs),
    jsonlParseMs: round(jsonlParseMs),
    ratio: round(openMs / jsonlParseMs),
  };
}

async function appendAndMessages(size: number): Promise<number> {
  const log = await SessionLog.open({
    sessionId: "flat",
    store: memoryStore(),
    clock,
    ids: seededIds(4),
  });
  for (let i = 0; log.entries().length < size; i++) for (const e of stepEntries(i)) log.append(e);
  const n = 20_000;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    log.append({ type: "user_message", text: `message ${i}` });
    log.messages();
  }
  return round(((performance.now() - t0) * 1000) / n);
}

const round = (x: number) => Math.round(x * 100) / 100;

/** Runs every store benchmark and returns the figures. */
export async function runStoreBench(
  options: { steps?: number; recoveryEntries?: number } = {},
): Promise<StoreBenchFigures> {
  const steps = options.steps ?? 2000;
  const dir = mkdtempSync(join(tmpdir(), "keel-bench-"));
  try {
    const memory = await stepsPerSecond(memoryStore(), steps);
    const proc = await stepsPerSecond(
      sqliteStore(join(dir, "p.db"), { durability: "process" }),
      steps,
    );
    const power = await stepsPerSecond(
      sqliteStore(join(dir, "f.db"), { durability: "power" }),
      Math.min(steps, 500),
    );
    await appendAndMessages(10); // warm-up (JIT)
    await appendAndMessages(10_000);
    return {
      appendsPerSecond: {
        memory: memory.perSecond,
        sqliteProcess: proc.perSecond,
        sqlitePower: power.perSecond,
      },
      usPerStep: {
        memory: memory.usPerStep,
        sqliteProcess: proc.usPerStep,
        sqlitePower: power.usPerStep,
      },
      cpuUsPerStep: {
        memory: memory.cpuUsPerStep,
        sqliteProcess: proc.cpuUsPerStep,
        sqlitePower: power.cpuUsPerStep,
      },
      recovery: {
        afterClose: await recovery(dir, options.recoveryEntries ?? 100_000, true),
        afterCrash: await recovery(dir, options.recoveryEntries ?? 100_000, false),
      },
      appendAndMessagesUs: {
        at10: await appendAndMessages(10),
        at10000: await appendAndMessages(10_000),
      },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(JSON.stringify(await runStoreBench(), null, 2));
}
