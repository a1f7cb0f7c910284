import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { AgentEvent } from "../contracts/events.ts";
import type { Model } from "../contracts/model.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";
import { deferred } from "./support/harness.ts";

const resultsOf = (entries: readonly LogEntry[]) =>
  entries.filter((e) => e.type === "call_result") as Extract<LogEntry, { type: "call_result" }>[];

/** Every tool call in the projection is followed by exactly one result (invariant 1 of docs/architecture.md). */
function expectPaired(messages: readonly { role: string }[]) {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as { role: string; tool_calls?: { id: string }[] };
    if (m.role !== "assistant" || !m.tool_calls?.length) continue;
    const ids = m.tool_calls.map((c) => c.id);
    const next = messages.slice(i + 1, i + 1 + ids.length) as {
      role: string;
      tool_call_id?: string;
    }[];
    expect(next.map((n) => n.tool_call_id)).toEqual(ids);
  }
  const toolIds = messages
    .filter((m) => m.role === "tool")
    .map((m) => (m as unknown as { tool_call_id: string }).tool_call_id);
  expect(new Set(toolIds).size).toBe(toolIds.length);
}

describe("the length gate", () => {
  it("a message that ended by length executes none of its calls, even valid ones, and the loop continues", async () => {
    let ran = 0;
    const write = defineTool({
      name: "write",
      description: "Writes.",
      parameters: z.object({ text: z.string() }),
      execute: () => {
        ran++;
        return "written";
      },
    });
    const model = scriptedModel([
      {
        toolCalls: [{ id: "t1", name: "write", arguments: '{"text":"complete and valid"}' }],
        finish: "length",
      },
      { text: "I will re-issue it smaller next time." },
    ]);
    const session = createAgent({ model, tools: [write] }).session();
    const out = await session.prompt("write it");
    expect(out.status).toBe("completed");
    expect(ran).toBe(0);
    const [result] = resultsOf(session.entries());
    expect(result).toMatchObject({
      callId: "t1",
      outcome: "not_executed",
      result: { ok: false, code: "TRUNCATED_CALL" },
    });
    expect(session.entries().some((e) => e.type === "call_started")).toBe(false);
    expect(model.requests).toHaveLength(2);
    expectPaired(session.messages());
  });
});

describe("interrupt", () => {
  it("while sampling: the turn is cancelled and the next turn's context says where it was cut", async () => {
    const model = scriptedModel([{ hang: true }, { text: "hello again" }]);
    // The interrupt comes once the first request is in flight (the model has it).
    const sampling: Model = {
      name: model.name,
      stream: (request) => {
        if (model.requests.length === 0)
          queueMicrotask(() => session.interrupt("user pressed stop"));
        return model.stream(request);
      },
    };
    const session = createAgent({ model: sampling }).session();
    const events: AgentEvent[] = [];
    session.subscribe((e) => {
      events.push(e);
    });
    const out = await session.prompt("first");
    expect(out.status).toBe("cancelled");
    const types = events.map((e) => e.type);
    const ack = types.indexOf("turn.cancel-acknowledged");
    const stopped = types.indexOf("turn.execution-stopped");
    const ended = types.indexOf("turn.ended");
    expect(ack).toBeGreaterThan(-1);
    expect(ack).toBeLessThan(stopped);
    expect(stopped).toBeLessThan(ended);
    await session.prompt("second");
    const context = model.requests[1].messages;
    expect(
      context.some(
        (m) =>
          m.role === "user" &&
          /cut|interrupt/i.test(String(m.content)) &&
          /model/i.test(String(m.content)),
      ),
    ).toBe(true);
  });

  it("while calls are queued and one runs: queued calls get CANCELLED, a call that completes after the interrupt keeps its real result", async () => {
    const gate = deferred();
    let started = 0;
    const work = defineTool({
      name: "work",
      description: "Works until its gate opens.",
      parameters: z.object({ n: z.number() }),
      traits: { concurrencySafe: true, cancellable: false },
      execute: async ({ n }) => {
        started++;
        await gate.promise;
        return `work ${n} done`;
      },
    });
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "w1", name: "work", arguments: '{"n":1}' },
          { id: "w2", name: "work", arguments: '{"n":2}' },
          { id: "w3", name: "work", arguments: '{"n":3}' },
        ],
      },
    ]);
    const session = createAgent({
      model,
      tools: [work],
      maxParallelToolCalls: 1,
      stopDeadlineMs: 10_000,
    }).session();
    session.subscribe((e) => {
      if (e.type === "call.started") {
        session.interrupt("stop");
        queueMicrotask(() => gate.resolve());
      }
    });
    const out = await session.prompt("go");
    expect(out.status).toBe("cancelled");
    expect(started).toBe(1);
    const byId = Object.fromEntries(resultsOf(session.entries()).map((r) => [r.callId, r]));
    expect(byId.w1).toMatchObject({
      outcome: "completed",
      result: { ok: true, content: "work 1 done" },
    });
    expect(byId.w2).toMatchObject({ outcome: "not_executed", result: { code: "CANCELLED" } });
    expect(byId.w3).toMatchObject({ outcome: "not_executed", result: { code: "CANCELLED" } });
    expect(resultsOf(session.entries())).toHaveLength(3);
    expectPaired(session.messages());
  });

  it("a tool that ignores its signal becomes unknown after the stop deadline, and is never given a second result", async () => {
    const never = defineTool({
      name: "stuck",
      description: "Never returns.",
      parameters: z.object({}),
      traits: { cancellable: true },
      execute: () => new Promise<string>(() => {}),
    });
    const model = scriptedModel([{ toolCalls: [{ id: "s1", name: "stuck", arguments: "{}" }] }]);
    const session = createAgent({ model, tools: [never], stopDeadlineMs: 30 }).session();
    session.subscribe((e) => {
      if (e.type === "call.started") session.interrupt("stop");
    });
    const out = await session.prompt("go");
    expect(out.status).toBe("cancelled");
    const results = resultsOf(session.entries());
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ outcome: "unknown", result: { code: "OUTCOME_UNKNOWN" } });
    expectPaired(session.messages());
  });

  it("a cancellable tool that honours the abort settles as cancelled", async () => {
    const waits = defineTool({
      name: "waits",
      description: "Waits for abort.",
      parameters: z.object({}),
      traits: { cancellable: true },
      execute: (_args, ctx) =>
        new Promise<string>((_, reject) =>
          ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason)),
        ),
    });
    const model = scriptedModel([{ toolCalls: [{ id: "x1", name: "waits", arguments: "{}" }] }]);
    const session = createAgent({ model, tools: [waits], stopDeadlineMs: 5000 }).session();
    const seen: string[] = [];
    session.subscribe((e) => {
      if (e.type === "call.started") session.interrupt("stop");
      if (e.type === "call.stop-requested") seen.push(`${e.type} ${e.callId} ${e.name}`);
      if (e.type === "call.settled" || e.type === "turn.cancel-acknowledged") seen.push(e.type);
    });
    expect((await session.prompt("go")).status).toBe("cancelled");
    expect(resultsOf(session.entries())[0]).toMatchObject({
      outcome: "cancelled",
      result: { code: "CANCELLED" },
    });
    // The running call is told to stop once, between the acknowledgement and its settling.
    expect(seen).toEqual([
      "turn.cancel-acknowledged",
      "call.stop-requested x1 waits",
      "call.settled",
    ]);
  });
});

describe("attempts", () => {
  it("a failed attempt's partial output is in entries() marked interrupted, never in messages()", async () => {
    const model = scriptedModel([
      { text: "PARTIAL-SECRET-TEXT that will be cut", chunkSize: 5, cutAfter: 2 },
      { text: "the complete answer" },
    ]);
    const session = createAgent({ model, retry: { baseDelayMs: 1, maxDelayMs: 2 } }).session();
    const out = await session.prompt("answer");
    expect(out.status).toBe("completed");
    const ends = session.entries().filter((e) => e.type === "attempt_end") as Extract<
      LogEntry,
      { type: "attempt_end" }
    >[];
    expect(ends[0]).toMatchObject({ status: "interrupted", partialText: "PARTIAL-SE" });
    expect(JSON.stringify(session.messages())).not.toContain("PARTIAL");
    expect(session.messages().at(-1)).toMatchObject({
      role: "assistant",
      content: "the complete answer",
    });
    expect(JSON.stringify(model.requests[1].messages)).not.toContain("PARTIAL");
  });

  it("an unknown tool gets an UNKNOWN_TOOL result naming the available tools, and the model can correct itself", async () => {
    const echo = defineTool({
      name: "echo",
      description: "Echo.",
      parameters: z.object({ text: z.string() }),
      execute: ({ text }) => text,
    });
    const model = scriptedModel([
      { toolCalls: [{ id: "u1", name: "ekho", arguments: '{"text":"a"}' }] },
      { toolCalls: [{ id: "u2", name: "echo", arguments: '{"text":"a"}' }] },
      { text: "fine" },
    ]);
    const session = createAgent({ model, tools: [echo] }).session();
    expect((await session.prompt("x")).status).toBe("completed");
    const [first, second] = resultsOf(session.entries());
    expect(first.result).toMatchObject({ ok: false, code: "UNKNOWN_TOOL" });
    expect((first.result as { message: string }).message).toContain("echo");
    expect(second.result).toMatchObject({ ok: true, content: "a" });
  });

  it("maxSteps ends the turn as budget_exhausted with every call answered", async () => {
    const echo = defineTool({
      name: "echo",
      description: "Echo.",
      parameters: z.object({}),
      execute: () => "e",
    });
    const model = scriptedModel(() => ({ toolCalls: [{ name: "echo", arguments: "{}" }] }));
    const session = createAgent({ model, tools: [echo], limits: { maxSteps: 3 } }).session();
    const out = await session.prompt("loop");
    expect(out.status).toBe("budget_exhausted");
    expect(model.requests).toHaveLength(3);
    expectPaired(session.messages());
  });

  it("a context overflow is not retried and fails the turn with a reason the caller can act on", async () => {
    const model = scriptedModel([
      {
        error: {
          status: 400,
          code: "context_length_exceeded",
          message: "maximum context length is 8192 tokens",
        },
      },
    ]);
    const session = createAgent({ model }).session();
    const out = await session.prompt("x");
    expect(out.status).toBe("failed");
    expect(out.reason).toMatch(/context/i);
    expect(model.requests).toHaveLength(1);
  });
});
