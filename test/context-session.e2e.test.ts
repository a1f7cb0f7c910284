import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { ChatMessage } from "../contracts/chat.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { defineTool } from "../tools/define-tool.ts";

const note = defineTool({
  name: "note",
  description: "Reads note n.",
  parameters: z.object({ n: z.number() }),
  traits: { readOnly: true, concurrencySafe: true, risk: "low" },
  execute: ({ n }) => `note ${n}: ${"lorem ipsum dolor sit amet ".repeat(8)}`,
});

const call = (n: number) => ({
  toolCalls: [{ id: `c${n}`, name: "note", arguments: `{"n":${n}}` }],
});

/** Tool messages whose call is not in the same list, and calls with no result. */
function orphans(messages: readonly ChatMessage[]): string[] {
  const calls = new Set<string>();
  const results = new Set<string>();
  for (const m of messages) {
    if (m.role === "assistant") for (const c of m.tool_calls ?? []) calls.add(c.id);
    if (m.role === "tool") results.add(m.tool_call_id);
  }
  return [
    ...[...results].filter((id) => !calls.has(id)).map((id) => `result ${id} without its call`),
    ...[...calls].filter((id) => !results.has(id)).map((id) => `call ${id} without a result`),
  ];
}

describe("automatic compaction, interrupted", () => {
  it("an interrupt during an automatic compaction keeps the old baseline, ends the turn cancelled and leaves no orphan result", async () => {
    let main = 0;
    let summaryStarted!: () => void;
    const summarizing = new Promise<void>((r) => {
      summaryStarted = r;
    });
    const model = scriptedModel(
      (request) => {
        if (request.tools.length === 0) {
          summaryStarted();
          return { hang: true }; // the summary never arrives: only the interrupt ends it
        }
        main++;
        return main <= 40 ? call(main) : { text: "done" };
      },
      { contextWindow: 2000, maxOutputTokens: 200 },
    );
    const agent = createAgent({ model, tools: [note], limits: { maxSteps: 100 } });
    const session = agent.session("interrupted");
    const states: string[] = [];
    session.subscribe((e: AgentEvent) => {
      if (e.type === "turn.cancel-acknowledged" || e.type === "context.compacted")
        states.push(e.type);
    });
    const done = session.prompt("read notes");
    await summarizing;
    // The turn chart is in its compacting state while the summary request runs.
    const turn = session.currentTurn!;
    expect(JSON.stringify(turn.ref.getSnapshot().value)).toContain("compacting");
    const before = session.messages().slice();
    session.interrupt("stop");
    const result = await done;
    expect(result.status).toBe("cancelled");
    expect(session.sessionLog.baseline()).toBeNull(); // no compaction entry was appended
    expect(session.entries().filter((e) => e.type === "compaction")).toEqual([]);
    // The view is the old one, plus only the cut-turn note.
    expect(session.messages().slice(0, before.length)).toEqual(before);
    expect(orphans(session.messages())).toEqual([]);
    const aborted = session.entries().find((e) => e.type === "turn_aborted");
    expect(aborted && "where" in aborted && aborted.where).toMatch(/while compacting/);
    expect(states).toContain("turn.cancel-acknowledged");
    await agent.close();
  });
});

describe("instructions", () => {
  it("are the stable head of every request, and a rollback past a change restores the old ones in the next request", async () => {
    const model = scriptedModel([{ text: "one" }, { text: "two" }, { text: "three" }]);
    const agent = createAgent({ model, instructions: "You are terse." });
    const session = agent.session("instr");
    await session.prompt("first");
    const mark = session.entries().at(-1)!.id;
    expect(await session.setInstructions("You are verbose.")).toMatchObject({ ok: true });
    await session.prompt("second");
    expect(model.requests.map((r) => r.instructions)).toEqual([
      "You are terse.",
      "You are verbose.",
    ]);
    expect((await session.rollback(mark)).ok).toBe(true);
    expect(session.instructions()).toBe("You are terse.");
    await session.prompt("third");
    expect(model.requests[2].instructions).toBe("You are terse.");
    // The instructions are never one of the messages: the history follows them.
    expect(model.requests[2].messages.map((m) => m.role)).not.toContain("system");
    await agent.close();
  });

  it("a session's own instructions (a function of the session) replace the agent's, and are recorded once", async () => {
    const model = scriptedModel([{ text: "a" }, { text: "b" }]);
    const agent = createAgent({ model, instructions: "agent-wide" });
    const session = agent.session("own", { instructions: (s) => `You serve session ${s.id}.` });
    await session.prompt("x");
    await session.prompt("y");
    expect(model.requests.map((r) => r.instructions)).toEqual([
      "You serve session own.",
      "You serve session own.",
    ]);
    expect(session.entries().filter((e) => e.type === "settings")).toHaveLength(1);
    await agent.close();
  });
});

describe("clearing old tool results", () => {
  it("clearToolResults leaves a note with the size and id, and read_result restores the text from the log", async () => {
    const model = scriptedModel([
      call(1),
      call(2),
      { text: "read" },
      (request) => {
        const cleared = request.messages.find(
          (m) => m.role === "tool" && m.content[0].content.startsWith("[result cleared"),
        );
        const text = cleared?.role === "tool" ? cleared.content[0].content : "";
        const id = /"id":"([^"]+)"/.exec(text)?.[1] ?? "missing";
        return { toolCalls: [{ id: "r1", name: "read_result", arguments: `{"id":"${id}"}` }] };
      },
      { text: "restored" },
    ]);
    const agent = createAgent({ model, tools: [note], context: { readResultTool: true } });
    const session = agent.session("clear");
    await session.prompt("read 1 and 2");
    const original = session.messages().find((m) => m.role === "tool")!.content;
    const out = await session.clearToolResults({ keepLast: 1 });
    expect(out).toEqual({ ok: true, cleared: 1, bytes: Buffer.byteLength(original) });
    const tools = session.messages().filter((m) => m.role === "tool");
    expect(tools[0].content).toMatch(
      new RegExp(`^\\[result cleared .*: ${out.ok && out.bytes} bytes; call read_result`),
    );
    expect(tools[1].content).toMatch(/^note 2: /); // keepLast
    await session.prompt("what did note 1 say?");
    const last = model.requests.at(-1)!.messages.at(-1)!;
    expect(last).toMatchObject({ role: "tool", tool_call_id: "r1", content: original });
    // Clearing again finds nothing new to clear.
    expect(await session.clearToolResults({ keepLast: 1 })).toMatchObject({ cleared: 1 });
    await agent.close();
  });

  it("without the read_result tool, clearToolResults refuses and changes nothing", async () => {
    const agent = createAgent({ model: scriptedModel([call(1), { text: "ok" }]), tools: [note] });
    const session = agent.session("no-tool");
    await session.prompt("go");
    const before = session.entries().length;
    expect(await session.clearToolResults()).toMatchObject({ ok: false, code: "READ_RESULT_OFF" });
    expect(session.entries()).toHaveLength(before);
    await agent.close();
  });
});

describe("limits", () => {
  it("limits.maxTokens still works as the spend cap for one release, with a deprecation warning", async () => {
    const warn = vi.spyOn(process, "emitWarning").mockImplementation(() => {});
    const model = scriptedModel([
      { ...call(1), usage: { inputTokens: 80, outputTokens: 30 } },
      { text: "never asked" },
    ]);
    const agent = createAgent({ model, tools: [note], limits: { maxTokens: 100 } });
    expect(warn).toHaveBeenCalledWith(
      expect.stringMatching(/maxTokens.*deprecated.*maxSpendTokens/),
      expect.objectContaining({ type: "DeprecationWarning" }),
    );
    warn.mockRestore();
    const result = await agent.session("spend").prompt("go");
    expect(result).toMatchObject({ status: "budget_exhausted", steps: 1 });
    expect(result.reason).toMatch(/maxSpendTokens \(100\) reached: 110 tokens/);
    await agent.close();
  });
});

describe("automatic compaction, the threshold and inputs meanwhile", () => {
  it("by default a request is compacted first exactly when used + reserve exceeds 0.85 of the window", async () => {
    let main = 0;
    const model = scriptedModel(
      (request) => {
        if (request.tools.length === 0) return { text: "Read some notes; each says lorem ipsum." };
        main++;
        return main <= 40 ? call(main) : { text: "done" };
      },
      { contextWindow: 2000, maxOutputTokens: 200 },
    );
    const agent = createAgent({ model, tools: [note], limits: { maxSteps: 100 } });
    const session = agent.session("threshold");
    // After each measurement: did the turn compact before its next request?
    const seen: { over: boolean; compacted: boolean }[] = [];
    session.subscribe((e: AgentEvent) => {
      if (e.type === "context.measured")
        seen.push({ over: e.used + e.reserve > 0.85 * e.window, compacted: false });
      if (e.type === "context.compacted") seen[seen.length - 1]!.compacted = true;
    });
    expect((await session.prompt("read notes")).status).toBe("completed");
    expect(seen.filter((s) => s.compacted).length).toBeGreaterThanOrEqual(1);
    expect(seen.filter((s) => !s.over).length).toBeGreaterThanOrEqual(5);
    for (const [i, s] of seen.entries()) expect(s.compacted, `measurement ${i}`).toBe(s.over);
    await agent.close();
  });

  it("a steer that arrives while an automatic compaction runs is in the request right after it", async () => {
    let main = 0;
    let session!: ReturnType<ReturnType<typeof createAgent>["session"]>;
    let steered = false;
    const model = scriptedModel(
      (request) => {
        if (request.tools.length === 0) {
          if (!steered) {
            steered = true;
            setTimeout(() => void session.steer("also read note 99"), 5);
          }
          return { text: "Read some notes; each says lorem ipsum.", delayMs: 60 };
        }
        main++;
        return main <= 40 ? call(main) : { text: "done" };
      },
      { contextWindow: 2000, maxOutputTokens: 200 },
    );
    const agent = createAgent({ model, tools: [note], limits: { maxSteps: 100 } });
    session = agent.session("steer-during-compaction");
    expect((await session.prompt("read notes")).status).toBe("completed");
    const first = model.requests.findIndex((r) => r.tools.length === 0);
    expect(first).toBeGreaterThan(0);
    const next = model.requests[first + 1]!;
    expect(next.tools.length).toBeGreaterThan(0);
    const last = next.messages[next.messages.length - 1] as { role: string; content: unknown };
    expect(last.role).toBe("user");
    expect(JSON.stringify(last.content)).toContain("also read note 99");
    // Not seen before the compaction's request: it arrived while the summary ran.
    const before = model.requests.slice(0, first + 1);
    expect(before.some((r) => JSON.stringify(r.messages).includes("also read note 99"))).toBe(
      false,
    );
    expect(orphans(session.messages())).toEqual([]);
    await agent.close();
  });
});
