/**
 * Keel: `createAgent` with `scriptedModel` (one step function: `callsPerStep` tool calls per
 * request until N, then final text; `record: "none"` so the fake keeps no request log), one
 * `defineTool` tool (concurrencySafe, returns "ok"), and the memory store or a SQLite store
 * on a temporary file with durability "process" (variant "memory" | "sqlite"). A fresh agent
 * and session per run, like the peers' fresh agent per run (one silent logger shared by all
 * runs); `maxSteps` N + 1. Keel is imported as its built package, dist/index.js (see
 * lib/keel-entry.ts; `KEEL_ENTRY` names another entry).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { importKeel, keelEntry } from "../lib/keel-entry.ts";
import { runStepChild, type StepHarness } from "../lib/measure.ts";
import type { StepBenchOptions } from "../lib/protocol.ts";
import { callId, workload } from "../lib/workload.ts";

async function createKeelHarness(o: StepBenchOptions): Promise<StepHarness> {
  const variant = o.variant ?? "memory";
  if (variant !== "memory" && variant !== "sqlite") {
    throw new Error(`keel variant must be "memory" or "sqlite", got ${JSON.stringify(variant)}`);
  }
  const keel = await importKeel([
    "createAgent",
    "defineTool",
    "scriptedModel",
    "memoryStore",
    "sqliteStore",
  ]);
  const { z } = await import("zod");
  let executions = 0;
  const touch = keel.defineTool({
    name: workload.toolName,
    description: workload.toolDescription,
    parameters: z.object({ path: z.string() }),
    traits: { concurrencySafe: true, readOnly: true, risk: "low" },
    execute: async () => {
      executions++;
      return workload.toolResult;
    },
  });
  // One silent logger for every run: what an application passes once, not per prompt.
  const logger = pino({ level: "silent" });
  const dir = variant === "sqlite" ? mkdtempSync(join(tmpdir(), "keel-bench-")) : undefined;
  const sqliteStore =
    dir === undefined
      ? undefined
      : keel.sqliteStore(join(dir, "bench.db"), { durability: "process" });
  return {
    label: variant === "sqlite" ? "Keel (SQLite)" : "Keel (memory)",
    version: `keel (this checkout, ${keelEntry().shown})`,
    notes: [
      variant === "sqlite"
        ? 'sqliteStore(tmp file, { durability: "process" }), one store for the process'
        : "memoryStore(), a new one per run",
      "scriptedModel step function, record: none; defineTool concurrencySafe; a silent pino logger shared by the runs",
    ],
    async run(steps, callsPerStep) {
      executions = 0;
      const calls = Array.from({ length: callsPerStep }, (_, i) => i);
      const model = keel.scriptedModel(
        (_request, index) => {
          const step = index + 1;
          if (step > steps) return { text: workload.finalText };
          return {
            toolCalls: calls.map((i) => ({
              id: callId(step, i),
              name: workload.toolName,
              arguments: workload.argsJson,
            })),
          };
        },
        { record: "none" },
      );
      const agent = keel.createAgent({
        model,
        tools: [touch],
        store: sqliteStore ?? keel.memoryStore(),
        limits: { maxSteps: steps + 1 },
        maxParallelToolCalls: 8,
        logger,
      });
      const session = agent.session();
      const result = await session.prompt(workload.prompt);
      if (result.status !== "completed") {
        throw new Error(`Keel's turn ended ${result.status}: ${result.reason ?? "(no reason)"}`);
      }
      return { toolExecutions: executions, keep: { agent, session } };
    },
    async close() {
      await sqliteStore?.close();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}

await runStepChild(createKeelHarness);
