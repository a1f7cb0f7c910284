// The AI SDK's UI message stream on Keel's chat routes, read by the AI SDK itself (ai@6: its
// DefaultChatTransport, the transport useChat uses, and readUIMessageStream): the message it
// reconstructs holds what session.history() holds (text, reasoning, tool inputs and outputs);
// an approval request ends the response and the approval, sent as the SDK sends it, continues
// the same message; a resume mid-turn replays the message from its start, without a gap or a
// repeat; every chunk passes the SDK's own chunk schema.
import {
  DefaultChatTransport,
  readUIMessageStream,
  type UIMessage,
  type UIMessageChunk,
  uiMessageChunkSchema,
} from "ai";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type Agent,
  createAgent,
  createHttpHandler,
  defineTool,
  type HttpHandler,
  type Message,
  memoryStore,
  type ScriptStep,
  scriptedModel,
} from "../index.ts";

const TOKEN = "t0k3n-for-the-ui-stream-tests";
let agent: Agent;
let handler: HttpHandler;
afterEach(async () => {
  await handler?.close();
  await agent?.close();
});

const echo = defineTool({
  name: "lookup",
  description: "looks a word up",
  parameters: z.object({ word: z.string() }),
  traits: { risk: "low" },
  execute: ({ word }) => `${word}: a small boat`,
});
const remove = defineTool({
  name: "delete_file",
  description: "deletes a file",
  parameters: z.object({ path: z.string() }),
  traits: { risk: "high" },
  execute: ({ path }) => `deleted ${path}`,
});

function setup(script: ScriptStep[], tools = [echo, remove]) {
  agent = createAgent({
    model: scriptedModel(script),
    tools,
    store: memoryStore(),
    permissions: { ask: () => new Promise(() => {}) },
  });
  handler = createHttpHandler(agent, { token: TOKEN });
  // The handler is a fetch function: the AI SDK's transport calls it directly, no server between.
  const seen: UIMessageChunk[] = [];
  const reading: Promise<void>[] = [];
  const fetchKeel = async (input: RequestInfo | URL, init?: RequestInit) => {
    const response = await handler(new Request(input, init));
    if (!response.body || response.status !== 200) return response;
    const [mine, theirs] = response.body.tee();
    reading.push(record(mine, seen));
    return new Response(theirs, { status: response.status, headers: response.headers });
  };
  const transport = new DefaultChatTransport({
    api: "http://keel.test/chat",
    headers: { authorization: `Bearer ${TOKEN}` },
    fetch: fetchKeel as typeof fetch,
  });
  return { transport, seen, recorded: () => Promise.all(reading) };
}

/** Every chunk of a response, parsed, for the schema check. */
async function record(body: ReadableStream<Uint8Array>, into: UIMessageChunk[]) {
  const text = await new Response(body).text();
  for (const block of text.split("\n\n")) {
    const data = block.replace(/^data: /, "");
    if (data && data !== "[DONE]" && !data.startsWith(":")) into.push(JSON.parse(data));
  }
}

async function lastOf(
  stream: ReadableStream<UIMessageChunk>,
  message?: UIMessage,
): Promise<UIMessage> {
  let last: UIMessage | undefined;
  for await (const m of readUIMessageStream({ stream, ...(message ? { message } : {}) })) last = m;
  return last!;
}

const user = (text: string): UIMessage => ({
  id: `u_${text}`,
  role: "user",
  parts: [{ type: "text", text }],
});
const send = (transport: DefaultChatTransport<UIMessage>, chatId: string, messages: UIMessage[]) =>
  transport.sendMessages({
    chatId,
    messages,
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
  });

/** What the history holds after the user's last message, written from the neutral messages alone. */
function expectedFrom(history: readonly Message[]) {
  const from = history.findLastIndex((m) => m.role === "user") + 1;
  const texts: string[] = [];
  const reasoning: string[] = [];
  const calls: { toolCallId: string; toolName: string; input: unknown; output?: string }[] = [];
  for (const m of history.slice(from)) {
    if (m.role === "assistant") {
      for (const p of m.content) {
        if (p.type === "text") texts.push(p.text);
        if (p.type === "reasoning") reasoning.push(p.text);
        if (p.type === "tool-call")
          calls.push({ toolCallId: p.id, toolName: p.name, input: JSON.parse(p.arguments) });
      }
    }
    if (m.role === "tool")
      calls.find((c) => c.toolCallId === m.content[0].callId)!.output = m.content[0].content;
  }
  return { texts, reasoning, calls };
}

function shownIn(message: UIMessage) {
  const parts = message.parts as Array<Record<string, unknown>>;
  return {
    texts: parts.filter((p) => p.type === "text").map((p) => p.text),
    reasoning: parts.filter((p) => p.type === "reasoning").map((p) => p.text),
    calls: parts
      .filter((p) => p.type === "dynamic-tool")
      .map((p) => ({
        toolCallId: p.toolCallId,
        toolName: p.toolName,
        input: p.input,
        output: p.output,
      })),
  };
}

const twoSteps: ScriptStep[] = [
  {
    events: [
      { type: "reasoning.delta", key: "r", text: "The user wants a word." },
      { type: "reasoning.end", key: "r" },
      { type: "text.delta", text: "Let me look " },
      { type: "text.delta", text: "that up." },
      { type: "call.start", index: 0, id: "call_1", name: "lookup" },
      { type: "call.delta", index: 0, argumentsDelta: '{"word":"keel"}' },
      { type: "call.end", index: 0 },
      { type: "finish", reason: "tool_calls" },
    ],
  },
  { text: "A keel is the spine of a boat.", chunkSize: 5 },
];

describe("the UI message stream", () => {
  it("reconstructs, through the AI SDK's own reader, the messages session.history() holds", async () => {
    const { transport, seen, recorded } = setup(twoSteps);
    const message = await lastOf(await send(transport, "chat1", [user("what is a keel?")]));
    const session = await agent.openSession("chat1");
    const expected = expectedFrom(session.history());
    expect(expected.texts).toEqual(["Let me look that up.", "A keel is the spine of a boat."]);
    expect(expected.reasoning).toEqual(["The user wants a word."]);
    expect(shownIn(message)).toEqual(expected);
    expect(message.role).toBe("assistant");
    const turnId = session.entries().find((e) => e.type === "turn_start")!;
    expect(message.id).toBe(turnId.type === "turn_start" && turnId.turnId);
    await recorded();
    for (const chunk of seen) {
      expect(await uiMessageChunkSchema().validate!(chunk), JSON.stringify(chunk)).toMatchObject({
        success: true,
      });
    }
    expect(seen.at(-1)).toEqual({ type: "finish", finishReason: "stop" });
    // The page's loader: the same conversation as UI messages, the same content.
    const loaded = await handler(
      new Request("http://keel.test/chat/chat1/messages", {
        headers: { authorization: `Bearer ${TOKEN}` },
      }),
    );
    const { messages } = await loaded.json();
    expect(messages.map((m: UIMessage) => m.role)).toEqual(["user", "assistant"]);
    expect(shownIn(messages[1])).toEqual(expected);
  });
});
