import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { type ChatMessage, toChatMessages } from "../contracts/chat.ts";
import type { AgentEvent } from "../contracts/events.ts";
import type { ModelToolSpec } from "../contracts/model.ts";
import { openaiModel } from "../providers/openai-model.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { defineTool } from "../tools/define-tool.ts";
import {
  contextOverflow,
  type FakeOpenAIServer,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";

/** A tool whose result is a few hundred characters: a long session fills the window. */
const note = defineTool({
  name: "note",
  description: "Reads note n.",
  parameters: z.object({ n: z.number() }),
  traits: { readOnly: true, concurrencySafe: true, risk: "low" },
  execute: ({ n }) => `note ${n}: ${"lorem ipsum dolor sit amet ".repeat(8)}`,
});

/**
 * The test's own count of a request (the scripted model's documented window rule): ⌈chars/4⌉
 * of each text, 3 tokens of framing per message and per call, 3 per request, the tools as JSON.
 */
function tokensOf(r: {
  instructions?: string;
  messages: readonly ChatMessage[];
  tools: readonly ModelToolSpec[];
}): number {
  const c = (s: string) => Math.ceil(s.length / 4);
  let t = 3 + (r.instructions ? 3 + c(r.instructions) : 0);
  if (r.tools.length) t += c(JSON.stringify(r.tools));
  for (const m of r.messages) {
    t += 3 + (typeof m.content === "string" ? c(m.content) : 0); // text only here
    if (m.role === "assistant")
      for (const k of m.tool_calls ?? []) t += 3 + c(k.function.name) + c(k.function.arguments);
  }
  return t;
}

/** Why `messages` break the pairing rule (each call answered right after, no orphan), or null. */
function pairingViolation(messages: readonly ChatMessage[]): string | null {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (m.role === "tool") return `message ${i}: a tool result without its call just before`;
    if (m.role === "assistant" && m.tool_calls?.length) {
      for (const [k, call] of m.tool_calls.entries()) {
        const r = messages[i + 1 + k];
        if (r?.role !== "tool" || r.tool_call_id !== call.id) {
          return `message ${i}: call ${call.id} is not followed by its result`;
        }
      }
      i += m.tool_calls.length;
    }
  }
  return null;
}

const isSummaryRequest = (r: { tools: readonly unknown[] }) => r.tools.length === 0;

describe("a long session against a small window", () => {
  it("300 steps in a 4 000-token window complete, compacting several times; no request exceeds the window and every call stays paired with its result", async () => {
    let step = 0;
    const model = scriptedModel(
      (request) => {
        if (isSummaryRequest(request)) {
          const notes = request.messages.filter((m) => m.role === "tool").length;
          return { text: `Read ${notes} notes so far; each says lorem ipsum.` };
        }
        const messages = toChatMessages(request.messages);
        const usage = { inputTokens: tokensOf({ ...request, messages }), outputTokens: 12 };
        step++;
        if (step > 300) return { text: "all notes read", usage };
        return { toolCalls: [{ id: `c${step}`, name: "note", arguments: `{"n":${step}}` }], usage };
      },
      { contextWindow: 4000, maxOutputTokens: 500 },
    );
    const agent = createAgent({
      model,
      tools: [note],
      instructions: "You read notes.",
      limits: { maxSteps: 400 },
    });
    const session = agent.session("long");
    const events: AgentEvent[] = [];
    session.subscribe((e) => {
      if (e.type === "context.compacted" || e.type === "attempt.ended") events.push(e);
    });
    const result = await session.prompt("read notes 1 to 300");
    expect(result).toMatchObject({ status: "completed", text: "all notes read", steps: 301 });
    const compactions = session.entries().filter((e) => e.type === "compaction");
    expect(compactions.length).toBeGreaterThanOrEqual(3);
    expect(events.filter((e) => e.type === "context.compacted" && !e.ok)).toEqual([]);
    // No request was refused by the window: every attempt completed.
    expect(events.filter((e) => e.type === "attempt.ended" && e.status !== "completed")).toEqual(
      [],
    );
    const main = model.requests.filter((r) => !isSummaryRequest(r));
    expect(main).toHaveLength(301);
    for (const r of model.requests) {
      expect(tokensOf(r), `request ${r.index}`).toBeLessThanOrEqual(4000);
      expect(pairingViolation(r.messages), `request ${r.index}`).toBeNull();
    }
    for (const r of main) expect(r.instructions).toBe("You read notes.");
    // The budget is tracked from provider usage, and it is what the requests really cost.
    const usage = session.contextUsage();
    expect(usage).toMatchObject({ window: 4000, reserve: 500 });
    expect(usage.used).toBeLessThan(0.85 * 4000);
    await agent.close();
  });
});

describe("overflow recovery over real HTTP", () => {
  let server: FakeOpenAIServer;
  afterEach(async () => server?.close());

  /** A session with two earlier steps of history, then a prompt the provider refuses. */
  async function setUp(overflowRecoveries?: number) {
    server = await startFakeOpenAIServer();
    const model = openaiModel({
      model: "fake-model",
      baseURL: server.baseURL,
      contextWindow: 1_000_000,
      maxOutputTokens: 1000,
    });
    const agent = createAgent({
      model,
      tools: [note],
      context: { keepRecentTokens: 60, overflowRecoveries },
    });
    const session = agent.session("overflow");
    server.enqueue(
      streamReply({ calls: [{ id: "a1", name: "note", args: '{"n":1}' }] }),
      streamReply({ calls: [{ id: "a2", name: "note", args: '{"n":2}' }] }),
      streamReply({ text: "read both" }),
    );
    expect((await session.prompt("read notes 1 and 2")).status).toBe("completed");
    return { agent, session, before: server.requests.length };
  }

  it("a context-length 400 is followed by one harder compaction and a smaller request, not by a retry of the same request", async () => {
    const { agent, session, before } = await setUp();
    server.enqueue(
      contextOverflow(),
      streamReply({ text: "Notes 1 and 2 were read." }),
      streamReply({ text: "fits now" }),
    );
    const result = await session.prompt("and now?");
    expect(result).toMatchObject({ status: "completed", text: "fits now" });
    const [refused, summary, resent] = server.requests.slice(before).map((r) => r.body);
    expect(server.requests.length - before).toBe(3);
    expect(summary.tools).toBeUndefined(); // the summary request: no tools
    expect(resent.tools).toBeDefined();
    expect(JSON.stringify(resent.messages).length).toBeLessThan(
      JSON.stringify(refused.messages).length,
    );
    expect(JSON.stringify(resent.messages)).toContain("Notes 1 and 2 were read.");
    expect(session.entries().filter((e) => e.type === "compaction")).toHaveLength(1);
    await agent.close();
  });

  it("a second overflow after the compaction fails the turn with a reason that says what to do (one recovery allowed)", async () => {
    const { agent, session, before } = await setUp(1);
    server.enqueue(
      contextOverflow(),
      streamReply({ text: "Notes 1 and 2 were read." }),
      contextOverflow(),
    );
    const result = await session.prompt("and now?");
    expect(result.status).toBe("failed");
    expect(result.reason).toMatch(/still exceeds the model's context window after 1 compaction/);
    expect(result.reason).toMatch(/clearToolResults|larger context window/);
    expect(server.requests.length - before).toBe(3); // no retry of the refused request
    await agent.close();
  });

  it("with no overflow budget, the first overflow fails the turn without a compaction", async () => {
    const { agent, session, before } = await setUp(0);
    server.enqueue(contextOverflow());
    const result = await session.prompt("and now?");
    expect(result.status).toBe("failed");
    expect(result.reason).toMatch(/context overflow/);
    expect(server.requests.length - before).toBe(1);
    expect(session.entries().filter((e) => e.type === "compaction")).toHaveLength(0);
    await agent.close();
  });
});
