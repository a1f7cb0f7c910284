import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { createTrace } from "../cli/trace.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";

/** A tool that always fails the same way. */
const broken = (runs: { n: number }) =>
  defineTool({
    name: "deploy",
    description: "Deploys.",
    parameters: z.object({ target: z.string(), force: z.boolean() }),
    traits: { risk: "low", concurrencySafe: true },
    execute: () => {
      runs.n++;
      throw new Error("permission denied: /srv is read-only");
    },
  });

/** The model asks the same call every step, with its keys in a different order each time. */
const sameCallForever = () =>
  scriptedModel((_req, i) => ({
    toolCalls: [
      {
        id: `c${i}`,
        name: "deploy",
        arguments: i % 2 ? '{"target":"prod","force":true}' : '{ "force": true, "target": "prod" }',
      },
    ],
  }));

const results = (entries: readonly LogEntry[]) =>
  entries.filter((e): e is Extract<LogEntry, { type: "call_result" }> => e.type === "call_result");

describe("loop guard, end to end", () => {
  it("the same call failing the same way: told to change approach at 3, the turn ends failed loop_detected at 6, shown in the trace", async () => {
    const runs = { n: 0 };
    const model = sameCallForever();
    const session = createAgent({ model, tools: [broken(runs)] }).session();
    const events: AgentEvent[] = [];
    let printed = "";
    const trace = createTrace({ out: { write: (c: string) => (printed += c) }, color: false });
    session.subscribe((e) => {
      events.push(e);
      trace.onEvent(e);
    });
    const out = await session.prompt("deploy it");
    expect(out.status).toBe("failed");
    expect(out.reason).toMatch(/^loop_detected: deploy failed the same way 6 times in a row/);
    expect(model.requests).toHaveLength(6);
    expect(runs.n).toBe(6);
    // The results stay the tools' own; the loop guard speaks in notes after them (the chart
    // decides, from the streak in its context; the runner writes the note).
    const messages = results(session.entries()).map((r) => (r.result.ok ? "" : r.result.message));
    expect(messages.join()).not.toMatch(/loop guard/);
    const notes = session.entries().flatMap((e) => (e.type === "note" ? [e] : []));
    expect(notes.map((n) => n.audience)).toEqual(["model", "model", "model", "model"]);
    for (const n of notes.slice(0, 3)) expect(n.text).toMatch(/loop guard.*change approach/);
    expect(notes[0].text).toMatch(/3 times in a row/);
    expect(notes[3].text).toMatch(/loop_detected/);
    // The model saw the warning in its next request, right after the result it is about.
    const next = model.requests[3].messages;
    const lastTool = next.findLastIndex((m) => m.role === "tool");
    expect(next[lastTool + 1]).toMatchObject({ role: "user" });
    expect(JSON.stringify(next[lastTool + 1])).toMatch(/loop guard.*3 times in a row/);
    const loops = events.filter((e) => e.type === "loop.detected");
    expect(loops.map((e) => [e.action, e.repeats])).toEqual([
      ["warned", 3],
      ["warned", 4],
      ["warned", 5],
      ["stopped", 6],
    ]);
    const end = session.entries().findLast((e) => e.type === "turn_end");
    expect(end).toMatchObject({
      status: "failed",
      reason: expect.stringMatching(/^loop_detected/),
    });
    expect(printed).toMatch(/⟲ deploy failed the same way 3 times in a row — the model is told/);
    expect(printed).toMatch(/⟲ loop detected: deploy failed the same way 6 times/);
    expect(printed).toMatch(/✘ turn failed: loop_detected/);
  });

  it("is configurable: { repeats: 2, failAfter: 3 } ends at the third; false lets the turn run to maxSteps", async () => {
    const runs = { n: 0 };
    const model = sameCallForever();
    const tight = createAgent({
      model,
      tools: [broken(runs)],
      loopGuard: { repeats: 2, failAfter: 3 },
    }).session();
    const out = await tight.prompt("go");
    expect(out).toMatchObject({ status: "failed", reason: expect.stringMatching(/3 times/) });
    expect(model.requests).toHaveLength(3);

    const model2 = sameCallForever();
    const off = createAgent({
      model: model2,
      tools: [broken(runs)],
      loopGuard: false,
      limits: { maxSteps: 9 },
    }).session();
    const out2 = await off.prompt("go");
    expect(out2.status).toBe("budget_exhausted");
    expect(model2.requests).toHaveLength(9);
    expect(JSON.stringify(off.entries())).not.toMatch(/loop guard/);
  });

  it("a call whose arguments never pass preparation, repeated, also ends the turn loop_detected", async () => {
    const runs = { n: 0 };
    const model = scriptedModel((_req, i) => ({
      toolCalls: [{ id: `c${i}`, name: "deploy", arguments: '{"target":"prod"}' }],
    }));
    const session = createAgent({ model, tools: [broken(runs)] }).session();
    const out = await session.prompt("go");
    expect(out).toMatchObject({
      status: "failed",
      reason: expect.stringMatching(/^loop_detected/),
    });
    expect(model.requests).toHaveLength(6);
    expect(runs.n).toBe(0);
    expect(results(session.entries())).toHaveLength(6);
    expect(results(session.entries())[5].result).toMatchObject({ code: "INVALID_ARGS" });
  });

  it("a different argument or a success in between restarts the count", async () => {
    const runs = { n: 0 };
    let calls = 0;
    const flaky = defineTool({
      name: "deploy",
      description: "Deploys.",
      parameters: z.object({ target: z.string() }),
      traits: { risk: "low", concurrencySafe: true },
      execute: ({ target }) => {
        runs.n++;
        calls++;
        if (calls % 4 === 0) return "deployed";
        throw new Error(`cannot deploy ${target}`);
      },
    });
    const model = scriptedModel((_req, i) =>
      i < 12
        ? { toolCalls: [{ id: `c${i}`, name: "deploy", arguments: '{"target":"prod"}' }] }
        : { text: "giving up" },
    );
    const session = createAgent({ model, tools: [flaky] }).session();
    const out = await session.prompt("go");
    expect(out.status).toBe("completed");
    expect(runs.n).toBe(12);
  });
});
