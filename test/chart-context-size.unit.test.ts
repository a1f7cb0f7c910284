import { describe, expect, it } from "vitest";
import type { InspectionEvent } from "xstate";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { InspectSink } from "../actors/events.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { defineTool } from "../tools/define-tool.ts";

/**
 * XState's `assign` copies the whole context with `Object.assign({}, context, update)`. V8 turns
 * an object built that way into a dictionary once it holds 20 properties, and every later copy
 * and read of it is then about 20 times slower (12 µs a copy instead of 0.6 µs; bench/FIGURES.md,
 * "Costs behind code choices"). A chart's context past 19 fields made every step 1.3× slower
 * before; this keeps each chart that runs a turn under the cliff.
 */
const V8_FAST_LIMIT = 19;

const echo = defineTool({
  name: "echo",
  description: "Echoes, or fails on `fail`.",
  parameters: z.object({ text: z.string() }),
  traits: { concurrencySafe: true, risk: "low" },
  execute: ({ text }) => {
    if (text === "fail") throw new Error("failed");
    return text;
  },
});

describe("chart contexts stay small enough for V8's fast objects", () => {
  it(`every actor of a turn with tool calls, a failure and a retry-free end has ≤ ${V8_FAST_LIMIT} context fields`, async () => {
    const widest = new Map<string, number>();
    const sink: InspectSink = {
      observe: (event: InspectionEvent) => {
        if (event.type !== "@xstate.snapshot") return;
        const context = (event.snapshot as { context?: unknown }).context;
        if (context === null || typeof context !== "object") return;
        const id = (event.actorRef as { logic?: { id?: string } }).logic?.id ?? "?";
        widest.set(id, Math.max(widest.get(id) ?? 0, Object.keys(context).length));
      },
      publish: () => {},
    };
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "c1", name: "echo", arguments: '{"text":"hi"}' },
          { id: "c2", name: "echo", arguments: '{"text":"fail"}' },
        ],
      },
      { toolCalls: [{ id: "c3", name: "echo", arguments: '{"text":"fail"}' }] },
      { text: "done" },
    ]);
    const agent = createAgent({ model, tools: [echo], inspect: sink });
    const out = await agent.session().prompt("go");
    expect(out.status).toBe("completed");
    await agent.close();
    // The charts a turn runs are all seen, so a new field in any of them is counted.
    expect([...widest.keys()]).toEqual(
      expect.arrayContaining(["turn", "batch", "toolCall", "session"]),
    );
    for (const [id, fields] of widest) {
      expect({ id, fields }).toEqual({
        id,
        fields: expect.toSatisfy((n: number) => n <= V8_FAST_LIMIT),
      });
    }
  });
});
