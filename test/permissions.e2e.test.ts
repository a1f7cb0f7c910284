import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { AgentEvent } from "../contracts/events.ts";
import type { PermissionReply, PermissionRequest } from "../contracts/permission.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";

function tools(ran: string[]) {
  const danger = defineTool({
    name: "danger",
    description: "A high-risk action.",
    parameters: z.object({ n: z.number() }),
    traits: { risk: "high", concurrencySafe: true },
    execute: ({ n }) => {
      ran.push(`danger ${n}`);
      return `danger ${n} done`;
    },
  });
  const safe = defineTool({
    name: "safe",
    description: "A low-risk read.",
    parameters: z.object({}),
    traits: { risk: "low", readOnly: true, concurrencySafe: true },
    execute: () => {
      ran.push("safe");
      return "safe done";
    },
  });
  return [danger, safe];
}

const results = (entries: readonly LogEntry[]) =>
  entries.filter((e) => e.type === "call_result") as Extract<LogEntry, { type: "call_result" }>[];

describe("permissions", () => {
  it("a denial without feedback ends the turn: nothing runs and the model is not asked again", async () => {
    const ran: string[] = [];
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "d1", name: "danger", arguments: '{"n":1}' },
          { id: "s1", name: "safe", arguments: "{}" },
        ],
      },
      { text: "should never be requested" },
    ]);
    const session = createAgent({
      model,
      tools: tools(ran),
      permissions: { ask: async () => ({ type: "deny" }) },
    }).session();
    const out = await session.prompt("go");
    expect(out.status).toBe("cancelled");
    expect(out.reason).toMatch(/declined/);
    expect(ran).toEqual([]);
    expect(model.requests).toHaveLength(1);
    expect(results(session.entries()).map((r) => r.result)).toEqual([
      expect.objectContaining({ code: "DENIED" }),
      expect.objectContaining({ code: "DENIED" }),
    ]);
  });

  it("a denial with feedback becomes the tool result the model sees, and the turn goes on", async () => {
    const ran: string[] = [];
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "d1", name: "danger", arguments: '{"n":1}' },
          { id: "s1", name: "safe", arguments: "{}" },
        ],
      },
      { text: "understood" },
    ]);
    const session = createAgent({
      model,
      tools: tools(ran),
      permissions: {
        ask: async () => ({ type: "deny_with_feedback", feedback: "use the staging copy instead" }),
      },
    }).session();
    expect((await session.prompt("go")).status).toBe("completed");
    expect(ran).toEqual(["safe"]);
    const toolMsgs = model.requests[1].messages.filter((m) => m.role === "tool");
    expect(toolMsgs[0].content).toContain("use the staging copy instead");
    expect(toolMsgs[1].content).toBe("safe done");
  });

  it("allow_always stops asking for that tool; a configured deny still wins", async () => {
    const ran: string[] = [];
    const asked: string[] = [];
    const model = scriptedModel([
      { toolCalls: [{ id: "d1", name: "danger", arguments: '{"n":1}' }] },
      { toolCalls: [{ id: "d2", name: "danger", arguments: '{"n":2}' }] },
      { text: "done" },
    ]);
    const session = createAgent({
      model,
      tools: tools(ran),
      permissions: {
        ask: async (r) => {
          asked.push(r.callId);
          return { type: "allow_always" };
        },
      },
    }).session();
    expect((await session.prompt("go")).status).toBe("completed");
    expect(asked).toEqual(["d1"]);
    expect(ran).toEqual(["danger 1", "danger 2"]);

    const ran2: string[] = [];
    const model2 = scriptedModel([
      { toolCalls: [{ id: "d3", name: "danger", arguments: '{"n":3}' }] },
      { text: "ok" },
    ]);
    const s2 = createAgent({
      model: model2,
      tools: tools(ran2),
      permissions: {
        rules: [{ tool: "danger", action: "deny" }],
        ask: async () => ({ type: "allow_always" }),
      },
    }).session();
    expect((await s2.prompt("go")).status).toBe("completed");
    expect(ran2).toEqual([]);
    expect(results(s2.entries())[0].result).toMatchObject({ code: "DENIED" });
  });

  it("allow_once approves only its own request; the others keep waiting, and a later deny reaches all of them", async () => {
    const ran: string[] = [];
    const answers = new Map<string, (r: PermissionReply) => void>();
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "a", name: "danger", arguments: '{"n":1}' },
          { id: "b", name: "danger", arguments: '{"n":2}' },
          { id: "c", name: "danger", arguments: '{"n":3}' },
        ],
      },
      { text: "ok" },
    ]);
    const session = createAgent({
      model,
      tools: tools(ran),
      permissions: {
        ask: (r) => new Promise<PermissionReply>((resolve) => answers.set(r.callId, resolve)),
      },
    }).session();
    const events: AgentEvent[] = [];
    session.subscribe((e) => {
      events.push(e);
    });
    const turn = session.prompt("go");
    await vi.waitFor(() => expect(answers.size).toBe(3));
    answers.get("b")!({ type: "allow_once" });
    await new Promise((r) => setTimeout(r, 10));
    // Only b was approved: a and c still wait for their own replies.
    expect((await session.pendingPermissions()).map((r) => r.callId)).toEqual(["a", "c"]);
    answers.get("a")!({ type: "deny" });
    expect((await turn).status).toBe("cancelled");
    expect(await session.pendingPermissions()).toEqual([]);
    expect(ran).toEqual([]);
    const decided = events.filter((e) => e.type === "permission.decided");
    expect(decided.map((e) => [e.callId, e.decision.type, e.source])).toEqual([
      ["b", "allow", { type: "reply", reply: "allow_once" }],
      ["a", "declined", { type: "reply", reply: "deny" }],
      ["c", "declined", { type: "spread", reply: "deny", by: "a.perm" }],
    ]);
    // Every decision is in the log, projected nowhere.
    const logged = session.entries().filter((e) => e.type === "permission_decision");
    expect(logged.map((e) => [e.callId, e.decision.type, e.source.type])).toEqual([
      ["b", "allow", "reply"],
      ["a", "declined", "reply"],
      ["c", "declined", "spread"],
    ]);
    expect(JSON.stringify(session.messages())).not.toMatch(/permission_decision|a\.perm/);
  });

  it("allow_always approves the pending requests of its tool and leaves another tool's waiting", async () => {
    const ran: string[] = [];
    const answers = new Map<string, (r: PermissionReply) => void>();
    const other = defineTool({
      name: "other",
      description: "Also dangerous.",
      parameters: z.object({}),
      traits: { risk: "high", concurrencySafe: true },
      execute: () => {
        ran.push("other");
        return "other done";
      },
    });
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "a", name: "danger", arguments: '{"n":1}' },
          { id: "o", name: "other", arguments: "{}" },
          { id: "b", name: "danger", arguments: '{"n":2}' },
        ],
      },
      { text: "ok" },
    ]);
    const session = createAgent({
      model,
      tools: [...tools(ran), other],
      permissions: {
        ask: (r) => new Promise<PermissionReply>((resolve) => answers.set(r.callId, resolve)),
      },
    }).session();
    const turn = session.prompt("go");
    await vi.waitFor(() => expect(answers.size).toBe(3));
    answers.get("a")!({ type: "allow_always" });
    await new Promise((r) => setTimeout(r, 10));
    expect((await session.pendingPermissions()).map((r) => r.callId)).toEqual(["o"]);
    answers.get("o")!({ type: "deny_with_feedback", feedback: "not now" });
    expect((await turn).status).toBe("completed");
    expect(ran.sort()).toEqual(["danger 1", "danger 2"]);
    const logged = session.entries().filter((e) => e.type === "permission_decision");
    expect(logged.map((e) => [e.callId, e.decision.type, e.source])).toEqual([
      ["a", "allow", { type: "reply", reply: "allow_always" }],
      ["b", "allow", { type: "spread", reply: "allow_always", by: "a.perm" }],
      ["o", "corrected", { type: "reply", reply: "deny_with_feedback" }],
    ]);
  });

  it("replyPermission refuses a request answered already with ALREADY_DECIDED, and an id never asked with UNKNOWN_REQUEST", async () => {
    const ran: string[] = [];
    const model = scriptedModel([
      { toolCalls: [{ id: "d1", name: "danger", arguments: '{"n":1}' }] },
      { text: "done" },
    ]);
    const session = createAgent({
      model,
      tools: tools(ran),
      permissions: { ask: async () => ({ type: "allow_once" }) },
    }).session();
    expect((await session.prompt("go")).status).toBe("completed");
    expect(await session.replyPermission("d1.perm", { type: "allow_once" })).toEqual({
      ok: false,
      code: "ALREADY_DECIDED",
      message: expect.stringMatching(/d1\.perm.*decided already \(allow, by reply\)/),
    });
    expect(await session.replyPermission("d9.perm", { type: "allow_once" })).toEqual({
      ok: false,
      code: "UNKNOWN_REQUEST",
      message: expect.stringMatching(/d9\.perm.*pendingPermissions/),
    });
  });

  it("a readOnly tool without a declared risk runs without asking; a rule or a declared risk still asks", async () => {
    const ran: string[] = [];
    const reader = (name: string, traits: { risk?: "high" }) =>
      defineTool({
        name,
        description: "Reads something.",
        parameters: z.object({}),
        traits: { readOnly: true, concurrencySafe: true, ...traits },
        execute: () => {
          ran.push(name);
          return `${name} read`;
        },
      });
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "r", name: "reader", arguments: "{}" },
          { id: "s", name: "secrets", arguments: "{}" },
          { id: "w", name: "watched", arguments: "{}" },
        ],
      },
      { text: "done" },
    ]);
    const asked: PermissionRequest[] = [];
    const session = createAgent({
      model,
      tools: [reader("reader", {}), reader("secrets", { risk: "high" }), reader("watched", {})],
      permissions: {
        rules: [{ tool: "watched", action: "ask" }],
        ask: async (r) => {
          asked.push(r);
          return { type: "allow_once" };
        },
      },
    }).session();
    expect((await session.prompt("go")).status).toBe("completed");
    expect(asked.map((r) => [r.tool, r.risk])).toEqual([
      ["secrets", "high"],
      ["watched", "low"],
    ]);
    expect(ran.sort()).toEqual(["reader", "secrets", "watched"]);
  });
});
