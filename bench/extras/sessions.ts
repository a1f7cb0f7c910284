/**
 * Memory of Keel sessions in one process (memory store, heap after two forced GCs):
 * - `idle`: sessions opened and ready, no turn yet;
 * - `afterTurn`: sessions that ran one prompt (one tool step, then text) and are idle again;
 * - `midTurn`: sessions whose one tool call is running (held on a gate) when the heap is read;
 * - `idleAsleep`, `afterTurnAsleep`: `idle` and `afterTurn` on an agent with `dormantAfterMs: 0`,
 *   read once every session has slept (its log let go, reopened from the store at its next use).
 * Each figure is (heap with the sessions − heap before them) / count. Keel is its built package,
 * dist/index.js, like in the step benchmark (lib/keel-entry.ts; `KEEL_ENTRY` names another entry).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import type { ModelRequest } from "../../contracts/model.ts";
import { importKeel, type KeelModule } from "../lib/keel-entry.ts";
import { describeError } from "../lib/measure.ts";
import { emitResult, readChildOptions } from "../lib/protocol.ts";
import { workload } from "../lib/workload.ts";

export interface SessionsOptions {
  idle: number;
  afterTurn: number;
  midTurn: number;
  /** Counts for the rows on an agent whose sessions sleep as soon as they are idle (0: skipped). */
  idleAsleep?: number;
  afterTurnAsleep?: number;
}

export interface SessionsFigure {
  count: number;
  heapBytesPerSession: number;
  rssBytesPerSession: number;
  /** Wall time to create (and for turns, run) all of them. */
  ms: number;
}

export type SessionsResult =
  | {
      ok: true;
      idle: SessionsFigure;
      afterTurn: SessionsFigure;
      midTurn: SessionsFigure;
      idleAsleep?: SessionsFigure;
      afterTurnAsleep?: SessionsFigure;
    }
  | { ok: false; error: string };

type Keel = KeelModule;

const gc = (globalThis as { gc?: () => void }).gc;

function heap(): { heap: number; rss: number } {
  if (gc === undefined) throw new Error("global gc() is missing: run with `node --expose-gc`");
  gc();
  gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, rss: m.rss };
}

/** One tool call, then final text once the request ends with a tool result. */
function oneStep(request: ModelRequest) {
  if (request.messages.at(-1)?.role === "tool") return { text: workload.finalText };
  return { toolCalls: [{ name: workload.toolName, arguments: workload.argsJson }] };
}

async function measure(
  count: number,
  build: (count: number) => Promise<{ hold: unknown; release: () => Promise<void> }>,
): Promise<SessionsFigure> {
  const before = heap();
  const started = performance.now();
  const { hold, release } = await build(count);
  const ms = performance.now() - started;
  const after = heap();
  await release();
  if (hold === undefined) throw new Error("nothing held");
  return {
    count,
    heapBytesPerSession: (after.heap - before.heap) / count,
    rssBytesPerSession: (after.rss - before.rss) / count,
    ms,
  };
}

async function main(keel: Keel, o: SessionsOptions): Promise<SessionsResult> {
  let gate: Promise<void> = Promise.resolve();
  let started = 0;
  let onStarted: (() => void) | undefined;
  let startTarget = Number.POSITIVE_INFINITY;
  const touch = keel.defineTool({
    name: workload.toolName,
    description: workload.toolDescription,
    parameters: z.object({ path: z.string() }),
    traits: { concurrencySafe: true, readOnly: true, risk: "low" },
    execute: async () => {
      if (++started === startTarget) onStarted?.();
      await gate;
      return workload.toolResult;
    },
  });
  const newAgent = (dormantAfterMs?: number) =>
    keel.createAgent({
      model: keel.scriptedModel(oneStep, { record: "none" }),
      tools: [touch],
      // STORE=sqlite: each agent on its own file, so the store's data is on disk, not in the heap.
      store:
        process.env.STORE === "sqlite"
          ? keel.sqliteStore(join(mkdtempSync(join(tmpdir(), "keel-sessions-")), "s.db"))
          : keel.memoryStore(),
      ...(dormantAfterMs === undefined ? {} : { dormantAfterMs }),
    });
  // Sleeping is a timer's work after each session went idle: give it a few turns of the loop.
  const settle = async () => {
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  };

  const idle = await measure(o.idle, async (count) => {
    const agent = newAgent();
    const sessions = Array.from({ length: count }, (_, i) => agent.session(`idle-${i}`));
    await Promise.all(sessions.map((s) => s.ready));
    return { hold: sessions, release: () => agent.close() };
  });

  const afterTurn = await measure(o.afterTurn, async (count) => {
    const agent = newAgent();
    const sessions = Array.from({ length: count }, (_, i) => agent.session(`turn-${i}`));
    for (const s of sessions) {
      const r = await s.prompt(workload.prompt);
      if (r.status !== "completed") throw new Error(`a turn ended ${r.status}: ${r.reason}`);
    }
    return { hold: sessions, release: () => agent.close() };
  });

  const midTurn = await measure(o.midTurn, async (count) => {
    const agent = newAgent();
    let open!: () => void;
    gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    started = 0;
    startTarget = count;
    const allStarted = new Promise<void>((resolve) => {
      onStarted = resolve;
    });
    const sessions = Array.from({ length: count }, (_, i) => agent.session(`mid-${i}`));
    const prompts = sessions.map((s) => s.prompt(workload.prompt));
    await allStarted;
    return {
      hold: { sessions, prompts },
      release: async () => {
        open();
        const results = await Promise.all(prompts);
        const bad = results.find((r) => r.status !== "completed");
        if (bad) throw new Error(`a mid-turn session ended ${bad.status}: ${bad.reason}`);
        await agent.close();
      },
    };
  });
  const idleAsleep = o.idleAsleep
    ? await measure(o.idleAsleep, async (count) => {
        const agent = newAgent(0);
        const sessions = Array.from({ length: count }, (_, i) => agent.session(`idle-z-${i}`));
        await Promise.all(sessions.map((s) => s.ready));
        await settle();
        return { hold: sessions, release: () => agent.close() };
      })
    : undefined;
  const afterTurnAsleep = o.afterTurnAsleep
    ? await measure(o.afterTurnAsleep, async (count) => {
        const agent = newAgent(0);
        const sessions = Array.from({ length: count }, (_, i) => agent.session(`turn-z-${i}`));
        for (const s of sessions) {
          const r = await s.prompt(workload.prompt);
          if (r.status !== "completed") throw new Error(`a turn ended ${r.status}: ${r.reason}`);
        }
        await settle();
        // Asleep, each still answers: its log is reopened from the store at the first read.
        if (sessions[0].messages().length === 0)
          throw new Error("a session that slept lost its log");
        return { hold: sessions, release: () => agent.close() };
      })
    : undefined;
  return { ok: true, idle, afterTurn, midTurn, idleAsleep, afterTurnAsleep };
}

try {
  const o = readChildOptions<SessionsOptions>();
  const keel = await importKeel([
    "createAgent",
    "defineTool",
    "scriptedModel",
    "memoryStore",
    "sqliteStore",
  ]);
  emitResult(await main(keel, o));
  process.exit(0);
} catch (e) {
  emitResult({ ok: false, error: describeError(e) } satisfies SessionsResult);
  process.exit(1);
}
