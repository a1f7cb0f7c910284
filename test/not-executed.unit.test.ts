import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { NOT_EXECUTED, notExecuted } from "../contracts/tool-result.ts";
import { cancelledBeforeStart } from "../machines/tool-call.machine.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { EntryOf } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";
import { truncatedCallResult } from "../tools/prepare/truncated-call.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import { createRegistry } from "../tools/registry.ts";

const echo = defineTool({
  name: "echo",
  description: "Echoes.",
  parameters: z.object({ text: z.string() }),
  traits: { concurrencySafe: true, risk: "low" },
  execute: ({ text }) => text,
});
const danger = defineTool({
  name: "danger",
  description: "A high-risk action.",
  parameters: z.object({}),
  traits: { risk: "high" },
  execute: () => "ran",
});

describe("not executed", () => {
  it("notExecuted builds the one text form `not executed: <why>`", () => {
    expect(notExecuted("CANCELLED", "cancelled before start")).toEqual({
      ok: false,
      code: "CANCELLED",
      message: "not executed: cancelled before start",
      retryable: false,
    });
    expect(notExecuted("CANCELLED", "x", { retryable: true }).retryable).toBe(true);
  });

  it("every synthetic result of a call that never ran begins with `not executed: `", () => {
    const registry = createRegistry([echo]);
    const prepared = [
      prepareCall({ id: "a", name: "nope", argumentsText: "{}" }, registry),
      prepareCall({ id: "b", name: "echo", argumentsText: "{" }, registry),
      prepareCall({ id: "c", name: "echo", argumentsText: '{"text":1}' }, registry),
      prepareCall({ id: "d", name: "echo", argumentsText: "[1]" }, registry),
    ];
    const results = [
      cancelledBeforeStart,
      truncatedCallResult({ id: "t", function: { name: "echo", arguments: '{"te' } }),
      ...prepared.map((p) => (p.ok ? undefined : p.error)),
    ];
    for (const r of results) {
      expect(r?.ok).toBe(false);
      expect(r && !r.ok ? r.message : "").toMatch(/^not executed: [a-z]/);
    }
  });

  it("in a session, a result says `not executed` exactly when its call's outcome is not_executed", async () => {
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "u1", name: "nope", arguments: "{}" },
          { id: "i1", name: "echo", arguments: '{"text":' },
          { id: "e1", name: "echo", arguments: '{"text":"hi"}' },
          { id: "d1", name: "danger", arguments: "{}" },
        ],
      },
      { toolCalls: [{ id: "t1", name: "echo", arguments: '{"text":"cut' }], finish: "length" },
      { toolCalls: [{ id: "d2", name: "danger", arguments: "{}" }] },
      { text: "done" },
    ]);
    let asked = 0;
    const session = createAgent({
      model,
      tools: [echo, danger],
      permissions: {
        ask: async () =>
          ++asked === 1 ? { type: "deny_with_feedback", feedback: "not now" } : { type: "deny" },
      },
    }).session();
    expect((await session.prompt("go")).status).toBe("cancelled");
    const results = session
      .entries()
      .filter((e): e is EntryOf<"call_result"> => e.type === "call_result");
    // Written in settlement order, not call order.
    expect(results.map((r) => `${r.callId}:${r.outcome}`).sort()).toEqual([
      "d1:not_executed",
      "d2:not_executed",
      "e1:completed",
      "i1:not_executed",
      "t1:not_executed",
      "u1:not_executed",
    ]);
    for (const r of results) {
      const text = r.result.ok ? r.result.content : r.result.message;
      expect(text.startsWith(NOT_EXECUTED)).toBe(r.outcome === "not_executed");
    }
    const d1 = results.find((r) => r.callId === "d1")!.result;
    expect(d1.ok ? "" : d1.message).toBe("not executed: the user declined this call: not now");
  });
});
