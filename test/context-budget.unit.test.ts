import { describe, expect, it } from "vitest";
import { createIds } from "../actors/ids.ts";
import type { ChatMessage } from "../contracts/chat.ts";
import { systemClock } from "../contracts/clock.ts";
import { type Message, userText } from "../contracts/messages.ts";
import type { ModelToolSpec } from "../contracts/model.ts";
import {
  estimateTextTokens,
  IMAGE_TOKENS,
  messageTokens,
  requestTokens,
} from "../contracts/tokens.ts";
import { openaiModel } from "../providers/openai-model.ts";
import { knownModelLimits, openaiTokenCounter } from "../providers/openai-tokens.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { estimateTokens } from "../session/compaction-cuts.ts";
import { validateSummary } from "../session/compaction-summary.ts";
import { ContextBudget } from "../session/context-budget.ts";
import { SessionLog } from "../session/log.ts";
import { memoryStore } from "../session/stores/memory-store.ts";

const tools: ModelToolSpec[] = [
  { type: "function", function: { name: "t", description: "d", parameters: {} } },
];

/** A log with one step: a user message, an assistant call and its result. */
async function logWithStep() {
  const log = await SessionLog.open({
    sessionId: "b",
    store: memoryStore(),
    clock: systemClock,
    ids: createIds(),
  });
  log.append({ type: "user_message", text: "x".repeat(400) });
  log.append({
    type: "assistant_message",
    turnId: "t",
    attemptId: "a1",
    content: [{ type: "tool-call", id: "c1", name: "t", arguments: "{}" }],
    finishReason: "tool_calls",
  });
  return log;
}

/**
 * The test's own whole-request count with ⌈chars/4⌉ (framing: 3 a message, call and request),
 * over the OpenAI Chat rendering of the history (what openaiModel sends).
 */
function whole(instructions: string, messages: readonly ChatMessage[]): number {
  const c = (s: string) => Math.ceil(s.length / 4);
  let t = 3 + 3 + c(instructions) + c(JSON.stringify(tools));
  for (const m of messages) {
    t += 3 + (typeof m.content === "string" ? c(m.content) : 0); // text only here
    if (m.role === "assistant")
      for (const k of m.tool_calls ?? []) t += 3 + c(k.function.name) + c(k.function.arguments);
  }
  return t;
}

describe("context budget", () => {
  it("with nothing trusted it estimates the whole request; after provider usage it is that usage plus what was appended since", async () => {
    const log = await logWithStep();
    const budget = new ContextBudget({
      source: log,
      count: estimateTextTokens,
      window: 1000,
      reserve: 100,
    });
    const first = budget.measure("be brief", tools, "m");
    expect(first).toEqual({
      used: whole("be brief", log.messages()),
      window: 1000,
      reserve: 100,
      trusted: false,
    });
    budget.measured({ inputTokens: 500, outputTokens: 20 }, "m");
    // The result fills its slot in place (its text replaces the "no result" patch).
    log.append({
      type: "call_result",
      callId: "c1",
      name: "t",
      outcome: "completed",
      result: { ok: true, content: "y".repeat(800) },
    });
    log.append({ type: "user_message", text: "z".repeat(40) });
    const after = budget.measure("be brief", tools, "m");
    const grown = whole("be brief", log.messages()) - first.used;
    expect(after).toMatchObject({ used: 520 + grown, trusted: true });
  });

  it("all-zero usage is not a measurement; usage under another model, new instructions or after a rebuild is not trusted", async () => {
    const log = await logWithStep();
    const budget = new ContextBudget({
      source: log,
      count: estimateTextTokens,
      window: 1000,
      reserve: 0,
    });
    budget.measure("i", tools, "m");
    budget.measured({ inputTokens: 0, outputTokens: 0 }, "m");
    expect(budget.measure("i", tools, "m").trusted).toBe(false);
    budget.measured({ inputTokens: 300, outputTokens: 10 }, "m");
    expect(budget.measure("i", tools, "m")).toMatchObject({ used: 310, trusted: true });
    expect(budget.measure("i", tools, "other").trusted).toBe(false);
    expect(budget.measure("i", tools, "m").trusted).toBe(true);
    expect(budget.measure("changed", tools, "m").trusted).toBe(false);
    budget.measured({ inputTokens: 300, outputTokens: 10 }, "m");
    expect(budget.measure("changed", tools, "m").trusted).toBe(true);
    // A context edit that omits a message rebuilds the view: estimated whole again.
    log.append({ type: "context_edit", targetId: log.messageSources()[0], replacement: null });
    const rebuilt = budget.measure("changed", tools, "m");
    expect(rebuilt).toMatchObject({ used: whole("changed", log.messages()), trusted: false });
  });

  it("measures only what changed: a source that lists no change is not re-read", async () => {
    const log = await logWithStep();
    let reads = 0;
    const source = {
      history: () => log.history(),
      takeChanges: () => log.takeChanges(),
    };
    const counting = (t: string) => {
      reads++;
      return estimateTextTokens(t);
    };
    const budget = new ContextBudget({ source, count: counting, window: 1000, reserve: 0 });
    budget.measure(undefined, [], "m");
    const once = reads;
    budget.measure(undefined, [], "m");
    expect(reads).toBe(once); // nothing appended: nothing counted
    log.append({ type: "user_message", text: "new" });
    budget.measure(undefined, [], "m");
    expect(reads).toBe(once + 1); // one new message: one count
  });
});

describe("counting the neutral messages", () => {
  it("counts what the adapters send: joined text, reasoning, calls, results, a fixed cost per image", () => {
    const c = (t: string) => t.length; // one token a character, to read the sums
    expect(
      messageTokens(
        {
          role: "assistant",
          content: [
            {
              type: "reasoning",
              text: "think",
              providerMetadata: { anthropic: { signature: "s" } },
            },
            { type: "text", text: "ab" },
            { type: "text", text: "cd" },
            { type: "tool-call", id: "c1", name: "read", arguments: '{"p":1}' },
          ],
        },
        c,
      ),
    ).toBe(3 + 5 + 4 + (3 + 4 + 7)); // provider metadata is not counted
    expect(
      messageTokens(
        {
          role: "user",
          content: [
            { type: "text", text: "what is this?" },
            { type: "image", base64: "AAAA", mediaType: "image/png" },
          ],
        },
        c,
      ),
    ).toBe(3 + 13 + IMAGE_TOKENS);
    expect(
      messageTokens(
        {
          role: "tool",
          content: [{ type: "tool-result", callId: "c1", name: "read", content: "42" }],
        },
        c,
      ),
    ).toBe(3 + 2);
  });

  it("a text-only history costs the same as its OpenAI Chat rendering", async () => {
    const log = await logWithStep();
    log.append({
      type: "call_result",
      callId: "c1",
      name: "t",
      outcome: "completed",
      result: { ok: true, content: "y".repeat(81) },
    });
    const neutral = requestTokens(
      { instructions: "be brief", messages: log.history(), tools },
      estimateTextTokens,
    );
    expect(neutral).toBe(whole("be brief", log.messages()));
  });
});

describe("model windows and tokenizers", () => {
  it("openaiModel knows common model names, takes explicit limits, and refuses an unknown model without them", () => {
    expect(knownModelLimits("gpt-4o-mini")).toEqual({
      contextWindow: 128_000,
      maxOutputTokens: 16_384,
    });
    expect(knownModelLimits("gpt-4.1-2025-04-14")?.contextWindow).toBe(1_047_576);
    const known = openaiModel({ model: "gpt-4o", apiKey: "k" });
    expect([known.contextWindow, known.maxOutputTokens]).toEqual([128_000, 16_384]);
    const given = openaiModel({ model: "qwen2.5", apiKey: "k", contextWindow: 32_768 });
    expect([given.contextWindow, given.maxOutputTokens]).toEqual([32_768, 4096]);
    expect(() => openaiModel({ model: "qwen2.5", apiKey: "k" })).toThrow(
      /context window of model "qwen2.5" is not known; pass it in tokens.*contextWindow/,
    );
    expect(() =>
      openaiModel({ model: "qwen2.5", apiKey: "k", contextWindow: 1000, maxOutputTokens: 1000 }),
    ).toThrow(/maxOutputTokens \(1000\) must be smaller than contextWindow/);
  });

  it("OpenAI families count with their own tokenizer (o200k for gpt-4o, cl100k for gpt-4); other models have none", () => {
    const o200k = openaiTokenCounter("gpt-4o")!;
    const cl100k = openaiTokenCounter("gpt-4")!;
    // Known encodings of a fixed text (tiktoken's published counts for these strings).
    expect(o200k("hello world")).toBe(2);
    expect(cl100k("hello world")).toBe(2);
    expect(o200k("<|endoftext|>")).toBeGreaterThan(1); // special-token text is plain text
    expect(openaiTokenCounter("qwen2.5")).toBeUndefined();
    expect(openaiModel({ model: "gpt-4o", apiKey: "k" }).countTokens).toBeTypeOf("function");
  });

  it("the scripted model refuses a request over its window the way a provider does (HTTP 400 context_length_exceeded)", async () => {
    const model = scriptedModel([{ text: "never" }], { contextWindow: 50 });
    const stream = model.stream({
      messages: [userText("x".repeat(400))],
      tools: [],
      signal: new AbortController().signal,
      attemptId: "a",
    });
    await expect(stream[Symbol.asyncIterator]().next()).rejects.toMatchObject({
      status: 400,
      code: "context_length_exceeded",
    });
    expect(model.requests).toHaveLength(1);
  });
});

describe("summary candidates", () => {
  it("a summary whose response ended by length is rejected even when it is short", () => {
    const input: Message[] = [userText("a long history ".repeat(50))];
    expect(validateSummary("short", input, estimateTokens)).toBe(null);
    expect(validateSummary("short", input, estimateTokens, "length")).toMatch(/ended by length/);
  });
});
