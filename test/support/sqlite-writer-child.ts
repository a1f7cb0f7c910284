// One writing process of test/sqlite-writers.e2e.test.ts: `sessions` sessions of this process
// run `steps` steps of one tool call each on a SQLite file shared with other such processes
// (durability power, a short lease). Prints one JSON line: how many prompts completed, the first
// failure, and the event loop's longest stall (the longest gap between ticks of a 5 ms timer).
//   node --import tsx sqlite-writer-child.ts <path> <tag> <sessions> <steps> <ttlMs>
import pino from "pino";
import { z } from "zod";
import { createAgent } from "../../actors/agent.ts";
import { scriptedModel } from "../../providers/scripted-model.ts";
import { sqliteStore } from "../../session/stores/sqlite-store.ts";
import { defineTool } from "../../tools/define-tool.ts";

const [path, tag, sessionsArg, stepsArg, ttlArg] = process.argv.slice(2);
const steps = Number(stepsArg);
const store = sqliteStore(path, { durability: "power" });
const noop = defineTool({
  name: "noop",
  description: "Does nothing.",
  parameters: z.object({ i: z.number() }),
  traits: { concurrencySafe: true },
  execute: ({ i }) => `ok ${i}`,
});
let calls = 0;
const model = scriptedModel(
  (request) => {
    const results = request.messages.filter((m) => m.role === "tool").length;
    if (results >= steps) return { text: "done" };
    const args = JSON.stringify({ i: results });
    return { toolCalls: [{ id: `${tag}-c${++calls}`, name: "noop", arguments: args }] };
  },
  { record: "none" },
);
const agent = createAgent({
  model,
  tools: [noop],
  store,
  limits: { maxSteps: steps + 5 },
  lease: { ttlMs: Number(ttlArg) },
  logger: pino({ level: "silent" }),
});
let last = performance.now();
let stallMs = 0;
const timer = setInterval(() => {
  const now = performance.now();
  stallMs = Math.max(stallMs, now - last);
  last = now;
}, 5);
let completed = 0;
let failure: string | undefined;
await Promise.all(
  Array.from({ length: Number(sessionsArg) }, async (_, i) => {
    try {
      const r = await agent.session(`${tag}-${i}`).prompt("go");
      if (r.status === "completed") completed++;
      else failure ??= `${r.status}: ${r.reason ?? ""}`;
    } catch (error) {
      failure ??= String(error);
    }
  }),
);
clearInterval(timer);
stallMs = Math.max(stallMs, performance.now() - last);
await agent.close().catch((error) => {
  failure ??= `close: ${String(error)}`;
});
await store.close();
process.stdout.write(`${JSON.stringify({ completed, failure, stallMs })}\n`);
