import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { seededIds } from "../actors/ids.ts";
import type { ChatMessage } from "../contracts/chat.ts";
import type { Model } from "../contracts/model.ts";
import type { turnMachine } from "../machines/turn.machine.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";
import { failWithSchedule } from "./support/harness.ts";
import { steersMidBatchTurnMachine } from "./support/mutants/turn.mutants.ts";

/**
 * A steer never lands between a call and its result: in the log, no user message is written
 * while any tool call of the last assistant message still lacks its result; and in the
 * projection every tool call is followed by its results.
 */
function steerBetweenCallAndResult(
  entries: readonly LogEntry[],
  messages: readonly ChatMessage[],
): string | undefined {
  const open = new Set<string>();
  for (const e of entries) {
    if (e.type === "assistant_message")
      for (const c of e.content) if (c.type === "tool-call") open.add(c.id);
    if (e.type === "call_result") open.delete(e.callId);
    if (e.type === "user_message" && open.size > 0) {
      return `"${e.text}" was written while ${[...open].join(", ")} had no result`;
    }
  }
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (m.role !== "assistant" || !m.tool_calls?.length) continue;
    for (let j = 1; j <= m.tool_calls.length; j++) {
      const next = messages[i + j];
      if (next?.role !== "tool") return `message ${i + j} is ${next?.role}, expected a tool result`;
    }
  }
  return undefined;
}

async function scenario(
  s: fc.Scheduler,
  steps: number,
  steerAt: number[],
  followUps: number,
  machine?: typeof turnMachine,
) {
  const tool = defineTool({
    name: "work",
    description: "Scheduled work.",
    parameters: z.object({}),
    traits: { concurrencySafe: true },
    execute: async (_a, ctx) => {
      await s.schedule(Promise.resolve(), `tool ${ctx.callId}`);
      return "ok";
    },
  });
  const script = scriptedModel((_req, i) =>
    i % (steps + 1) < steps
      ? {
          toolCalls: [
            { name: "work", arguments: "{}" },
            { name: "work", arguments: "{}" },
          ],
        }
      : { text: `end ${i}` },
  );
  // The model answers when the scheduler says so: inputs can arrive while it samples.
  const model: Model = {
    name: "scheduled",
    async *stream(request) {
      await s.schedule(Promise.resolve(), `model answers ${request.attemptId}`);
      yield* script.stream(request);
    },
  };
  const session = createAgent({
    model,
    tools: [tool],
    ids: seededIds(3),
    turnMachine: machine,
  }).session("r");
  const done = session.prompt("go");
  for (const [k, at] of steerAt.entries()) {
    s.schedule(Promise.resolve(), `steer ${k} (${at})`).then(() => session.steer(`steer ${k}`));
  }
  for (let k = 0; k < followUps; k++) {
    s.schedule(Promise.resolve(), `follow-up ${k}`).then(() => session.followUp(`follow-up ${k}`));
  }
  await s.waitFor(done);
  await s.waitIdle();
  await session.awaitIdle();
  const entries = session.entries();
  const problem = steerBetweenCallAndResult(entries, session.messages());
  if (problem) return problem;
  // Follow-ups start turns: each follow-up's user message comes right after a turn_start.
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i] as LogEntry;
    if (e.type === "user_message" && e.text.startsWith("follow-up")) {
      if (entries[i - 1]?.type !== "turn_start") return `follow-up "${e.text}" landed mid-turn`;
    }
  }
  if (session.queued().length > 0) return `${session.queued().length} inputs never consumed`;
  return undefined;
}

const property = (machine?: typeof turnMachine) =>
  fc.asyncProperty(
    fc.scheduler(),
    fc.integer({ min: 1, max: 3 }),
    fc.array(fc.nat(5), { minLength: 1, maxLength: 3 }),
    fc.integer({ min: 0, max: 2 }),
    async (s, steps, steerAt, followUps) => {
      const problem = await scenario(s, steps, steerAt, followUps, machine);
      failWithSchedule(s, problem);
    },
  );

describe("steering and follow-ups at random arrival times (invariant 11 of docs/architecture.md)", () => {
  it("steering never lands between a call and its result; follow-ups only after a natural end; every input is consumed", async () => {
    await fc.assert(property(), { numRuns: 100, seed: 11 });
  });

  it("the property catches a turn that reads steering while a batch runs", async () => {
    const result = await fc.check(property(steersMidBatchTurnMachine), { numRuns: 200, seed: 11 });
    expect(result.failed).toBe(true);
  });
});
