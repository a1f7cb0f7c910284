// A child process for the reasoning-across-a-crash test: runs one prompt with a real AI SDK
// provider package against the parent's loopback server on a SQLite session; the model's reply
// carries reasoning and a call of `block`, whose execute prints "READY" (its start record is
// durable by then, and the assistant message before it) and never returns. The parent kills it.
import { z } from "zod";
import { createAgent } from "../../actors/agent.ts";
import { sqliteStore } from "../../session/stores/sqlite-store.ts";
import { defineTool } from "../../tools/define-tool.ts";
import { WIRES } from "./provider-wires.ts";

const [dbPath, kind, baseURL] = process.argv.slice(2);
const wire = WIRES.find((w) => w.kind === kind);
if (!wire) throw new Error(`unknown wire ${kind}; one of ${WIRES.map((w) => w.kind).join(", ")}`);
const block = defineTool({
  name: "slow",
  description: "Blocks.",
  parameters: z.object({ path: z.string() }),
  execute: () => {
    process.stdout.write("READY\n");
    return new Promise<never>(() => {});
  },
});
const store = sqliteStore(dbPath, { durability: "process" });
const session = createAgent({ model: wire.model(baseURL), store, tools: [block] }).session("crash");
void session.prompt("read a.txt");
