import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SimulatedClock } from "xstate";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { seededIds } from "../actors/ids.ts";
import type { AgentEvent } from "../contracts/events.ts";
import type { turnMachine } from "../machines/turn.machine.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";
import { failWithSchedule } from "./support/harness.ts";
import { abandonsBatchTurnMachine } from "./support/mutants/turn.mutants.ts";

interface CallSpec {
  safe: boolean;
  cancellable: boolean;
  honoursAbort: boolean;
  fails: boolean;
  key: string | undefined;
}

const callArb: fc.Arbitrary<CallSpec> = fc.record({
  safe: fc.boolean(),
  cancellable: fc.boolean(),
  honoursAbort: fc.boolean(),
  fails: fc.boolean(),
  key: fc.constantFrom(undefined, "a", "b"),
});

/**
 * One turn whose tool calls, interrupt and clock steps are all scheduled tasks: the fast-check
 * scheduler picks their order. Returns a problem sentence, or undefined when the invariants hold.
 */
async function runTurn(
  s: fc.Scheduler,
  calls: CallSpec[],
  interrupt: boolean,
  machine?: typeof turnMachine,
): Promise<string | undefined> {
  const clock = new SimulatedClock();
  const executed = new Set<string>();
  const returned = new Map<string, string>();
  const tool = defineTool({
    name: "work",
    description: "Scheduled work.",
    parameters: z.object({ i: z.number(), key: z.string().optional() }),
    traits: { concurrencySafe: true, resourceKey: (a: { key?: string }) => a.key },
    execute: async ({ i }, ctx) => {
      const id = ctx.callId;
      executed.add(id);
      await s.schedule(Promise.resolve(), `tool ${id} finishes`);
      const c = calls[i];
      if (ctx.signal.aborted && c.honoursAbort) throw new Error("aborted");
      if (c.fails) throw new Error(`tool ${id} failed`);
      returned.set(id, `done ${id}`);
      return `done ${id}`;
    },
  });
  const unsafe = defineTool({ ...tool, name: "work_unsafe", traits: { concurrencySafe: false } });
  const cancellable = (name: string) =>
    defineTool({
      ...(name === "work" ? tool : unsafe),
      name: `${name}_c`,
      traits: { ...(name === "work" ? tool.traits : unsafe.traits), cancellable: true },
    });
  const tools = [tool, unsafe, cancellable("work"), cancellable("work_unsafe")];
  const model = scriptedModel([
    {
      toolCalls: calls.map((c, i) => ({
        id: `c${i}`,
        name: `${c.safe ? "work" : "work_unsafe"}${c.cancellable ? "_c" : ""}`,
        arguments: JSON.stringify(c.key ? { i, key: c.key } : { i }),
      })),
    },
    { text: "all done" },
  ]);
  const agent = createAgent({
    model,
    tools,
    clock,
    ids: seededIds(1),
    stopDeadlineMs: 100,
    maxParallelToolCalls: 2,
    turnMachine: machine,
  });
  const session = agent.session("race");
  const events: AgentEvent[] = [];
  // The clock jumps past every stop deadline (100 ms) in one scheduled task; before it, no
  // call may be declared unknown (that would be abandoning it, not waiting for it).
  let deadlinePassed = false;
  let early: string | undefined;
  session.subscribe((e) => {
    events.push(e);
    if (e.type === "call.settled" && e.outcome === "unknown" && !deadlinePassed) {
      early ??= `call ${e.callId} went unknown before its stop deadline passed`;
    }
    // The interrupt may land anywhere once the turn runs (before that, the prompt would wait
    // paused in the queue: an interrupt cancels running work, not queued inputs).
    if (interrupt && e.type === "turn.started") {
      s.schedule(Promise.resolve(), "interrupt").then(() => session.interrupt("stop"));
    }
  });
  const done = session.prompt("go");
  s.schedule(Promise.resolve(), "clock +150ms").then(() => {
    deadlinePassed = true;
    clock.increment(150);
  });
  const out = await s.waitFor(done);
  // Let leftover scheduled tasks (late completions, clock) run: nothing may change afterwards.
  const before = JSON.stringify(session.entries().filter((e) => e.type === "call_result"));
  await s.waitIdle();
  const results = session.entries().filter((e) => e.type === "call_result") as Extract<
    LogEntry,
    { type: "call_result" }
  >[];
  if (JSON.stringify(results) !== before) return "a result changed after the turn ended";
  if (early) return early;
  if (!interrupt && out.status !== "completed") return `turn ended ${out.status}: ${out.reason}`;
  for (let i = 0; i < calls.length; i++) {
    const id = `c${i}`;
    const mine = results.filter((r) => r.callId === id);
    if (mine.length !== 1) return `call ${id} has ${mine.length} results`;
    const r = mine[0];
    if (r.outcome === "not_executed" && executed.has(id)) {
      return `call ${id} ran but its result says it was not executed`;
    }
    if (r.outcome === "completed" && (!r.result.ok || r.result.content !== returned.get(id))) {
      return `call ${id} completed with an invented result`;
    }
    if (returned.has(id) && r.outcome !== "completed" && r.outcome !== "unknown") {
      return `call ${id} returned a value but settled ${r.outcome}`;
    }
  }
  const committed = events.find((e) => e.type === "batch.committed") as
    | Extract<AgentEvent, { type: "batch.committed" }>
    | undefined;
  if (
    committed &&
    committed.calls.map((c) => c.callId).join() !== calls.map((_, i) => `c${i}`).join()
  ) {
    return "batch.committed is not in call order";
  }
  const messages = session.messages();
  const toolMessages = messages.filter((m) => m.role === "tool");
  if (toolMessages.length !== calls.length)
    return `projection has ${toolMessages.length} tool results`;
  return undefined;
}

const property = (machine?: typeof turnMachine) =>
  fc.asyncProperty(
    fc.scheduler(),
    fc.array(callArb, { minLength: 1, maxLength: 4 }),
    fc.boolean(),
    async (s, calls, interrupt) => {
      const problem = await runTurn(s, calls, interrupt, machine);
      failWithSchedule(s, problem);
    },
  );

describe("turn interleavings (fast-check scheduler, real actors)", () => {
  it("every call has exactly one result, a returned value is never replaced by a cancel, commit is in call order", async () => {
    await fc.assert(property(), { numRuns: 150, seed: 4242 });
  });

  it("the property catches a turn that abandons its batch on interrupt", async () => {
    const result = await fc.check(property(abandonsBatchTurnMachine), { numRuns: 300, seed: 4242 });
    expect(result.failed).toBe(true);
  });
});
