import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { killableStore, scheduledModel, scheduledTool } from "../actors/fault-injection.ts";
import { seededIds } from "../actors/ids.ts";
import type { ChatMessage } from "../contracts/chat.ts";
import { systemClock } from "../contracts/clock.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { EntryOf, LogEntry } from "../session/entries.ts";
import { SessionLog } from "../session/log.ts";
import { NO_RESULT_TEXT } from "../session/projection.ts";
import type { SessionStore } from "../session/store.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { defineTool } from "../tools/define-tool.ts";
import { wellFormedViolation } from "./session-random-log.ts";
import { failWithSchedule } from "./support/harness.ts";
import { type CrashMutant, crashMutants } from "./support/mutants/crash.mutants.ts";

/**
 * Invariants 1 and 8 of docs/architecture.md as an interleaving search over the real runtime: a session runs two steps
 * of tool calls (an idempotent tool and a plain one); the scheduler orders every model answer,
 * every tool's return, an interrupt and a kill point (the store stops acknowledging: what was
 * durable then is all a new process sees). The session is then reopened on what survived,
 * which runs crash recovery, and:
 * - invariant 1 of docs/architecture.md: every tool call in the projection has exactly one result, and no call that
 *   started is left with the "no result recorded" patch;
 * - invariant 8 of docs/architecture.md: after the kill, a call with a logged start runs again only if its start record
 *   AND its tool (as registered at recovery, which may differ) say idempotent, with the same key,
 *   and at most once.
 */
interface Execution {
  callId: string;
  tool: string;
  key: string;
  afterKill: boolean;
}

async function scenario(
  s: fc.Scheduler,
  plan: { calls: ("idem" | "plain")[][]; interrupt: boolean; plainIdempotentAtRecovery: boolean },
  mutant?: CrashMutant,
): Promise<string | undefined> {
  const executions: Execution[] = [];
  let killed = false;
  const tools = (plainIdempotent: boolean) =>
    (["idem", "plain"] as const).map((name) =>
      scheduledTool(
        defineTool({
          name,
          description: `${name} work`,
          parameters: z.object({ n: z.number() }),
          traits: {
            concurrencySafe: true,
            idempotent: name === "idem" || plainIdempotent,
          },
          execute: (_args, ctx) => {
            executions.push({
              callId: ctx.callId,
              tool: name,
              key: ctx.idempotencyKey,
              afterKill: killed,
            });
            return `${name} done`;
          },
        }),
        s,
      ),
    );
  const script = scriptedModel([
    ...plan.calls.map((step, k) => ({
      toolCalls: step.map((name, i) => ({
        id: `c${k}${i}`,
        name,
        arguments: JSON.stringify({ n: i }),
      })),
    })),
    { text: "finished" },
  ]);
  const durable = memoryStore();
  const dying = killableStore(durable);
  const session = createAgent({
    model: scheduledModel(script, s),
    tools: tools(false),
    store: dying.store,
    ids: seededIds(8),
  }).session("k");
  const ended = session.prompt("go").then(() => "ended" as const);
  const kill = s.schedule(Promise.resolve(), "kill").then(() => {
    killed = true;
    dying.kill();
    return "killed" as const;
  });
  if (plan.interrupt) s.schedule(Promise.resolve(), "interrupt").then(() => session.interrupt());
  await s.waitFor(Promise.race([ended, kill]));
  await s.waitFor(kill);
  const survived = await durable.load("k");
  const store: SessionStore = mutant?.store ? mutant.store(durable) : durable;

  // A new process: the tools as registered now (the plain tool may have become idempotent).
  killed = true;
  let messages: readonly ChatMessage[];
  let entries: readonly LogEntry[];
  if (mutant?.skipRecovery) {
    const log = await SessionLog.open({
      sessionId: "k",
      store,
      clock: systemClock,
      ids: seededIds(9),
    });
    messages = log.messages();
    entries = log.entries();
  } else {
    const reopened = createAgent({
      model: script,
      tools: tools(plan.plainIdempotentAtRecovery),
      store,
      ids: seededIds(9),
    }).session("k");
    await s.waitFor(reopened.ready);
    messages = reopened.messages();
    entries = reopened.entries();
  }
  await s.waitIdle();

  const bad = wellFormedViolation(messages);
  if (bad) return `invariant 1 of docs/architecture.md broken: ${bad}`;
  const started = survived.filter((e): e is EntryOf<"call_started"> => e.type === "call_started");
  for (const m of messages) {
    if (m.role === "tool" && started.some((e) => e.callId === m.tool_call_id)) {
      if (m.content === NO_RESULT_TEXT)
        return `invariant 1 of docs/architecture.md broken: ${m.tool_call_id} started but has no outcome after recovery`;
    }
  }
  const rerun = executions.filter((x) => x.afterKill);
  for (const x of rerun) {
    const start = started.find((e) => e.callId === x.callId);
    if (!start) continue; // never started before the kill: not a re-execution
    const toolIdempotent = x.tool === "idem" || plan.plainIdempotentAtRecovery;
    if (!start.idempotent || !toolIdempotent)
      return `invariant 8 of docs/architecture.md broken: ${x.callId} (${x.tool}, logged idempotent ${start.idempotent}) ran again after the crash`;
    if (x.key !== start.idempotencyKey)
      return `invariant 8 of docs/architecture.md broken: ${x.callId} re-ran with key ${x.key}, logged ${start.idempotencyKey}`;
    if (rerun.filter((y) => y.callId === x.callId).length > 1)
      return `invariant 8 of docs/architecture.md broken: ${x.callId} re-ran twice`;
  }
  const results = entries.filter((e) => e.type === "call_result").map((e) => e.callId);
  if (new Set(results).size !== results.length) return "a call has two results in the log";
  return undefined;
}

const planArb = fc.record({
  calls: fc.array(
    fc.array(fc.constantFrom("idem" as const, "plain" as const), { minLength: 1, maxLength: 2 }),
    {
      minLength: 1,
      maxLength: 2,
    },
  ),
  interrupt: fc.boolean(),
  plainIdempotentAtRecovery: fc.boolean(),
});

const property = (mutant?: CrashMutant) =>
  fc.asyncProperty(fc.scheduler(), planArb, async (s, plan) => {
    failWithSchedule(s, await scenario(s, plan, mutant));
  });

describe("a kill at any point of a turn, then recovery (invariants 1 and 8 of docs/architecture.md, interleaving search)", () => {
  it("every call in the projection has one result and no started call is re-run unless idempotent by its record and its tool", async () => {
    await fc.assert(property(), { numRuns: 150, seed: 18 });
  });

  it("the search catches a store that reads every start record as idempotent (invariant 8 of docs/architecture.md)", async () => {
    const out = await fc.check(property(crashMutants.everyStartIdempotent), {
      numRuns: 200,
      seed: 18,
    });
    expect(out.failed).toBe(true);
    expect(String(out.errorInstance)).toMatch(/invariant 8 of docs\/architecture\.md/);
  });

  it("the search catches a reopen that skips crash recovery (invariant 1 of docs/architecture.md)", async () => {
    const out = await fc.check(property(crashMutants.skipsRecovery), { numRuns: 200, seed: 18 });
    expect(out.failed).toBe(true);
    expect(String(out.errorInstance)).toMatch(/invariant 1 of docs\/architecture\.md/);
  });
});
