import { describe, expect, it } from "vitest";
import { createActor, type InspectionEvent } from "xstate";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { batchMachine } from "../machines/batch.machine.ts";
import { toolCallMachine } from "../machines/tool-call.machine.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { defineTool } from "../tools/define-tool.ts";
import { batchMutants } from "./support/mutants/batch.mutants.ts";

/**
 * XState memoises transition candidates per state node and event TYPE for the life of a machine
 * definition, and every session in a process shares Keel's definitions. An event type that is
 * new for every tool call (e.g. `xstate.done.actor.<callId>`) is therefore a leak of a few
 * hundred bytes per call for the life of the process (`bench/extras/leak.ts` measures it). So:
 * the set of event types any Keel actor receives must not grow with the number of calls.
 */
const touch = defineTool({
  name: "touch",
  description: "Touches a file.",
  parameters: z.object({ path: z.string() }),
  traits: { concurrencySafe: true, readOnly: true, risk: "low" },
  execute: async () => "ok",
});

/** Every event type any actor received in one prompt of `steps` steps × 3 calls (unique ids). */
async function eventTypes(steps: number, tag: string) {
  const types = new Set<string>();
  const model = scriptedModel(
    (_request, index) =>
      index >= steps
        ? { text: "done" }
        : {
            toolCalls: [0, 1, 2].map((i) => ({
              id: `call_${tag}_${index}_${i}`,
              name: "touch",
              arguments: '{"path":"a"}',
            })),
          },
    { record: "none" },
  );
  const agent = createAgent({
    model,
    tools: [touch],
    store: memoryStore(),
    limits: { maxSteps: steps + 1 },
    maxParallelToolCalls: 2,
    inspect: {
      observe: (event: InspectionEvent) => {
        if (event.type === "@xstate.event") types.add(event.event.type);
      },
      publish: () => {},
    },
  });
  const out = await agent.session().prompt("go");
  await agent.close();
  expect(out.status).toBe("completed");
  return types;
}

/** Event types a batch receives in 1 round vs 4 more rounds (3 calls each, unique ids): the new ones. */
function batchEventTypesGrow(logic: typeof batchMachine): string[] {
  const types = new Set<string>();
  const toolCall = toolCallMachine.provide({
    actions: {
      recordStart: ({ self }) => self.send({ type: "call.recorded" }),
      execute: ({ self }) =>
        self.send({ type: "call.complete", result: { ok: true, content: "" } }),
    },
  });
  const batch = createActor(logic.provide({ actors: { toolCall } }), {
    input: { stopDeadlineMs: 1000, maxParallelToolCalls: 2 },
    inspect: (event) => {
      if (event.type === "@xstate.event") types.add(event.event.type);
    },
  }).start();
  const round = (tag: string) =>
    batch.send({
      type: "batch.run",
      calls: [0, 1, 2].map((i) => ({
        callId: `call_${tag}_${i}`,
        name: "touch",
        concurrencySafe: true,
        cancellable: true,
        executionMode: "parallel" as const,
      })),
    });
  round("a_0");
  const first = new Set(types);
  for (const tag of ["b_0", "c_0", "d_0", "e_0"]) round(tag);
  return [...types].filter((t) => !first.has(t));
}

describe("event types are bounded: XState's per-type caches cannot grow with the calls", () => {
  it("a prompt of 12 steps uses exactly the event types of a prompt of 2 steps (other call ids)", async () => {
    const few = await eventTypes(2, "a");
    const many = await eventTypes(12, "b");
    expect([...many].filter((t) => !few.has(t))).toEqual([]);
    // The child done events are addressed by slot, bounded by maxParallelToolCalls (2).
    expect([...many].filter((t) => t.startsWith("xstate.done.actor.slot")).sort()).toEqual([
      "xstate.done.actor.slot0",
      "xstate.done.actor.slot1",
    ]);
  });

  it("the same check on a batch alone passes for the real batch and catches the mutant that names actors by call id", () => {
    expect(batchEventTypesGrow(batchMachine)).toEqual([]);
    expect(batchEventTypesGrow(batchMutants.childIdPerCall)).toContain(
      "xstate.done.actor.call_b_0_0",
    );
  });
});
