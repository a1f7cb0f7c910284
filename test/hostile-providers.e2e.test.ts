// Providers as a hostile network would act (issue 27: findings 10, 11 and the SSE line bound):
// streams of empty chunks, streams that never end, event types a package does not know. Each
// runs the real SDK or provider package against a loopback server speaking the wire format.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { userText } from "../contracts/messages.ts";
import type { Model, ModelEvent, ModelRequest } from "../contracts/model.ts";
import { ModelError } from "../contracts/model.ts";
import { wholeLines } from "../providers/openai-fetch.ts";
import { openaiModel } from "../providers/openai-model.ts";
import { messageStart } from "./support/anthropic-wire.ts";
import {
  chunk,
  type FakeOpenAIServer,
  type FakeStep,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";
import { anthropicWire, geminiWire, openaiResponsesWire } from "./support/provider-wires.ts";

let server: FakeOpenAIServer;
beforeEach(async () => {
  server = await startFakeOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

const request = (): ModelRequest => ({
  messages: [userText("hi")],
  tools: [],
  signal: new AbortController().signal,
  attemptId: "att_1",
});

async function collect(m: Model) {
  const events: ModelEvent[] = [];
  try {
    for await (const e of m.stream(request())) events.push(e);
    return { events, error: undefined };
  } catch (error) {
    return { events, error: error as ModelError };
  }
}

/** `steps` sent one every `everyMs`, for `count` times (a gate per step). */
function paced(step: () => FakeStep, count: number, everyMs: number): FakeStep[] {
  const out: FakeStep[] = [];
  for (let i = 1; i <= count; i++) {
    out.push({ type: "gate", until: new Promise((r) => setTimeout(r, i * everyMs)) });
    out.push(step());
  }
  return out;
}

const anthropicEvent = (event: string, data: Record<string, unknown>): FakeStep => ({
  type: "sse",
  event,
  data: { type: event, ...data },
});

describe("a stream of empty chunks times out; a request has an overall deadline", () => {
  it("openaiModel: empty content chunks every 50 ms for 3 s end with idle_timeout at 300 ms (each chunk re-armed the timer, so it never timed out)", async () => {
    const m = openaiModel({
      contextWindow: 8192,
      model: "fake-model",
      baseURL: server.baseURL,
      idleTimeoutMs: 300,
      firstChunkTimeoutMs: 300,
    });
    server.enqueue([
      { type: "head" },
      ...paced(() => ({ type: "sse", data: chunk({ content: "" }) }), 60, 50),
      { type: "end" },
    ]);
    const started = performance.now();
    const { error } = await collect(m);
    expect(error).toBeInstanceOf(ModelError);
    expect(error?.kind).toMatch(/first_chunk_timeout|idle_timeout/);
    expect(performance.now() - started).toBeLessThan(2500);
  });

  it("openaiModel: requestTimeoutMs bounds a stream that keeps sending text (it ran as long as the server did)", async () => {
    const m = openaiModel({
      contextWindow: 8192,
      model: "fake-model",
      baseURL: server.baseURL,
      requestTimeoutMs: 400,
    });
    server.enqueue([
      { type: "head" },
      ...paced(() => ({ type: "sse", data: chunk({ content: "x" }) }), 60, 50),
      { type: "end" },
    ]);
    const { events, error } = await collect(m);
    expect(error?.kind).toBe("request_timeout");
    expect(error?.message).toMatch(/400 ms/);
    expect(events.length).toBeGreaterThan(0);
  });

  it("@ai-sdk/anthropic: empty text deltas every 50 ms end with a timeout at 300 ms", async () => {
    const m = anthropicWire.model(server.baseURL, { idleTimeoutMs: 300, firstChunkTimeoutMs: 300 });
    server.enqueue([
      messageStart(),
      anthropicEvent("content_block_start", {
        index: 0,
        content_block: { type: "text", text: "" },
      }),
      ...paced(
        () =>
          anthropicEvent("content_block_delta", {
            index: 0,
            delta: { type: "text_delta", text: "" },
          }),
        60,
        50,
      ),
      { type: "end" },
    ]);
    const started = performance.now();
    const { error } = await collect(m);
    expect(error?.kind).toMatch(/first_chunk_timeout|idle_timeout/);
    expect(performance.now() - started).toBeLessThan(2500);
  });
});

describe("an event type the provider package does not know is skipped, not fatal", () => {
  it("@ai-sdk/anthropic: an unknown SSE event mid-message is skipped and the answer completes (the turn failed: Anthropic says new event types must be ignored)", async () => {
    const skipped: unknown[] = [];
    const m = anthropicWire.model(server.baseURL, { onSkippedPart: (e) => skipped.push(e) });
    server.enqueue([
      messageStart(),
      anthropicEvent("brand_new_event", { detail: { anything: 1 } }),
      anthropicEvent("content_block_start", {
        index: 0,
        content_block: { type: "text", text: "" },
      }),
      anthropicEvent("content_block_delta", {
        index: 0,
        delta: { type: "text_delta", text: "still here" },
      }),
      anthropicEvent("content_block_stop", { index: 0 }),
      anthropicEvent("message_delta", {
        delta: { stop_reason: "end_turn", stop_sequence: null },
        usage: { output_tokens: 3 },
      }),
      anthropicEvent("message_stop", {}),
      { type: "end" },
    ]);
    const { events, error } = await collect(m);
    expect(error).toBeUndefined();
    expect(
      events
        .filter((e) => e.type === "text.delta")
        .map((e) => (e as { text: string }).text)
        .join(""),
    ).toBe("still here");
    expect(events.at(-1)).toEqual({ type: "finish", reason: "stop" });
    expect(skipped).toHaveLength(1);
  });

  it("by default each kind of skipped part is one warning of one line, once (issue 41: every part printed a multi-line warning)", async () => {
    const warnings: { message: string; code?: string }[] = [];
    const onWarning = (w: Error & { code?: string }) =>
      warnings.push({ message: w.message, code: w.code });
    process.on("warning", onWarning);
    try {
      const m = anthropicWire.model(server.baseURL);
      const reply = (events: string[]) => [
        messageStart(),
        ...events.map((name) => anthropicEvent(name, { detail: { anything: 1 } })),
        anthropicEvent("content_block_start", {
          index: 0,
          content_block: { type: "text", text: "" },
        }),
        anthropicEvent("content_block_delta", {
          index: 0,
          delta: { type: "text_delta", text: "ok" },
        }),
        anthropicEvent("content_block_stop", { index: 0 }),
        anthropicEvent("message_delta", {
          delta: { stop_reason: "end_turn", stop_sequence: null },
          usage: { output_tokens: 1 },
        }),
        anthropicEvent("message_stop", {}),
        { type: "end" as const },
      ];
      server.enqueue(reply(["brand_new_event", "brand_new_event", "other_new_event"]));
      expect((await collect(m)).error).toBeUndefined();
      server.enqueue(reply(["brand_new_event"]));
      expect((await collect(m)).error).toBeUndefined();
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
    } finally {
      process.off("warning", onWarning);
    }
    const skipped = warnings.filter((w) => w.code === "KEEL_SKIPPED_PART");
    expect(skipped.map((w) => w.message.match(/of type "([^"]+)"/)?.[1])).toEqual([
      "brand_new_event",
      "other_new_event",
    ]);
    for (const w of skipped) expect(w.message).not.toContain("\n");
  });

  it("@ai-sdk/openai (Responses): an unknown event type is skipped and the answer completes", async () => {
    const m = openaiResponsesWire.model(server.baseURL, { onSkippedPart: () => {} });
    const reply = openaiResponsesWire.text("fine");
    const at = reply.findIndex((s) => s.type === "sse");
    reply.splice(at + 1, 0, {
      type: "sse",
      event: "response.brand_new_event",
      data: { type: "response.brand_new_event", sequence_number: 99 },
    });
    server.enqueue(reply);
    const { events, error } = await collect(m);
    expect(error).toBeUndefined();
    expect(events.at(-1)).toEqual({ type: "finish", reason: "stop" });
  });

  it("@ai-sdk/google: a chunk of an unknown shape is skipped and the answer completes", async () => {
    const m = geminiWire.model(server.baseURL, { onSkippedPart: () => {} });
    const reply = geminiWire.text("fine");
    reply.unshift({ type: "sse", data: { brandNewTopLevel: true, candidates: "not a list" } });
    server.enqueue(reply);
    const { events, error } = await collect(m);
    expect(error).toBeUndefined();
    expect(events.at(-1)).toEqual({ type: "finish", reason: "stop" });
  });

  it("openaiModel: an unknown named SSE event and unknown chunk fields are ignored", async () => {
    const m = openaiModel({ contextWindow: 8192, model: "fake-model", baseURL: server.baseURL });
    const reply = streamReply({ text: ["ok"] });
    reply.splice(1, 0, { type: "raw", text: 'event: brand_new_event\ndata: {"x":1}\n\n' });
    server.enqueue(reply);
    const { events, error } = await collect(m);
    expect(error).toBeUndefined();
    expect(events.at(-1)).toEqual({ type: "finish", reason: "stop" });
  });
});

describe("the SSE line bound holds for every line", () => {
  it("a line of the limit + 130 bytes whose newline comes in its last chunk fails the stream (it was accepted)", async () => {
    // Held bytes under the limit, then the rest of the line and its newline in one chunk.
    const body = new Blob([`data: ${"y".repeat(1000)}`, `${"y".repeat(148)}\n\n`]).stream();
    const reader = wholeLines(body, 1024).getReader();
    const failure = await reader.read().then(
      () => reader.read(),
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(ModelError);
    expect((failure as ModelError).message).toContain("SSE line longer than 1024 bytes");
  });
});
