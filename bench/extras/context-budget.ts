/**
 * Per-step cost of context-budget tracking at N = 10 / 1 000 / 10 000 steps of history, from the
 * built package (`dist/`, run `npm run build` first), side by side with a full recount of the
 * request every step (what a runtime without an incremental budget pays).
 *
 *   npm run build && npx tsx bench/extras/context-budget.ts
 *
 * Each step appends a tool-calling assistant message and its result (~300 characters), then
 * times only the budget: `measure()` before the next request and `measured(usage)` after the
 * response. Counters: the chars estimate, and gpt-tokenizer's o200k (gpt-4o's) for the same.
 */
const dist = process.env.KEEL_DIST ?? new URL("../../dist/index.js", import.meta.url).href;
const keel = (await import(dist)) as typeof import("../../index.ts");
const { ContextBudget, SessionLog, memoryStore, systemClock, createIds, estimateTextTokens } = keel;
type Msg = import("../../index.ts").Message;

const tools = [
  {
    type: "function" as const,
    function: { name: "read_file", description: "Reads a file.", parameters: { type: "object" } },
  },
];
const instructions = "You are a coding agent working in one workspace directory.";
const result = `export const x = 1; // ${"lorem ipsum dolor sit amet ".repeat(10)}`;

async function history(n: number) {
  const log = await SessionLog.open({
    sessionId: "b",
    store: memoryStore(),
    clock: systemClock,
    ids: createIds(),
    checkpoints: false,
  });
  log.append({ type: "user_message", text: "read the files" });
  for (let i = 0; i < n; i++) step(log, i);
  return log;
}

function step(log: import("../../index.ts").SessionLog, i: number) {
  log.append({
    type: "assistant_message",
    turnId: "t",
    attemptId: `a${i}`,
    content: [
      { type: "tool-call", id: `c${i}`, name: "read_file", arguments: `{"path":"f${i}.ts"}` },
    ],
    finishReason: "tool_calls",
  });
  log.append({
    type: "call_result",
    callId: `c${i}`,
    name: "read_file",
    outcome: "completed",
    result: { ok: true, content: result },
  });
}

/** µs per step of the budget alone over `k` steps after `n` of history. */
async function incremental(n: number, k: number, count: (t: string) => number): Promise<number> {
  const log = await history(n);
  const budget = new ContextBudget({ source: log, count, window: 1e9, reserve: 0 });
  budget.measure(instructions, tools, "m"); // the one full count after opening
  let spent = 0;
  for (let i = 0; i < k; i++) {
    step(log, n + i);
    const t0 = performance.now();
    const u = budget.measure(instructions, tools, "m");
    budget.measured({ inputTokens: u.used, outputTokens: 10 }, "m");
    spent += performance.now() - t0;
  }
  return (spent * 1000) / k;
}

/** µs per step of estimating the whole request every step (no incremental state). */
async function recount(n: number, k: number, count: (t: string) => number): Promise<number> {
  const log = await history(n);
  let spent = 0;
  let sink = 0;
  for (let i = 0; i < k; i++) {
    step(log, n + i);
    const t0 = performance.now();
    const messages: readonly Msg[] = log.history();
    sink += keel.requestTokens({ instructions, messages, tools }, count);
    spent += performance.now() - t0;
  }
  if (sink < 0) console.log(sink);
  return (spent * 1000) / k;
}

const o200k = keel.openaiTokenCounter("gpt-4o")!;
o200k("warm up the table");
const rows: string[] = [];
for (const n of [10, 1000, 10_000]) {
  const k = n >= 10_000 ? 1000 : 2000;
  const [a, b, c, d] = [
    await incremental(n, k, estimateTextTokens),
    await recount(n, k, estimateTextTokens),
    await incremental(n, k, o200k),
    await recount(n, 20, o200k),
  ];
  rows.push(`| ${n} | ${a.toFixed(2)} | ${b.toFixed(1)} | ${c.toFixed(2)} | ${d.toFixed(0)} |`);
}
console.log("µs per step of budget tracking (dist/), one tool call a step");
console.log(
  "| N | incremental, chars | full recount, chars | incremental, o200k | full recount, o200k |",
);
console.log("|--:|--:|--:|--:|--:|");
for (const r of rows) console.log(r);
