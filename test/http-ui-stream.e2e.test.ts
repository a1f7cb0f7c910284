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
  type Tool,
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

function setup(script: ScriptStep[], tools: Tool[] = [echo, remove]) {
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

describe("approvals and resume on the UI message stream", () => {
  it("ends the response at an approval request; the approval, as the AI SDK sends it, continues the same message", async () => {
    const { transport } = setup([
      {
        text: "I will delete it.",
        toolCalls: [{ id: "call_d", name: "delete_file", arguments: '{"path":"a.txt"}' }],
      },
      { text: "Deleted." },
    ]);
    const asked = await lastOf(await send(transport, "chat2", [user("delete a.txt")]));
    const tool = asked.parts.find((p) => p.type === "dynamic-tool") as Record<string, unknown>;
    expect(tool).toMatchObject({
      state: "approval-requested",
      toolCallId: "call_d",
      input: { path: "a.txt" },
    });
    const session = await agent.openSession("chat2");
    expect((await session.pendingPermissions()).map((r) => r.requestId)).toEqual([
      (tool.approval as { id: string }).id,
    ]);
    // What useChat's addToolApprovalResponse does to the part, then sends.
    const answered: UIMessage = {
      ...asked,
      parts: asked.parts.map((p) =>
        p === (tool as unknown)
          ? {
              ...tool,
              state: "approval-responded",
              approval: { ...(tool.approval as object), approved: true },
            }
          : p,
      ) as UIMessage["parts"],
    };
    const done = await lastOf(
      await send(transport, "chat2", [user("delete a.txt"), answered]),
      answered,
    );
    expect(done.id).toBe(asked.id);
    expect(shownIn(done)).toEqual(expectedFrom(session.history()));
    expect(done.parts.find((p) => p.type === "dynamic-tool")).toMatchObject({
      state: "output-available",
      output: "deleted a.txt",
    });
  });

  it("a denial with a reason reaches the model as feedback; an approval for no waiting request is a 409", async () => {
    const { transport } = setup([
      { toolCalls: [{ id: "call_d", name: "delete_file", arguments: '{"path":"b.txt"}' }] },
      { text: "Understood, I kept it." },
    ]);
    const asked = await lastOf(await send(transport, "chat3", [user("delete b.txt")]));
    const tool = asked.parts.find((p) => p.type === "dynamic-tool") as Record<string, unknown>;
    const denied: UIMessage = {
      ...asked,
      parts: asked.parts.map((p) =>
        p === (tool as unknown)
          ? {
              ...tool,
              state: "approval-responded",
              approval: { ...(tool.approval as object), approved: false, reason: "keep b.txt" },
            }
          : p,
      ) as UIMessage["parts"],
    };
    const done = await lastOf(
      await send(transport, "chat3", [user("delete b.txt"), denied]),
      structuredClone(denied),
    );
    expect(shownIn(done).texts).toEqual(["Understood, I kept it."]);
    const session = await agent.openSession("chat3");
    const result = session.history().find((m) => m.role === "tool");
    expect(result?.role === "tool" && result.content[0].content).toMatch(/keep b\.txt/);
    await expect(send(transport, "chat3", [user("delete b.txt"), denied])).rejects.toThrow(
      /REFUSED|no turn/,
    );
  });

  it("a resume mid-turn replays the message from its start and goes on live: nothing missed, nothing twice", async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => {
      release = r;
    });
    const slow = defineTool({
      name: "slow",
      description: "waits",
      parameters: z.object({}),
      traits: { risk: "low" },
      execute: async () => {
        await released;
        return "slow done";
      },
    });
    const { transport } = setup(
      [
        {
          text: "Working on it.",
          chunkSize: 3,
          toolCalls: [{ id: "call_s", name: "slow", arguments: "{}" }],
        },
        { text: "Done now." },
      ],
      [slow],
    );
    const first = await send(transport, "chat4", [user("work")]);
    const reader = first.getReader();
    // Read until the tool runs, then the page goes away (its reader is cancelled).
    for (;;) {
      const { value } = await reader.read();
      if (value?.type === "tool-input-available") break;
    }
    await reader.cancel();
    const none = await handler(
      new Request("http://keel.test/chat/nochat/stream", {
        headers: { authorization: `Bearer ${TOKEN}` },
      }),
    );
    expect(none.status).toBe(204);
    const resumed = await transport.reconnectToStream({ chatId: "chat4", abortSignal: undefined });
    expect(resumed).not.toBeNull();
    const chunks: UIMessageChunk[] = [];
    const copy = resumed!.pipeThrough(
      new TransformStream<UIMessageChunk, UIMessageChunk>({
        transform(chunk, c) {
          chunks.push(chunk);
          c.enqueue(chunk);
        },
      }),
    );
    setTimeout(release, 50);
    const message = await lastOf(copy);
    const session = await agent.openSession("chat4");
    expect(shownIn(message)).toEqual(expectedFrom(session.history()));
    expect(chunks[0]).toMatchObject({ type: "start", messageId: message.id });
    const deltas = chunks
      .filter((c) => c.type === "text-delta")
      .map((c) => (c as { delta: string }).delta);
    expect(deltas.join("")).toBe("Working on it.Done now.");
    expect(chunks.filter((c) => c.type === "start")).toHaveLength(1);
    const after = await handler(
      new Request("http://keel.test/chat/chat4/stream", {
        headers: { authorization: `Bearer ${TOKEN}` },
      }),
    );
    expect(after.status).toBe(204);
  });
});
