// A follower in its own process: opens sessions <id,id,…> on a store another process owns
// (SQLite file or PostgreSQL URL), sends one prompt to each and waits for them with a top-level
// await. Prints {ev:"role"} once all are open and {ev:"result"} as each prompt resolves; then
// lets the process end by itself (no process.exit): pending prompts must keep Node alive, as an
// owner's do.
//   follower-child.ts <sqlite path | postgres url> <sessionId[,sessionId…]> <text> [schema]
import { createAgent } from "../../actors/agent.ts";
import { scriptedModel } from "../../providers/scripted-model.ts";
import { postgresStore } from "../../session/stores/postgres-store.ts";
import { sqliteStore } from "../../session/stores/sqlite-store.ts";

const [where, sessionId, text, schema] = process.argv.slice(2);
const say = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);
const store = where.startsWith("postgres")
  ? await postgresStore(where, { schema, max: 4 })
  : sqliteStore(where);
const model = scriptedModel(() => ({ text: `answer from ${process.pid}` }));
const agent = createAgent({
  model,
  store,
  lease: { owner: `follower:${process.pid}`, ttlMs: 2000, pollMs: 50 },
});
const ids = sessionId.split(",");
const sessions = await Promise.all(ids.map((id) => agent.openSession(id)));
say({ ev: "role", roles: sessions.map((s) => s.role), role: sessions[0].role, pid: process.pid });
await Promise.all(
  sessions.map(async (session) => {
    const result = await session.prompt(`${text} ${session.id}`, { id: `in-${session.id}` });
    say({ ev: "result", sessionId: session.id, result, role: session.role });
  }),
);
await agent.close();
await store.close();
