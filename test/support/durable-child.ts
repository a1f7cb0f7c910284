// A child process for durable-wait tests (test/durable-waits.e2e.test.ts): runs one scenario on
// a shared store (a SQLite file, or a PostgreSQL URL and schema) and prints JSON lines:
// {"ev":"ready"} at the moment to kill or to answer, {"ev":"result",...} when its turn ends.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { createAgent } from "../../actors/agent.ts";
import type { ScriptStep } from "../../providers/scripted-model.ts";
import { scriptedModel } from "../../providers/scripted-model.ts";
import { postgresStore } from "../../session/stores/postgres-store.ts";
import { sqliteStore } from "../../session/stores/sqlite-store.ts";
import { durableTools } from "./durable-tools.ts";

const [where, dir, scenario, run, schema] = process.argv.slice(2);
const say = (line: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(line)}\n`);
const store = where.startsWith("postgres")
  ? await postgresStore(where, { schema, max: 4 })
  : sqliteStore(where, { durability: "process" });
const hang = () => new Promise<never>(() => {});

const scripts: Record<string, ScriptStep[]> = {
  // One high-risk call that needs an approval.
  approval: [
    { toolCalls: [{ id: "m1", name: "mark", arguments: '{"label":"once"}' }] },
    { text: "marked after approval" },
  ],
  // A step that commits, then a call that is cut while it runs.
  "mid-turn": [
    { toolCalls: [{ id: "q1", name: "look", arguments: "{}" }] },
    { toolCalls: [{ id: "m1", name: "mark", arguments: '{"label":"once"}' }] },
  ],
  // Every request asks for a new cut call: each run is killed in it.
  answer: [],
  loop: [{ toolCalls: [{ id: `m${run}`, name: "mark", arguments: `{"label":"run ${run}"}` }] }],
};
const steps = scripts[scenario];
if (!steps) throw new Error(`unknown scenario ${scenario}`);

const agent = createAgent({
  model: scriptedModel(steps),
  store,
  tools: durableTools({
    dir,
    afterEffect:
      scenario === "approval"
        ? async () => {}
        : async () => {
            say({ ev: "ready" });
            return hang();
          },
  }),
  lease: { ttlMs: 3000, pollMs: 50 },
  recovery: { maxContinuations: 1 },
  permissions:
    scenario === "approval" || scenario === "answer"
      ? {
          ask: async () => {
            say({ ev: "ready" });
            return hang();
          },
        }
      : { rules: [{ tool: "*", action: "allow" }] },
});
const session = await agent.openSession("durable");
say({ ev: "role", role: session.role });
if (scenario === "answer") {
  // A follower answers as soon as the parent says go (a file appears): two answers at once.
  while ((await session.pendingPermissions()).length === 0) await sleep(10);
  say({ ev: "ready" });
  while (!existsSync(join(dir, "go"))) await sleep(2);
  say({ ev: "answered", answer: await session.replyPermission("m1.perm", { type: "allow_once" }) });
} else if (run === "1") {
  const result = await session.prompt("go");
  say({ ev: "result", result });
} else {
  // Later runs only open the session: a cut turn goes on by itself.
  await session.awaitIdle();
}
await agent.closeSession("durable");
await store.close();
process.exit(0);
