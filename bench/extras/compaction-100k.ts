/**
 * Time of one automatic compaction of a ~100 000-token history, from the built package
 * (`dist/`), with a scripted summarizer that answers at once: what the runtime itself costs
 * (the cut over the log, the summary input, validation, the append and the rebuilt view), not
 * the model. The session is driven by the runtime: a scripted model with a 136 000-token window
 * and a 16 000-token reserve reads ~400-token files until the budget crosses 0.85 of the
 * window; the time is from that `context.measured` to `context.compacted`.
 *
 *   npm run build && npx tsx bench/extras/compaction-100k.ts
 */
const dist = process.env.KEEL_DIST ?? new URL("../../dist/index.js", import.meta.url).href;
const keel = (await import(dist)) as typeof import("../../index.ts");
const { createAgent, defineTool, scriptedModel, requestTokens, estimateTextTokens } = keel;
const { z } = await import("zod");

const file = `export function f() {\n${"  return compute(a, b) + other(c, d); // a line of code\n".repeat(28)}}\n`;
const read = defineTool({
  name: "read_file",
  description: "Reads a file.",
  parameters: z.object({ path: z.string() }),
  traits: { readOnly: true, concurrencySafe: true, risk: "low" },
  execute: () => file,
});

for (let round = 0; round < 3; round++) {
  let step = 0;
  let summaries = 0;
  const model = scriptedModel(
    (request) => {
      if (request.tools.length === 0) {
        summaries++;
        return { text: "Read many files; each defines f() returning compute(a, b) + other(c, d)." };
      }
      step++;
      const usage = { inputTokens: requestTokens(request, estimateTextTokens), outputTokens: 20 };
      if (summaries > 0) return { text: "done", usage };
      return {
        toolCalls: [{ id: `c${step}`, name: "read_file", arguments: `{"path":"f${step}.ts"}` }],
        usage,
      };
    },
    { contextWindow: 136_000, maxOutputTokens: 16_000, record: "none" },
  );
  const agent = createAgent({ model, tools: [read], limits: { maxSteps: 10_000 } });
  const session = agent.session("big");
  let due = 0;
  let before = 0;
  let took = 0;
  let after = 0;
  session.subscribe((e) => {
    if (e.type === "context.measured" && e.used + e.reserve > 0.85 * e.window && !due) {
      due = performance.now();
      before = e.used;
    }
    if (e.type === "context.compacted" && e.ok) {
      took = performance.now() - due;
      after = e.tokensAfter ?? 0;
    }
  });
  const result = await session.prompt("read every file");
  console.log(
    `round ${round + 1}: ${result.status} after ${step} steps; compaction of a ${before}-token history (${session.entries().length} entries) → ${after} tokens: ${took.toFixed(1)} ms`,
  );
  await agent.close();
}
