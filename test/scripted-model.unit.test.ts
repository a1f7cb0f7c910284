import { describe, expect, it } from "vitest";
import type { Clock } from "../contracts/clock.ts";
import { type Message, userText } from "../contracts/messages.ts";
import { ModelError, type ModelEvent, type ModelRequest } from "../contracts/model.ts";
import { type Script, scriptedModel } from "../providers/scripted-model.ts";

const request = (over: Partial<ModelRequest> = {}): ModelRequest => ({
  messages: [userText("hi")],
  tools: [],
  signal: new AbortController().signal,
  attemptId: "att_1",
  ...over,
});
async function run(model: ReturnType<typeof scriptedModel>, req = request()) {
  const events: ModelEvent[] = [];
  try {
    for await (const e of model.stream(req)) events.push(e);
    return { events, error: undefined };
  } catch (error) {
    return { events, error: error as ModelError };
  }
}
/** A clock that fails the test if anything schedules a timer. */
const noTimers: Clock = {
  now: () => 0,
  setTimeout: () => {
    throw new Error("a timer was scheduled");
  },
  clearTimeout: () => {},
};

describe("scripted model", () => {
  it("streams text, then each call as start/deltas/end with its index, then usage and finish", async () => {
    const model = scriptedModel(
      [
        {
          text: "ok",
          toolCalls: [
            { id: "c1", name: "read", arguments: '{"path":"a"}' },
            { name: "ls", arguments: "" },
          ],
          usage: { inputTokens: 3, outputTokens: 2 },
        },
      ],
      { clock: noTimers },
    );
    const { events, error } = await run(model);
    expect(error).toBeUndefined();
    expect(events).toEqual([
      { type: "text.delta", text: "ok" },
      { type: "call.start", index: 0, id: "c1", name: "read" },
      { type: "call.delta", index: 0, argumentsDelta: '{"path":"a"}' },
      { type: "call.end", index: 0 },
      { type: "call.start", index: 1, name: "ls" },
      { type: "call.end", index: 1 },
      { type: "usage", usage: { inputTokens: 3, outputTokens: 2 } },
      { type: "finish", reason: "tool_calls" },
    ]);
  });

  it("finishes with stop when there are no calls, with the given reason, or not at all for null", async () => {
    const model = scriptedModel([
      { text: "a" },
      { text: "b", finish: "length" },
      { text: "c", finish: null },
    ]);
    expect((await run(model)).events.at(-1)).toEqual({ type: "finish", reason: "stop" });
    expect((await run(model)).events.at(-1)).toEqual({ type: "finish", reason: "length" });
    expect((await run(model)).events).toEqual([{ type: "text.delta", text: "c" }]);
  });

  it("splits text and arguments into chunkSize pieces without breaking a surrogate pair", async () => {
    const model = scriptedModel([
      { text: "abcde", toolCalls: [{ id: "c", name: "f", arguments: '{"e":"😀"}' }], chunkSize: 2 },
    ]);
    const { events } = await run(model);
    const texts = events.flatMap((e) => (e.type === "text.delta" ? [e.text] : []));
    const args = events.flatMap((e) => (e.type === "call.delta" ? [e.argumentsDelta] : []));
    expect(texts).toEqual(["ab", "cd", "e"]);
    expect(args).toEqual(['{"', 'e"', ':"', "😀", '"}']);
  });

  it("sends malformed arguments verbatim", async () => {
    const model = scriptedModel([
      { toolCalls: [{ id: "c", name: "f", arguments: '{"a":1}{"a":2' }] },
    ]);
    const { events } = await run(model);
    expect(events).toContainEqual({
      type: "call.delta",
      index: 0,
      argumentsDelta: '{"a":1}{"a":2',
    });
  });

  it("emits the raw events of an events step verbatim", async () => {
    const raw: ModelEvent[] = [
      { type: "call.delta", index: 3, argumentsDelta: "{}", name: "f" },
      { type: "finish", reason: "tool_calls" },
    ];
    expect((await run(scriptedModel([{ events: raw }]))).events).toEqual(raw);
  });

  it("throws an error step as a ModelError with its status, headers, body and code before any chunk", async () => {
    const model = scriptedModel([
      {
        text: "never",
        error: {
          status: 429,
          headers: { "retry-after": "2" },
          body: { e: 1 },
          code: "rate_limit_exceeded",
        },
      },
      { error: {} },
      { error: { kind: "first_chunk_timeout", message: "slow" } },
    ]);
    const first = await run(model);
    expect(first.events).toEqual([]);
    expect(first.error).toBeInstanceOf(ModelError);
    expect(first.error).toMatchObject({
      kind: "http",
      status: 429,
      headers: { "retry-after": "2" },
      body: { e: 1 },
      code: "rate_limit_exceeded",
      message: "scripted HTTP 429 error",
    });
    expect((await run(model)).error).toMatchObject({ kind: "network" });
    expect((await run(model)).error).toMatchObject({
      kind: "first_chunk_timeout",
      message: "slow",
    });
  });

  it("cuts the stream with a stream_cut ModelError after cutAfter chunks", async () => {
    const model = scriptedModel([
      { text: "abcdef", chunkSize: 2, cutAfter: 2 },
      { text: "a", cutAfter: 0 },
      { text: "a", cutAfter: 99 },
    ]);
    const cut = await run(model);
    expect(cut.events).toEqual([
      { type: "text.delta", text: "ab" },
      { type: "text.delta", text: "cd" },
    ]);
    expect(cut.error).toMatchObject({
      kind: "stream_cut",
      message: expect.stringContaining("after 2 chunk"),
    });
    expect((await run(model)).events).toEqual([]);
    const late = await run(model);
    expect(late.events.map((e) => e.type)).toEqual(["text.delta", "finish"]);
    expect(late.error?.kind).toBe("stream_cut");
  });

  it("fails a request beyond the script with a protocol error naming the missing step", async () => {
    const model = scriptedModel([{ text: "one" }], { name: "demo" });
    await run(model);
    const { error } = await run(model);
    expect(error).toBeInstanceOf(ModelError);
    expect(error?.kind).toBe("protocol");
    expect(error?.message).toContain('scripted model "demo": no step 2');
    expect(error?.message).toContain("the script has 1 step(s)");
  });

  it("plays dynamic steps with the request and its index", async () => {
    const seen: [string, number][] = [];
    const script: Script = (req, index) => {
      seen.push([req.attemptId, index]);
      return index < 2 ? { text: `step ${index}` } : undefined;
    };
    const model = scriptedModel(script);
    expect((await run(model, request({ attemptId: "x" }))).events[0]).toEqual({
      type: "text.delta",
      text: "step 0",
    });
    await run(model, request({ attemptId: "y" }));
    expect((await run(model)).error?.kind).toBe("protocol");
    expect(seen).toEqual([
      ["x", 0],
      ["y", 1],
      ["att_1", 2],
    ]);
    const mixed = scriptedModel([{ text: "a" }, () => ({ text: "b" })]);
    await run(mixed);
    expect((await run(mixed)).events[0]).toEqual({ type: "text.delta", text: "b" });
  });

  it("turns a throwing or invalid dynamic step into a protocol error", async () => {
    const model = scriptedModel([
      () => {
        throw new Error("boom");
      },
      () => ({ chunkSize: 0 }),
    ]);
    expect((await run(model)).error?.message).toContain("step 1 function threw: Error: boom");
    expect((await run(model)).error?.message).toContain(
      "step 2 chunkSize must be a positive integer",
    );
  });

  it("rejects an invalid list step at creation with the step number and the fix", () => {
    expect(() => scriptedModel([{ text: "ok" }, { delayMs: -1 }])).toThrow(
      /step 2 delayMs must be a finite number ≥ 0/,
    );
    expect(() =>
      scriptedModel([{ toolCalls: [{ name: "f", arguments: { a: 1 } as unknown as string }] }]),
    ).toThrow(/toolCalls\[0\] needs a string name and a string arguments/);
    expect(() => scriptedModel([{ text: "a", events: [] }])).toThrow(/events replaces text/);
    expect(() => scriptedModel("nope" as unknown as Script)).toThrow(
      /array of steps or a function/,
    );
  });

  it("records every request with a shallow copy of its messages and its attemptId; reset starts over", async () => {
    const messages: Message[] = [userText("a")];
    const model = scriptedModel([{ text: "1" }, { text: "2" }]);
    await run(model, request({ messages, attemptId: "a1" }));
    messages.push(userText("b"));
    await run(model, request({ messages, attemptId: "a2" }));
    expect(model.requests.map((r) => [r.index, r.attemptId, r.messages.length])).toEqual([
      [0, "a1", 1],
      [1, "a2", 2],
    ]);
    expect(model.requests[0].history[0]).toBe(messages[0]);
    expect(model.requests[0].messages[0]).toEqual({ role: "user", content: "a" });
    model.reset();
    expect(model.requests).toEqual([]);
    expect((await run(model)).events[0]).toEqual({ type: "text.delta", text: "1" });
  });

  it("deep-copies messages with record: deep and keeps none with record: none", async () => {
    const messages: Message[] = [userText("a")];
    const deep = scriptedModel([{ text: "1" }], { record: "deep" });
    await run(deep, request({ messages }));
    expect(deep.requests[0].history).toEqual(messages);
    expect(deep.requests[0].history[0]).not.toBe(messages[0]);
    const none = scriptedModel([{ text: "1" }], { record: "none" });
    await run(none);
    expect(none.requests).toEqual([]);
  });

  it("plays a thousand steps without scheduling a timer when no delay is set", async () => {
    const model = scriptedModel(
      () => ({ text: "abc", toolCalls: [{ name: "f", arguments: "{}" }] }),
      {
        clock: noTimers,
        record: "none",
      },
    );
    for (let i = 0; i < 1000; i++) expect((await run(model)).error).toBeUndefined();
  });
});
