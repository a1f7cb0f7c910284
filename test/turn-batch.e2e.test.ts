import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { defineTool } from "../tools/define-tool.ts";
import type { ToolTraits } from "../tools/types.ts";

/** A tool that records how many calls run at once; each call yields a few macrotasks. */
function tracked(
  name: string,
  traits: ToolTraits,
  log: { running: number; max: number; order: string[] },
) {
  return defineTool({
    name,
    description: `${name} (tracked)`,
    parameters: z.object({ id: z.string() }),
    traits,
    execute: async ({ id }) => {
      log.running++;
      log.max = Math.max(log.max, log.running);
      log.order.push(`start ${id}`);
      for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
      log.order.push(`end ${id}`);
      log.running--;
      return id;
    },
  });
}

const calls = (specs: [string, string][]) =>
  specs.map(([name, id]) => ({ id, name, arguments: JSON.stringify({ id }) }));

describe("batches end to end", () => {
  it("safe calls overlap; a sequential tool makes the whole batch run one at a time in call order", async () => {
    const par = { running: 0, max: 0, order: [] as string[] };
    const model = scriptedModel([
      {
        toolCalls: calls([
          ["safe", "a"],
          ["safe", "b"],
          ["safe", "c"],
        ]),
      },
      { text: "ok" },
    ]);
    await createAgent({ model, tools: [tracked("safe", { concurrencySafe: true }, par)] })
      .session()
      .prompt("go");
    expect(par.max).toBe(3);

    const seq = { running: 0, max: 0, order: [] as string[] };
    const model2 = scriptedModel([
      {
        toolCalls: calls([
          ["safe", "a"],
          ["ordered", "b"],
          ["safe", "c"],
        ]),
      },
      { text: "ok" },
    ]);
    const tools = [
      tracked("safe", { concurrencySafe: true }, seq),
      tracked("ordered", { concurrencySafe: true, executionMode: "sequential" }, seq),
    ];
    await createAgent({ model: model2, tools }).session().prompt("go");
    expect(seq.max).toBe(1);
    expect(seq.order).toEqual(["start a", "end a", "start b", "end b", "start c", "end c"]);
  });

  it("an unsafe call never overlaps another call", async () => {
    const log = { running: 0, max: 0, order: [] as string[] };
    const model = scriptedModel([
      {
        toolCalls: calls([
          ["safe", "a"],
          ["safe", "b"],
          ["unsafe", "x"],
          ["safe", "c"],
          ["safe", "d"],
        ]),
      },
      { text: "ok" },
    ]);
    const tools = [tracked("safe", { concurrencySafe: true }, log), tracked("unsafe", {}, log)];
    await createAgent({ model, tools }).session().prompt("go");
    const x = log.order.indexOf("start x");
    expect(log.order.slice(x, x + 2)).toEqual(["start x", "end x"]);
    expect(log.order.slice(0, x).filter((e) => e.startsWith("end"))).toHaveLength(2);
  });

  it("progress reported after a call settled is ignored", async () => {
    let late: (p: unknown) => void = () => {};
    const tool = defineTool({
      name: "chatty",
      description: "Reports progress, then keeps talking after it returned.",
      parameters: z.object({}),
      execute: (_a, ctx) => {
        ctx.onUpdate("working");
        late = ctx.onUpdate;
        return "done";
      },
    });
    const model = scriptedModel([
      { toolCalls: [{ id: "t", name: "chatty", arguments: "{}" }] },
      { text: "ok" },
    ]);
    const session = createAgent({ model, tools: [tool] }).session();
    const updates: unknown[] = [];
    session.subscribe((e: AgentEvent) => {
      if (e.type === "call.updated") updates.push(e.progress);
    });
    await session.prompt("go");
    late("after the end");
    expect(updates).toEqual(["working"]);
  });
});
