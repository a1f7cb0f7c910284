import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createActor, SimulatedClock } from "xstate";
import { bindEffects, hostedBatchMachine } from "../actors/charts.ts";
import { type BatchInput, type BatchMachine, batchMachine } from "../machines/batch.machine.ts";
import type { BatchCallSpec } from "../machines/policies/batch-schedule.ts";
import { toCall } from "./support/harness.ts";
import { batchMutants } from "./support/mutants/batch.mutants.ts";

const DEADLINE = 1_000;

interface Behaviour {
  succeeds: boolean;
  honoursAbort: boolean;
}

const scenarioArb = fc
  .array(
    fc.record({
      concurrencySafe: fc.boolean(),
      cancellable: fc.boolean(),
      resourceKey: fc.constantFrom(undefined, "k1", "k2"),
      succeeds: fc.boolean(),
      honoursAbort: fc.boolean(),
    }),
    { minLength: 1, maxLength: 6 },
  )
  .chain((calls) =>
    fc.record({
      calls: fc.constant(calls),
      maxParallel: fc.integer({ min: 1, max: 4 }),
      /** Index of the one sequential call; past the end means none. */
      sequential: fc.nat(8),
      cancel: fc.boolean(),
    }),
  );

type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

type CallEffects = Record<"recordStart" | "execute" | "abort", (callId: string) => void>;

function toInput(sc: Scenario): BatchInput {
  return {
    maxParallelToolCalls: sc.maxParallel,
    stopDeadlineMs: DEADLINE,
    calls: sc.calls.map(
      (c, i): BatchCallSpec => ({
        callId: `c${i}`,
        name: `tool${i}`,
        concurrencySafe: c.concurrencySafe,
        cancellable: c.cancellable,
        executionMode: sc.sequential === i ? "sequential" : "parallel",
        resourceKey: c.resourceKey,
      }),
    ),
  };
}

/**
 * Runs one batch with real actors; every tool step, the cancel and the clock step are
 * scheduled tasks whose order fast-check picks. Throws on the first broken invariant.
 */
async function runBatch(machine: BatchMachine, sc: Scenario, s: fc.Scheduler) {
  const input = toInput(sc);
  const calls = input.calls!;
  const behaviour = new Map<string, Behaviour>(sc.calls.map((c, i) => [`c${i}`, c]));
  const clock = new SimulatedClock();
  const running = new Set<string>();
  const started: string[] = [];
  const recorded = new Set<string>();
  const settled: { callId: string; outcome: string; result: unknown }[] = [];
  // Recorded, not thrown: a throw inside a provided action would become an actor error.
  const problems: string[] = [];
  const fail = (m: string) => {
    problems.push(m);
  };
  const isSequential = calls.some((c) => c.executionMode === "sequential");
  // biome-ignore lint/suspicious/noExplicitAny: drives real and mutant batches alike
  let batch: any;
  let reported: unknown[] | undefined;
  const send = (event: { type: string; callId: string }, settles: boolean) => {
    if (batch.getSnapshot().value !== "running") return; // late event after the round ended
    const before = settled.length;
    toCall(batch, event);
    const first = settled[before]?.callId;
    if (settles && first !== event.callId)
      fail(`${event.callId} completed but ${first} settled first`);
  };
  // Children are named by slot; a call's actor is the slot its running call holds.
  const childState = (callId: string) => {
    const { context, children } = batch.getSnapshot();
    const i = context.index[callId];
    if (context.phases[i] !== "running") return undefined;
    return children[context.actorIds[i]]?.getSnapshot();
  };
  const fx: CallEffects = {
    recordStart: (callId: string) => {
      const c = calls.find((x) => x.callId === callId)!;
      const i = calls.indexOf(c);
      const others = [...running].map((id) => calls.find((x) => x.callId === id)!);
      if (running.size >= (input.maxParallelToolCalls ?? 8)) fail("over maxParallel");
      if (!c.concurrencySafe && running.size > 0) fail(`unsafe ${callId} overlaps ${[...running]}`);
      if (others.some((o) => !o.concurrencySafe)) fail(`${callId} overlaps an unsafe call`);
      if (c.resourceKey && others.some((o) => o.resourceKey === c.resourceKey)) {
        fail(`${callId} shares resource key ${c.resourceKey} with a running call`);
      }
      const earlierOpen = calls
        .slice(0, i)
        .some((e) => !settled.some((x) => x.callId === e.callId));
      if (isSequential && (running.size > 0 || earlierOpen)) {
        fail(`sequential batch started ${callId} out of order`);
      }
      running.add(callId);
      started.push(callId);
      s.schedule(Promise.resolve(`recorded ${callId}`)).then(() => {
        recorded.add(callId);
        send({ type: "call.recorded", callId }, false);
      });
    },
    execute: (callId: string) => {
      if (!recorded.has(callId)) fail(`${callId} executed before its start was recorded`);
      const ok = behaviour.get(callId)!.succeeds;
      s.schedule(Promise.resolve(`${ok ? "complete" : "fail"} ${callId}`)).then(() => {
        const event = ok
          ? { type: "call.complete", callId, result: { ok: true, content: callId } }
          : {
              type: "call.fail",
              callId,
              result: { ok: false, code: "EXECUTION_FAILED", message: "x", retryable: false },
            };
        send(event, childState(callId)?.status === "active");
      });
    },
    abort: (callId: string) => {
      if (!behaviour.get(callId)!.honoursAbort) return;
      s.schedule(Promise.resolve(`aborted ${callId}`)).then(() => {
        send({ type: "call.aborted", callId }, childState(callId)?.value === "stopping");
      });
    },
  };
  const callSettled = (p: { callId: string; outcome: string; result: unknown }) => {
    if (settled.some((x) => x.callId === p.callId)) fail(`${p.callId} settled twice`);
    running.delete(p.callId);
    settled.push(p);
  };
  const roundDone = (p: { results: unknown[] }) => {
    if (reported !== undefined) fail("roundDone twice");
    reported = p.results;
  };
  // Hosted as the runtime hosts it (actors/charts.ts): effects found through the actor system.
  batch = createActor(hostedBatchMachine(machine), { input, clock });
  bindEffects(batch.system, {
    recordStart: (_self, { callId }) => fx.recordStart(callId),
    execute: (_self, { callId }) => fx.execute(callId),
    abort: (_self, { callId }) => fx.abort(callId),
    stopping: () => {},
    callSettled: (_self, p) => callSettled(p),
    roundDone: (_self, p) => roundDone(p),
  });
  batch.start();
  if (sc.cancel) {
    s.schedule(Promise.resolve("batch.cancel")).then(() => {
      if (batch.getSnapshot().value !== "running") return;
      const runningAtCancel = [...running];
      batch.send({ type: "batch.cancel", reason: "interrupt" });
      const afterCancel = started.length;
      s.schedule(Promise.resolve("stop deadline passes")).then(() => {
        if (started.length !== afterCancel) fail("a call started after batch.cancel");
        clock.increment(DEADLINE);
        for (const id of runningAtCancel) {
          if (!settled.some((x) => x.callId === id)) fail(`${id} still running after deadline`);
        }
      });
    });
  }
  await s.waitIdle();
  const snap = batch.getSnapshot();
  if (snap.status !== "active") fail(`the batch actor ended (${snap.status}); it must live on`);
  if (snap.value !== "idle") fail(`round not done: ${JSON.stringify(snap.context.phases)}`);
  if (settled.length !== calls.length) fail("not every call settled exactly once");
  const expected = settled.map((r) => ({
    callId: r.callId,
    name: calls.find((c) => c.callId === r.callId)!.name,
    outcome: r.outcome,
    result: r.result,
  }));
  if (JSON.stringify(reported) !== JSON.stringify(expected)) {
    fail("roundDone is not every call's result, in the order they settled");
  }
  if (problems.length > 0) throw new Error(problems.join("; "));
}

const property = (machine: BatchMachine) =>
  fc.asyncProperty(scenarioArb, fc.scheduler(), (sc, s) => runBatch(machine, sc, s));

describe("batch with real actors under a fast-check scheduler, hosted as the runtime hosts it", () => {
  it("every call settles exactly once, callSettled in completion order, roundDone in that order, never an unsafe, over-parallel, same-key or out-of-order overlap — also after batch.cancel at any point", async () => {
    await fc.assert(property(batchMachine), { numRuns: 300, seed: 1 });
  });

  const catches: [keyof typeof batchMutants, RegExp][] = [
    ["ignoresResourceKeys", /resource key/],
    ["unsafeRunsBesideOthers", /unsafe/],
    ["ignoresSequential", /sequential/],
  ];
  for (const [mutant, message] of catches) {
    it(`the race check catches the mutant batch that ${mutant}`, async () => {
      const result = await fc.check(property(batchMutants[mutant]), { numRuns: 300, seed: 1 });
      expect(result.failed).toBe(true);
      expect(String(result.errorInstance)).toMatch(message);
    });
  }
});
