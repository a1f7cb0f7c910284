import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { AssistantPart } from "../contracts/messages.ts";
import type { ToolFailure } from "../contracts/tool-result.ts";
import { openaiModel } from "../providers/openai-model.ts";
import type { ReasoningReplay } from "../providers/openai-request.ts";
import type { LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";
import {
  chunk,
  type FakeOpenAIServer,
  type FakeReply,
  type FakeStep,
  startFakeOpenAIServer,
  streamReply,
  usageChunk,
} from "./support/fake-openai-server.ts";

/**
 * Streams as real OpenAI-compatible providers send them (recorded shapes and documented
 * quirks), through createAgent + openaiModel + the real `openai` SDK over real HTTP to the
 * loopback server; the assertions read what the server received next and what the log kept.
 */

let server: FakeOpenAIServer;
beforeEach(async () => {
  server = await startFakeOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

const sse = (data: unknown): FakeStep => ({ type: "sse", data });
/** A reply of raw deltas (choice 0), then a finish chunk, usage and [DONE]. */
function deltas(list: Record<string, unknown>[], finish = "tool_calls"): FakeReply {
  return [
    sse(chunk({ role: "assistant", content: "" })),
    ...list.map((d) => sse(chunk(d))),
    sse(chunk({}, finish)),
    sse(usageChunk(5, 5)),
    { type: "raw", text: "data: [DONE]\n\n" },
    { type: "end" },
  ];
}
const tc = (call: Record<string, unknown>) => ({ tool_calls: [{ type: "function", ...call }] });

function weatherAgent(options: { reasoningReplay?: ReasoningReplay } = {}) {
  const received: unknown[] = [];
  const weather = defineTool({
    name: "weather",
    description: "The weather in a city.",
    parameters: z.object({ location: z.string() }),
    traits: { concurrencySafe: true, readOnly: true },
    execute: async ({ location }) => {
      received.push(location);
      return `sunny in ${location}`;
    },
  });
  const model = openaiModel({
    contextWindow: 32_768,
    model: "fake-model",
    baseURL: server.baseURL,
    ...options,
  });
  const agent = createAgent({ model, tools: [weather] });
  return { agent, received };
}

type ChatCall = { id: string; function: { name: string; arguments: unknown } };
type ChatMsg = { role: string; content?: unknown; tool_calls?: ChatCall[]; [k: string]: unknown };
const sent = (i: number) => (server.requests[i].body.messages ?? []) as ChatMsg[];
const assistantsSent = (i: number) => sent(i).filter((m) => m.role === "assistant");
const committed = (entries: readonly LogEntry[]): AssistantPart[][] =>
  entries
    .filter(
      (e): e is Extract<LogEntry, { type: "assistant_message" }> => e.type === "assistant_message",
    )
    .map((e) => e.content);

describe("merged parallel calls", () => {
  it("three calls at index 0 with distinct ids (a Gemini proxy) are three calls, run in order, ids kept", async () => {
    server.enqueue(
      deltas([
        tc({ index: 0, id: "call_A", function: { name: "weather", arguments: '{"location":' } }),
        tc({ index: 0, function: { arguments: '"Oslo"}' } }),
        tc({
          index: 0,
          id: "call_B",
          function: { name: "weather", arguments: '{"location":"Bergen"}' },
        }),
        tc({
          index: 0,
          id: "call_C",
          function: { name: "weather", arguments: '{"location":"Paris"}' },
        }),
      ]),
      streamReply({ text: "done" }),
    );
    const { agent, received } = weatherAgent();
    const session = await agent.openSession("gemini");
    expect(await session.prompt("weather?")).toMatchObject({ status: "completed" });
    expect([...received].sort()).toEqual(["Bergen", "Oslo", "Paris"]);
    const [assistant] = assistantsSent(1);
    expect(assistant.tool_calls?.map((c) => [c.id, c.function.arguments])).toEqual([
      ["call_A", '{"location":"Oslo"}'],
      ["call_B", '{"location":"Bergen"}'],
      ["call_C", '{"location":"Paris"}'],
    ]);
    const results = sent(1).filter((m) => m.role === "tool");
    expect(results.map((m) => [m.tool_call_id, m.content])).toEqual([
      ["call_A", "sunny in Oslo"],
      ["call_B", "sunny in Bergen"],
      ["call_C", "sunny in Paris"],
    ]);
    await agent.close();
  });

  it('three whole calls with index null and id "" are three calls with generated, distinct ids', async () => {
    server.enqueue(
      deltas(
        ["Oslo", "Bergen", "Paris"].map((city) =>
          tc({
            index: null,
            id: "",
            function: { name: "weather", arguments: JSON.stringify({ location: city }) },
          }),
        ),
      ),
      streamReply({ text: "done" }),
    );
    const { agent, received } = weatherAgent();
    const session = await agent.openSession("nullindex");
    expect(await session.prompt("weather?")).toMatchObject({ status: "completed" });
    expect([...received].sort()).toEqual(["Bergen", "Oslo", "Paris"]);
    const calls = assistantsSent(1)[0].tool_calls ?? [];
    expect(calls.map((c) => c.function.arguments)).toEqual([
      '{"location":"Oslo"}',
      '{"location":"Bergen"}',
      '{"location":"Paris"}',
    ]);
    expect(new Set(calls.map((c) => c.id)).size).toBe(3);
    await agent.close();
  });

  it("a call streamed in pieces at index 0 with its id only on the first piece stays one call", async () => {
    server.enqueue(
      deltas([
        tc({ index: 0, id: "call_1", function: { name: "weather", arguments: "" } }),
        tc({ index: 0, function: { arguments: '{"loca' } }),
        tc({ index: 0, id: "call_1", function: { arguments: 'tion":"Oslo"}' } }),
      ]),
      streamReply({ text: "done" }),
    );
    const { agent, received } = weatherAgent();
    const session = await agent.openSession("pieces");
    await session.prompt("weather?");
    expect(received).toEqual(["Oslo"]);
    await agent.close();
  });
});

describe("reasoning_content (DeepSeek, Kimi, Qwen thinking modes)", () => {
  function thinkingReplies() {
    server.enqueue(
      deltas([
        { reasoning_content: "The user wants " },
        { reasoning_content: "the weather." },
        tc({
          index: 0,
          id: "call_1",
          function: { name: "weather", arguments: '{"location":"Oslo"}' },
        }),
      ]),
      deltas([{ reasoning_content: "Report it." }, { content: "Sunny." }], "stop"),
      streamReply({ text: "bye" }),
    );
  }

  it("is kept in the log and sent back on the assistant message with tool calls in the next request", async () => {
    thinkingReplies();
    const { agent } = weatherAgent();
    const session = await agent.openSession("think");
    await session.prompt("weather?");
    const [withCalls] = assistantsSent(1);
    expect(withCalls.reasoning_content).toBe("The user wants the weather.");
    expect(withCalls.tool_calls?.[0].id).toBe("call_1");
    const [first, second] = committed(session.entries());
    expect(first[0]).toMatchObject({ type: "reasoning", text: "The user wants the weather." });
    expect(second[0]).toMatchObject({ type: "reasoning", text: "Report it." });
    // By default only messages with tool calls carry it back (DeepSeek ignores it elsewhere).
    await session.prompt("thanks");
    const [callsAgain, answer] = assistantsSent(2);
    expect(callsAgain.reasoning_content).toBe("The user wants the weather.");
    expect(answer.content).toBe("Sunny.");
    expect(answer).not.toHaveProperty("reasoning_content");
    await agent.close();
  });

  it('reasoningReplay "all" sends it on every assistant message, "off" on none', async () => {
    thinkingReplies();
    const all = weatherAgent({ reasoningReplay: "all" });
    const s1 = await all.agent.openSession("all");
    await s1.prompt("weather?");
    await s1.prompt("thanks");
    expect(assistantsSent(2).map((m) => m.reasoning_content)).toEqual([
      "The user wants the weather.",
      "Report it.",
    ]);
    await all.agent.close();

    thinkingReplies();
    const off = weatherAgent({ reasoningReplay: "off" });
    const s2 = await off.agent.openSession("off");
    await s2.prompt("weather?");
    await s2.prompt("thanks");
    for (const i of [4, 5])
      for (const m of assistantsSent(i)) expect(m).not.toHaveProperty("reasoning_content");
    await off.agent.close();
  });

  it("an unknown reasoningReplay is refused with the accepted values", () => {
    expect(() =>
      openaiModel({
        model: "m",
        contextWindow: 1000,
        baseURL: server.baseURL,
        reasoningReplay: "yes" as ReasoningReplay,
      }),
    ).toThrow(/reasoningReplay must be one of "tool-calls", "all", "off", got "yes"/);
  });
});

describe("content as an array of parts (Mistral)", () => {
  it("text parts become text and thinking parts reasoning, never [object Object]", async () => {
    server.enqueue(
      deltas(
        [
          { content: [{ type: "thinking", thinking: [{ type: "text", text: "Two plus " }] }] },
          { content: [{ type: "thinking", thinking: [{ type: "text", text: "two." }] }] },
          { content: [{ type: "text", text: "The answer" }] },
          { content: " is 4." },
        ],
        "stop",
      ),
    );
    const { agent } = weatherAgent();
    const session = await agent.openSession("mistral");
    const out = await session.prompt("2+2?");
    expect(out).toMatchObject({ status: "completed", text: "The answer is 4." });
    expect(committed(session.entries())[0]).toEqual([
      { type: "reasoning", text: "Two plus two." },
      { type: "text", text: "The answer is 4." },
    ]);
    await agent.close();
  });

  it("a non-streamed JSON reply with array content and reasoning_content reads the same way", async () => {
    server.enqueue([
      {
        type: "json",
        status: 200,
        body: {
          id: "x",
          object: "chat.completion",
          created: 1,
          model: "fake-model",
          choices: [
            {
              index: 0,
              message: {
                role: "assistant",
                reasoning_content: "Easy.",
                content: [{ type: "text", text: "Four." }],
              },
              finish_reason: "stop",
            },
          ],
        },
      },
    ]);
    const { agent } = weatherAgent();
    const session = await agent.openSession("json");
    expect(await session.prompt("2+2?")).toMatchObject({ status: "completed", text: "Four." });
    expect(committed(session.entries())[0][0]).toMatchObject({ type: "reasoning", text: "Easy." });
    await agent.close();
  });
});

describe("arguments strict providers refuse to see again", () => {
  it("a call whose arguments never parsed is replayed as {}, the log keeps the raw text", async () => {
    const raw = "{'location': 'Oslo'}";
    const spaced = '{ "location" : "Bergen" }';
    const doubled = JSON.stringify('{"location":"Paris"}');
    server.enqueue(
      deltas([
        tc({ index: 0, id: "call_bad", function: { name: "weather", arguments: raw } }),
        tc({ index: 1, id: "call_ok", function: { name: "weather", arguments: spaced } }),
        tc({ index: 2, id: "call_dbl", function: { name: "weather", arguments: doubled } }),
      ]),
      streamReply({ text: "Oslo failed" }),
      streamReply({ text: "again" }),
    );
    const { agent } = weatherAgent();
    const session = await agent.openSession("strict");
    await session.prompt("weather?");
    await session.prompt("and now?");
    for (const i of [1, 2]) {
      const args = (assistantsSent(i)[0].tool_calls ?? []).map((c) => c.function.arguments);
      // Valid JSON objects are sent byte for byte; the unparsable one as {}; the
      // double-encoded one as the object it held.
      expect(args).toEqual(["{}", spaced, '{"location":"Paris"}']);
      for (const a of args) expect(JSON.parse(a as string)).toBeTypeOf("object");
    }
    const calls = committed(session.entries())[0].filter((p) => p.type === "tool-call");
    expect(calls.map((c) => c.arguments)).toEqual([raw, spaced, doubled]);
    const bad = session
      .entries()
      .find((e) => e.type === "call_result" && e.callId === "call_bad") as Extract<
      LogEntry,
      { type: "call_result" }
    >;
    expect((bad.result as ToolFailure).code).toBe("INVALID_ARGS");
    expect((bad.result as ToolFailure).message).toContain(raw);
    await agent.close();
  });

  it("arguments sent as a JSON object are that object: the tool runs, the log has it stringified once", async () => {
    server.enqueue(
      deltas([
        tc({
          index: 0,
          id: "call_obj",
          function: { name: "weather", arguments: { location: "Oslo" } },
        }),
      ]),
      streamReply({ text: "done" }),
    );
    const { agent, received } = weatherAgent();
    const session = await agent.openSession("object");
    expect(await session.prompt("weather?")).toMatchObject({ status: "completed" });
    expect(received).toEqual(["Oslo"]);
    const call = committed(session.entries())[0].find((p) => p.type === "tool-call");
    expect(call).toMatchObject({ id: "call_obj", arguments: '{"location":"Oslo"}' });
    expect(assistantsSent(1)[0].tool_calls?.[0].function.arguments).toBe('{"location":"Oslo"}');
    await agent.close();
  });
});
