/**
 * One long SSE line (a tool call's arguments in one `data:` line) sent in 1 KB network pieces,
 * through the real `openai` SDK over loopback HTTP: the SDK's own line decoder (quadratic: it
 * re-concatenates and rescans its buffer per piece) against the same SDK reading through
 * Keel's `providerFetch` (lines handed over whole). Same process, interleaved, ms per stream.
 * `npx tsx bench/extras/sse-long-line.ts [MB...]` (default 1 2 4 8)
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { providerFetch } from "../../providers/openai-fetch.ts";

const sizes = process.argv.slice(2).map(Number);
let line = "";
const server = createServer((_req, res) => {
  res.writeHead(200, { "content-type": "text/event-stream" });
  let i = 0;
  const write = () => {
    while (i < line.length) {
      const ok = res.write(line.slice(i, i + 1024));
      i += 1024;
      if (!ok) return void res.once("drain", write);
    }
    res.end(
      'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n',
    );
  };
  write();
});
await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
const baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
const plain = new OpenAI({ apiKey: "x", baseURL, maxRetries: 0 });
const keel = new OpenAI({
  apiKey: "x",
  baseURL,
  maxRetries: 0,
  fetch: providerFetch((input, init) => fetch(input, init)),
});
async function once(client: OpenAI): Promise<number> {
  const t = performance.now();
  const stream = await client.chat.completions.create({
    model: "m",
    messages: [{ role: "user", content: "hi" }],
    stream: true,
  });
  let chars = 0;
  for await (const c of stream) chars += c.choices[0]?.delta?.content?.length ?? 0;
  if (chars < 1) throw new Error("no content");
  return performance.now() - t;
}
console.log("| MB | SDK decoder ms | through providerFetch ms | ratio |");
console.log("|---|---|---|---|");
for (const mb of sizes.length ? sizes : [1, 2, 4, 8]) {
  const content = "x".repeat(mb * 1024 * 1024);
  line = `data: ${JSON.stringify({ id: "x", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
  const a: number[] = [];
  const b: number[] = [];
  for (let r = 0; r < 3; r++) {
    a.push(await once(plain));
    b.push(await once(keel));
  }
  const med = (x: number[]) => x.sort((p, q) => p - q)[1];
  console.log(
    `| ${mb} | ${med(a).toFixed(0)} | ${med(b).toFixed(0)} | ${(med(a) / med(b)).toFixed(1)}× |`,
  );
}
server.close();
