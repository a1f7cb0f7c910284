import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { AgentEvent, InspectSink } from "../actors/events.ts";
import { systemClock } from "../contracts/clock.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { defineTool } from "../tools/define-tool.ts";

const echo = defineTool({
  name: "echo",
  description: "Echoes.",
  parameters: z.object({ text: z.string() }),
  traits: { concurrencySafe: true, risk: "low" },
  execute: ({ text }) => text,
});

describe("event stamping", () => {
  it("every event is stamped once: the inspector's sink and every listener get the same object, with sessionId and at", async () => {
    const published: AgentEvent[] = [];
    const sink: InspectSink = { observe: () => {}, publish: (e) => published.push(e) };
    let now = 1000;
    const clock = { ...systemClock, now: () => now++ };
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"hi"}' }] },
      { text: "done" },
    ]);
    const session = createAgent({ model, tools: [echo], inspect: sink, clock }).session("s1");
    const heard: AgentEvent[] = [];
    session.subscribe((e) => heard.push(e));
    await session.prompt("go");
    expect(heard.length).toBeGreaterThan(5);
    expect(published).toHaveLength(heard.length);
    heard.forEach((e, i) => {
      expect(published[i]).toBe(e);
      expect(e.sessionId).toBe("s1");
      expect(typeof e.at).toBe("number");
    });
    // The session's own events (the inbox) reach the inspector too.
    expect(published.map((e) => e.type)).toContain("inbox.received");
    // Stamped in emission order on one clock: never re-stamped later.
    const ats = heard.map((e) => e.at);
    expect(ats).toEqual([...ats].sort((a, b) => a - b));
  });

  it("the inspector alone (no listener) still gets every event, stamped", async () => {
    const published: AgentEvent[] = [];
    const sink: InspectSink = { observe: () => {}, publish: (e) => published.push(e) };
    const session = createAgent({
      model: scriptedModel([{ text: "hi" }]),
      inspect: sink,
    }).session();
    await session.prompt("go");
    expect(published.map((e) => e.type)).toEqual(
      expect.arrayContaining(["inbox.received", "turn.started", "turn.ended"]),
    );
    for (const e of published) expect(typeof e.at).toBe("number");
  });
});
