import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { createTrace } from "../cli/trace.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { defineTool } from "../tools/define-tool.ts";
import { deferred } from "./support/harness.ts";

const echo = defineTool({
  name: "echo",
  description: "Echoes its text.",
  parameters: z.object({ text: z.string() }),
  traits: {
    readOnly: true,
    concurrencySafe: true,
    idempotent: true,
    cancellable: true,
    risk: "low",
  },
  execute: ({ text }) => `echo: ${text}`,
});

describe("turn end to end with the scripted model", () => {
  it("runs a tool call and feeds its result back to the model", async () => {
    const model = scriptedModel([
      {
        toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"hi"}' }],
        usage: { inputTokens: 20, outputTokens: 7 },
      },
      { text: "done", usage: { inputTokens: 35, outputTokens: 2 } },
    ]);
    const agent = createAgent({ model, tools: [echo] });
    const session = agent.session("s1");
    const out = await session.prompt("say hi");
    // The result: the final text, usage summed over the responses, the model requests sent.
    expect(out).toEqual({
      status: "completed",
      text: "done",
      usage: { inputTokens: 55, outputTokens: 9 },
      steps: 2,
    });
    const msgs = session.messages();
    expect(msgs.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(msgs[2]).toMatchObject({ role: "tool", tool_call_id: "c1", content: "echo: hi" });
    expect(model.requests[1].messages.at(-1)).toMatchObject({ role: "tool", content: "echo: hi" });
  });

  it("sums cached and reasoning tokens into the result when a response reports them", async () => {
    const model = scriptedModel([
      {
        toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"hi"}' }],
        usage: { inputTokens: 20, outputTokens: 7, reasoningTokens: 5 },
      },
      {
        text: "done",
        usage: { inputTokens: 35, outputTokens: 2, cachedInputTokens: 16, reasoningTokens: 1 },
      },
    ]);
    const agent = createAgent({ model, tools: [echo] });
    const out = await agent.session("s-usage").prompt("say hi");
    expect(out.usage).toEqual({
      inputTokens: 55,
      outputTokens: 9,
      cachedInputTokens: 16,
      reasoningTokens: 6,
    });
  });

  it("call ids that name Object.prototype members (__proto__, constructor, toString) run and settle like any other", async () => {
    const ids = ["__proto__", "constructor", "toString"];
    const model = scriptedModel([
      { toolCalls: ids.map((id) => ({ id, name: "echo", arguments: `{"text":"${id}"}` })) },
      { text: "done" },
    ]);
    const agent = createAgent({ model, tools: [echo] });
    const session = agent.session("s-proto");
    const out = await Promise.race([
      session.prompt("go"),
      new Promise((resolve) => setTimeout(() => resolve("still running after 2 s"), 2000)),
    ]);
    expect(out).toMatchObject({ status: "completed", text: "done", steps: 2 });
    const tools = session.messages().filter((m) => m.role === "tool");
    expect(tools.map((m) => [m.tool_call_id, m.content])).toEqual(
      ids.map((id) => [id, `echo: ${id}`]),
    );
  });

  it("completion order B, A gives call.settled B then A, and committed results A, B", async () => {
    const gates = { a: deferred(), b: deferred() };
    const slow = defineTool({
      name: "slow",
      description: "Waits for its gate.",
      parameters: z.object({ gate: z.enum(["a", "b"]) }),
      traits: { concurrencySafe: true },
      execute: async ({ gate }) => {
        await gates[gate as "a" | "b"].promise;
        return `done ${gate}`;
      },
    });
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "A", name: "slow", arguments: '{"gate":"a"}' },
          { id: "B", name: "slow", arguments: '{"gate":"b"}' },
        ],
      },
      { text: "ok" },
    ]);
    const agent = createAgent({ model, tools: [slow] });
    const session = agent.session();
    const events: AgentEvent[] = [];
    session.subscribe((e) => {
      events.push(e);
      if (e.type === "call.started" && e.callId === "B") {
        queueMicrotask(() => gates.b.resolve());
      }
      if (e.type === "call.settled" && e.callId === "B") gates.a.resolve();
    });
    const out = await session.prompt("go");
    expect(out.status).toBe("completed");
    const settled = events
      .filter((e) => e.type === "call.settled")
      .map((e) => (e as { callId: string }).callId);
    expect(settled).toEqual(["B", "A"]);
    const committed = events.find((e) => e.type === "batch.committed") as Extract<
      AgentEvent,
      { type: "batch.committed" }
    >;
    expect(committed.calls.map((c) => c.callId)).toEqual(["A", "B"]);
    const tools = session.messages().filter((m) => m.role === "tool");
    expect(tools.map((m) => (m as { tool_call_id: string }).tool_call_id)).toEqual(["A", "B"]);
  });
});

describe("call ids a model gets wrong", () => {
  it("two calls with one id in a message both run, under distinct ids, with a warning", async () => {
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "same", name: "echo", arguments: '{"text":"a"}' },
          { id: "same", name: "echo", arguments: '{"text":"b"}' },
        ],
      },
      { text: "done" },
    ]);
    const agent = createAgent({ model, tools: [echo] });
    const session = agent.session("dup");
    const warnings: string[] = [];
    session.subscribe((e) => {
      if (e.type === "log.written" && e.level === "warn") warnings.push(e.message);
    });
    const out = await session.prompt("go");
    expect(out.status).toBe("completed");
    const results = session.entries().flatMap((e) => (e.type === "call_result" ? [e] : []));
    expect(results.map((r) => r.outcome)).toEqual(["completed", "completed"]);
    expect(new Set(results.map((r) => r.callId)).size).toBe(2);
    expect(warnings.join("\n")).toMatch(/repeated the id "same"/);
    const tool = session.messages().filter((m) => m.role === "tool");
    expect(tool).toHaveLength(2);
  });

  it("a call id reused in a later message gets a different idempotency key", async () => {
    const model = scriptedModel([
      { toolCalls: [{ id: "call_0", name: "echo", arguments: '{"text":"a"}' }] },
      { toolCalls: [{ id: "call_0", name: "echo", arguments: '{"text":"b"}' }] },
      { text: "done" },
    ]);
    const agent = createAgent({ model, tools: [echo] });
    const session = agent.session("reuse");
    expect((await session.prompt("go")).status).toBe("completed");
    const keys = session
      .entries()
      .flatMap((e) => (e.type === "call_started" ? [e.idempotencyKey] : []));
    expect(keys).toHaveLength(2);
    expect(keys[0]).not.toBe(keys[1]);
    expect(keys.every((k) => k.startsWith("reuse:") && k.endsWith(":call_0"))).toBe(true);
  });
});

describe("argument previews", () => {
  it("subscribers see call.previewed events with the arguments parsed so far", async () => {
    const big = "x".repeat(2000);
    const model = scriptedModel([
      {
        toolCalls: [{ id: "p", name: "echo", arguments: JSON.stringify({ text: big }) }],
        chunkSize: 100,
      },
      { text: "ok" },
    ]);
    const session = createAgent({ model, tools: [echo] }).session();
    const previews: unknown[] = [];
    session.subscribe((e) => {
      if (e.type === "call.previewed") previews.push(structuredClone(e.preview));
    });
    await session.prompt("go");
    expect(previews.length).toBeGreaterThan(2);
    const lengths = previews.map((p) => ((p as { text?: string }).text ?? "").length);
    expect(lengths).toEqual([...lengths].sort((a, b) => a - b));
    expect(lengths.at(-1)).toBe(2000);
  });
});

describe("answers that did not end by a plain stop", () => {
  it.each([
    ["length", "cut at the model's output limit (finish_reason: length)"],
    ["content_filter", "content filter stopped the answer (finish_reason: content_filter)"],
  ] as const)(
    "a text-only %s finish ends the turn completed with a reason saying the answer is incomplete, in the result, the log and the trace",
    async (finish, words) => {
      const agent = createAgent({ model: scriptedModel([{ text: "The answer is", finish }]) });
      const session = await agent.openSession("cut");
      const lines: string[] = [];
      const trace = createTrace({ out: { write: (c) => lines.push(String(c)) }, color: false });
      session.subscribe((e) => trace.onEvent(e));
      const result = await session.prompt("question");
      expect(result.status).toBe("completed");
      expect(result.reason).toContain(words);
      const end = session.entries().find((e) => e.type === "turn_end");
      expect(end).toMatchObject({ status: "completed", reason: result.reason });
      expect(lines.join("")).toContain(`⚠ turn completed: ${result.reason}`);
      await agent.close();
    },
  );

  it("a plain stop after a cut answer steered to go on ends without that reason", async () => {
    const agent = createAgent({
      model: scriptedModel([{ text: "The answer is", finish: "length" }, { text: "42." }]),
    });
    const session = await agent.openSession("steered");
    const first = session.prompt("question");
    await session.followUp("go on");
    expect(await first).toMatchObject({ status: "completed" });
    await session.awaitIdle();
    const ends = session.entries().filter((e) => e.type === "turn_end");
    // No reason, whether the entry is the one appended (`reason: undefined`) or the one read
    // back from the store after the session rested (no `reason` key).
    expect(ends.at(-1)).toMatchObject({ status: "completed" });
    expect(ends.at(-1)?.reason).toBeUndefined();
    await agent.close();
  });
});
