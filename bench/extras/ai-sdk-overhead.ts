/**
 * Per-step overhead of `aiSdkModel` (over `@ai-sdk/openai`'s Chat Completions model) against
 * `openaiModel` (the `openai` SDK) on the same loopback stream: one node:http server on
 * 127.0.0.1 answers every request with the same Chat Completions SSE bytes (one tool call, then
 * a final text on the last step); each round runs a session of STEPS steps (memory store, one
 * tool call a step) with one adapter, then the other, interleaved, in one process.
 *   npx tsx bench/extras/ai-sdk-overhead.ts [steps=200] [rounds=7]
 * Prints the median and fastest µs a step of each and their differences, then the adapter alone:
 * one request (a 27-message history, the tool-call reply) of each in turn, 300 pairs, with the
 * median of the pair differences (the steadier figure on a busy machine).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createOpenAI } from "@ai-sdk/openai";
import { z } from "zod";
import { createAgent } from "../../actors/agent.ts";
import { type Message, userText } from "../../contracts/messages.ts";
import type { Model } from "../../contracts/model.ts";
import { aiSdkModel } from "../../providers/ai-sdk-model.ts";
import { openaiModel } from "../../providers/openai-model.ts";
import { defineTool } from "../../tools/define-tool.ts";

const STEPS = Number(process.argv[2] ?? 200);
const ROUNDS = Number(process.argv[3] ?? 7);

const sse = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;
const chunk = (delta: unknown, finish: string | null = null) => ({
  id: "chatcmpl-bench",
  object: "chat.completion.chunk",
  created: 1_700_000_000,
  model: "bench",
  choices: [{ index: 0, delta, finish_reason: finish }],
});
const usage = {
  id: "chatcmpl-bench",
  object: "chat.completion.chunk",
  created: 1_700_000_000,
  model: "bench",
  choices: [],
  usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 },
};
const callBody = [
  sse(chunk({ role: "assistant", content: "" })),
  sse(chunk({ content: "Reading the next file." })),
  sse(
    chunk({
      tool_calls: [
        { index: 0, id: "call_x", type: "function", function: { name: "read", arguments: "" } },
      ],
    }),
  ),
  sse(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"path":' } }] })),
  sse(chunk({ tool_calls: [{ index: 0, function: { arguments: '"src/a.ts"}' } }] })),
  sse(chunk({}, "tool_calls")),
  sse(usage),
  "data: [DONE]\n\n",
].join("");
const textBody = [
  sse(chunk({ role: "assistant", content: "" })),
  sse(chunk({ content: "Done." })),
  sse(chunk({}, "stop")),
  sse(usage),
  "data: [DONE]\n\n",
].join("");

let served = 0;
const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    served++;
    const last = served % STEPS === 0;
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(last ? textBody : callBody);
  });
});
await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;

const read = defineTool({
  name: "read",
  description: "Reads a file.",
  parameters: z.object({ path: z.string() }),
  traits: { readOnly: true, concurrencySafe: true },
  execute: async ({ path }) => `contents of ${path}`,
});

const adapters: Record<string, () => Model> = {
  openaiModel: () => openaiModel({ model: "bench", baseURL, apiKey: "k", contextWindow: 128_000 }),
  aiSdkModel: () =>
    aiSdkModel(createOpenAI({ baseURL, apiKey: "k" }).chat("bench"), { contextWindow: 128_000 }),
};

async function round(make: () => Model): Promise<number> {
  served = 0;
  const agent = createAgent({ model: make(), tools: [read], limits: { maxSteps: STEPS + 1 } });
  const session = agent.session("bench");
  const t0 = performance.now();
  const out = await session.prompt("read them all");
  const ms = performance.now() - t0;
  if (out.status !== "completed" || served !== STEPS)
    throw new Error(`round failed: ${JSON.stringify(out)} after ${served} requests`);
  await agent.close();
  return (ms * 1000) / STEPS;
}

const results: Record<string, number[]> = { openaiModel: [], aiSdkModel: [] };
for (const name of Object.keys(adapters)) await round(adapters[name]); // warm-up
for (let r = 0; r < ROUNDS; r++) {
  for (const name of r % 2 ? ["aiSdkModel", "openaiModel"] : ["openaiModel", "aiSdkModel"]) {
    results[name].push(await round(adapters[name]));
  }
}
// Adapter alone, paired: one request of each in turn (a 27-message history), so a load spike
// hits both sides of a pair; the median of the pair differences is the steadier figure.
const history: Message[] = [userText("read them all")];
for (let i = 0; i < 13; i++) {
  history.push({
    role: "assistant",
    content: [
      { type: "text", text: "Reading the next file." },
      { type: "tool-call", id: `call_${i}`, name: "read", arguments: '{"path":"src/a.ts"}' },
    ],
  });
  history.push({
    role: "tool",
    content: [{ type: "tool-result", callId: `call_${i}`, name: "read", content: "contents" }],
  });
}
const PAIRS = 300;
const models = { openaiModel: adapters.openaiModel(), aiSdkModel: adapters.aiSdkModel() };
async function once(model: Model): Promise<number> {
  const t0 = performance.now();
  let n = 0;
  const request = {
    messages: history,
    tools: [read].map((t) => ({
      type: "function" as const,
      function: { name: t.name, description: t.description, parameters: { type: "object" } },
    })),
    signal: new AbortController().signal,
    attemptId: "a",
  };
  for await (const _ of model.stream(request)) n++;
  if (n === 0) throw new Error("no events");
  return (performance.now() - t0) * 1000;
}
const pairs: { a: number; b: number }[] = [];
served = 1; // every reply is the tool-call body
for (let i = 0; i < 20; i++) await once(models[i % 2 ? "aiSdkModel" : "openaiModel"]);
for (let i = 0; i < PAIRS; i++) {
  served = 1;
  const first = i % 2 === 0;
  const x = await once(first ? models.openaiModel : models.aiSdkModel);
  const y = await once(first ? models.aiSdkModel : models.openaiModel);
  pairs.push(first ? { a: x, b: y } : { a: y, b: x });
}
server.close();
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const min = (xs: number[]) => Math.min(...xs);
const a = median(results.openaiModel);
const b = median(results.aiSdkModel);
console.log(
  `${STEPS} steps × ${ROUNDS} rounds, loopback HTTP, one tool call a step (Node ${process.version})`,
);
console.log(
  `openaiModel  ${a.toFixed(0)} µs/step  (rounds: ${results.openaiModel.map((x) => x.toFixed(0)).join(" ")})`,
);
console.log(
  `aiSdkModel   ${b.toFixed(0)} µs/step  (rounds: ${results.aiSdkModel.map((x) => x.toFixed(0)).join(" ")})`,
);
console.log(`difference   ${(b - a).toFixed(0)} µs/step (${(b / a).toFixed(2)}×) by medians`);
const am = min(results.openaiModel);
const bm = min(results.aiSdkModel);
console.log(
  `fastest rounds: openaiModel ${am.toFixed(0)}, aiSdkModel ${bm.toFixed(0)} µs/step (${(bm - am).toFixed(0)} µs, ${(bm / am).toFixed(2)}×)`,
);
const pm = (f: (p: { a: number; b: number }) => number) => median(pairs.map(f));
console.log(
  `one request alone, ${PAIRS} pairs: openaiModel ${pm((p) => p.a).toFixed(0)} µs, aiSdkModel ${pm((p) => p.b).toFixed(0)} µs, median pair difference ${pm((p) => p.b - p.a).toFixed(0)} µs`,
);
