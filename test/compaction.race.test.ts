import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { seededIds } from "../actors/ids.ts";
import type { ChatMessage } from "../contracts/chat.ts";
import { toolCallsOf } from "../contracts/messages.ts";
import type { Model } from "../contracts/model.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { CutRule } from "../session/compaction-cuts.ts";
import type { LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";
import { failWithSchedule } from "./support/harness.ts";
import { cutsInsideBatch } from "./support/mutants/compaction-cuts-inside-batch.ts";

/**
 * Invariant 10 of docs/architecture.md with compaction BETWEEN STEPS OF A RUNNING TURN: a turn of several steps (1–3
 * parallel calls each) against a small window, so automatic compactions happen mid-turn; model
 * responses, tool completions, steering and an optional interrupt are scheduled tasks whose
 * order the fast-check scheduler picks. Checked from the log and the requests, not from the
 * code's own cut rule:
 * - every compaction's first kept entry leaves each batch whole: a result is kept exactly when
 *   its call's assistant message is kept (no orphan result, no call without its results);
 * - every request the model received pairs each call with its result, right after it.
 */

/** Why the compactions of `path` split a batch, or null. */
function splitBatch(path: readonly LogEntry[]): string | null {
  const pos = new Map(path.map((e, i) => [e.id, i]));
  const askedAt = new Map<string, number>();
  for (let i = 0; i < path.length; i++) {
    const e = path[i];
    if (e.type === "assistant_message")
      for (const c of toolCallsOf(e.content)) askedAt.set(c.id, i);
    if (e.type !== "compaction") continue;
    const keep = pos.get(e.firstKeptId)!;
    for (let j = 0; j < i; j++) {
      const r = path[j];
      if (r.type !== "call_result") continue;
      const a = askedAt.get(r.callId);
      if (a !== undefined && a < keep !== j < keep) {
        return `compaction ${e.id} keeps from ${e.firstKeptId}: result ${r.callId} and its call fall on different sides`;
      }
    }
  }
  return null;
}

/** Why `messages` break the pairing rule, or null. */
function unpaired(messages: readonly ChatMessage[]): string | null {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (m.role === "tool") return `a result (${m.tool_call_id}) without its call before it`;
    if (m.role === "assistant" && m.tool_calls?.length) {
      for (const [k, c] of m.tool_calls.entries()) {
        const r = messages[i + 1 + k];
        if (r?.role !== "tool" || r.tool_call_id !== c.id) return `call ${c.id} not answered next`;
      }
      i += m.tool_calls.length;
    }
  }
  return null;
}

interface Plan {
  steps: number[];
  /** Recent tokens each compaction keeps (0: it cuts at the latest point the rule allows). */
  keep: number;
  steers: number;
  interrupt: boolean;
}

async function runSession(
  s: fc.Scheduler,
  plan: Plan,
  cutPoints?: CutRule,
): Promise<string | undefined> {
  let step = 0;
  const inner = scriptedModel(
    (request) => {
      if (request.tools.length === 0) return { text: "Summary: notes were read." };
      const n = plan.steps[step++];
      if (n === undefined) return { text: "done" };
      return {
        toolCalls: Array.from({ length: n }, (_, k) => ({
          id: `c${step}_${k}`,
          name: "note",
          arguments: `{"n":${step * 10 + k}}`,
        })),
      };
    },
    { contextWindow: 700, maxOutputTokens: 60 },
  );
  // Every model response waits for its scheduled turn.
  const model: Model = {
    name: inner.name,
    contextWindow: inner.contextWindow,
    maxOutputTokens: inner.maxOutputTokens,
    async *stream(request) {
      await s.schedule(Promise.resolve(), request.tools.length ? "model answers" : "summary");
      yield* inner.stream(request);
    },
  };
  const note = defineTool({
    name: "note",
    description: "Reads a note.",
    parameters: z.object({ n: z.number() }),
    traits: { readOnly: true, concurrencySafe: true, risk: "low" },
    execute: async ({ n }, ctx) => {
      await s.schedule(Promise.resolve(), `tool ${ctx.callId}`);
      return `note ${n}: ${"lorem ipsum ".repeat(10)}`;
    },
  });
  const agent = createAgent({
    model,
    tools: [note],
    ids: seededIds(7),
    limits: { maxSteps: 40 },
    context: { keepRecentTokens: plan.keep, cutPoints },
  });
  const session = agent.session("race");
  const done = session.prompt("read the notes");
  for (let k = 0; k < plan.steers; k++) {
    s.schedule(Promise.resolve(), `steer ${k}`).then(() => session.steer(`also note ${k}`));
  }
  if (plan.interrupt) {
    s.schedule(Promise.resolve(), "interrupt").then(() => session.interrupt("stop"));
  }
  const out = await s.waitFor(done);
  await s.waitIdle();
  await session.awaitIdle();
  const problem =
    splitBatch(session.sessionLog.path()) ??
    inner.requests.map((r) => unpaired(r.messages)).find((p) => p !== null) ??
    (out.status === "failed" ? `the turn failed: ${out.reason}` : null);
  await agent.close();
  return problem ?? undefined;
}

const property = (cutPoints?: CutRule) =>
  fc.asyncProperty(
    fc.scheduler(),
    fc.record({
      steps: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 4, maxLength: 12 }),
      keep: fc.constantFrom(0, 60, 120),
      steers: fc.integer({ min: 0, max: 2 }),
      interrupt: fc.integer({ min: 0, max: 3 }).map((k) => k === 0),
    }),
    async (s, plan) => failWithSchedule(s, await runSession(s, plan, cutPoints)),
  );

describe("compaction between steps of a running turn (fast-check scheduler, real runtime)", () => {
  it("automatic compactions mid-turn never split a batch, and every request keeps calls paired with their results", async () => {
    await fc.assert(property(), { numRuns: 60, seed: 1015 });
  });

  it("the search catches a cut rule that cuts inside a batch", async () => {
    const result = await fc.check(property(cutsInsideBatch), { numRuns: 200, seed: 1015 });
    expect(result.failed).toBe(true);
    expect(String(result.errorInstance)).toMatch(/fall on different sides|without its call/);
  });
});
