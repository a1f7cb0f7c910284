// One process of bench/extras/durable-steps.ts: runs `sessions` concurrent sessions on one store,
// each `steps` steps of one tool call, and prints {steps, ms, latencies} (per-step ms).
import { z } from "zod";
import { createAgent } from "../../actors/agent.ts";
import { scriptedModel } from "../../providers/scripted-model.ts";
import { postgresStore } from "../../session/postgres-store.ts";
import { sqliteStore } from "../../session/sqlite-store.ts";
import type { SessionStore } from "../../session/store.ts";
import { defineTool } from "../../tools/define-tool.ts";

const [kind, where, sessionsArg, stepsArg, tag] = process.argv.slice(2);
const sessions = Number(sessionsArg);
const steps = Number(stepsArg);
const store: SessionStore =
  kind === "postgres"
    ? await postgresStore(where, { max: Math.min(20, sessions + 2) })
    : sqliteStore(where, {
        durability: kind === "sqlite-power" ? "power" : "process",
        busyTimeoutMs: 30_000,
      });
const noop = defineTool({
  name: "noop",
  description: "Does nothing.",
  parameters: z.object({ i: z.number() }),
  traits: { concurrencySafe: true },
  execute: ({ i }) => `ok ${i}`,
});
let calls = 0;
const model = scriptedModel((request) => {
  const toolResults = request.messages.filter((m) => m.role === "tool").length;
  if (toolResults >= steps) return { text: "done" };
  return {
    toolCalls: [{ id: `c${++calls}`, name: "noop", arguments: JSON.stringify({ i: toolResults }) }],
  };
});
const agent = createAgent({ model, tools: [noop], store, limits: { maxSteps: steps + 5 } });
const latencies: number[] = [];
const t0 = performance.now();
await Promise.all(
  Array.from({ length: sessions }, async (_, i) => {
    const session = agent.session(`${tag}-${i}`);
    let last = 0;
    session.subscribe((e) => {
      if (e.type === "attempt.started") {
        const now = performance.now();
        if (last) latencies.push(now - last);
        last = now;
      }
    });
    await session.prompt("go");
  }),
);
const ms = performance.now() - t0;
await agent.close();
await store.close();
process.stdout.write(`${JSON.stringify({ steps: latencies.length, ms, latencies })}\n`);
