// A hostile MCP server over stdio that speaks JSON-RPC by hand (no SDK), so it can send what the
// SDK's server never would: tools with a non-object inputSchema or an outputSchema Ajv cannot
// compile, names that collide once sanitised, catastrophic patterns, JSON-RPC errors, malformed
// results, progress that never ends. Run it as
//   node --import tsx test/support/mcp-raw-server.ts
// Environment: RAW_MANY=<n> lists n more tools ("t0", "t1", …); RAW_EVENTS=<file> appends one
// JSON line per call it received.
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";

const obj = (properties: Record<string, unknown>, required: string[] = []) => ({
  type: "object",
  properties,
  required,
});
const CATASTROPHIC = "^(a+)+$";

const tools: Record<string, unknown>[] = [
  { name: "echo", description: "Echoes.", inputSchema: obj({ text: { type: "string" } }) },
  { name: "fail32000", description: "Answers a JSON-RPC error -32000.", inputSchema: obj({}) },
  { name: "malformed", description: "Answers a malformed result.", inputSchema: obj({}) },
  {
    name: "not_object",
    description: "Its inputSchema is a string schema.",
    inputSchema: { type: "string" },
  },
  {
    name: "bad_output",
    description: "Its outputSchema cannot compile.",
    inputSchema: obj({}),
    outputSchema: { type: "object", properties: { a: { $ref: "#/nowhere" } } },
  },
  { name: "dup.name", description: "Collides once sanitised.", inputSchema: obj({}) },
  { name: "dup_name", description: "The other one.", inputSchema: obj({}) },
  {
    name: "pattern_in",
    description: "Its input has a catastrophic pattern.",
    inputSchema: obj({ s: { type: "string", pattern: CATASTROPHIC } }, ["s"]),
  },
  {
    name: "pattern_out",
    description: "Its output has a catastrophic pattern.",
    inputSchema: obj({}),
    outputSchema: obj({ s: { type: "string", pattern: CATASTROPHIC } }),
  },
  { name: "progress_forever", description: "Reports progress forever.", inputSchema: obj({}) },
];
for (let i = 0; i < Number(process.env.RAW_MANY ?? 0); i++) {
  tools.push({ name: `t${i}`, description: `Tool ${i}.`, inputSchema: obj({}) });
}

const send = (message: unknown) => process.stdout.write(`${JSON.stringify(message)}\n`);
const reply = (id: unknown, result: unknown) => send({ jsonrpc: "2.0", id, result });

function call(
  id: unknown,
  params: {
    name: string;
    arguments?: Record<string, unknown>;
    _meta?: { progressToken?: unknown };
  },
) {
  if (process.env.RAW_EVENTS) appendFileSync(process.env.RAW_EVENTS, `${JSON.stringify(params)}\n`);
  switch (params.name) {
    case "echo":
    case "dup.name":
    case "dup_name":
    case "pattern_in":
      return reply(id, {
        content: [{ type: "text", text: `${params.name}: ${JSON.stringify(params.arguments)}` }],
      });
    case "fail32000":
      return send({
        jsonrpc: "2.0",
        id,
        error: { code: -32000, message: "database is locked: try again later" },
      });
    case "malformed":
      return reply(id, { content: "not an array" });
    case "pattern_out":
      return reply(id, { content: [], structuredContent: { s: `${"a".repeat(30)}b` } });
    case "progress_forever": {
      let n = 0;
      const timer = setInterval(() => {
        send({
          jsonrpc: "2.0",
          method: "notifications/progress",
          params: { progressToken: params._meta?.progressToken, progress: ++n },
        });
      }, 50);
      timer.unref();
      return;
    }
    default:
      return send({
        jsonrpc: "2.0",
        id,
        error: { code: -32602, message: `unknown tool ${params.name}` },
      });
  }
}

createInterface({ input: process.stdin }).on("line", (line) => {
  const m = JSON.parse(line) as { id?: unknown; method: string; params?: Record<string, unknown> };
  if (m.id === undefined) return; // notifications
  if (m.method === "initialize") {
    return reply(m.id, {
      protocolVersion: m.params?.protocolVersion ?? "2025-06-18",
      capabilities: { tools: {} },
      serverInfo: { name: "raw", version: "1.0.0" },
    });
  }
  if (m.method === "tools/list") return reply(m.id, { tools });
  if (m.method === "tools/call") return call(m.id, m.params as never);
  if (m.method === "ping") return reply(m.id, {});
  send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "method not found" } });
});
