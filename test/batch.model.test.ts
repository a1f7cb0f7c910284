import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AnyStateMachine, initialTransition, transition } from "xstate";
import type { CallOutcome } from "../contracts/status.ts";
import type { ToolResult } from "../contracts/tool-result.ts";
import { type BatchInput, batchMachine } from "../machines/batch.machine.ts";
import type { BatchCallSpec } from "../machines/policies/batch-schedule.ts";
import { batchMutants } from "./support/mutants/batch.mutants.ts";
import { noTimers, stepTimers, type Timers, timerKey } from "./support/timers.ts";

// biome-ignore lint/suspicious/noExplicitAny: snapshots of real and mutant batches alike
type Snap = any;
type Action = { type: string; params?: Snap };

/** What the checks know, read only from the actions the batch asks for (not its context). */
interface Trace {
  started: string[];
  /** The results `roundDone` reported (once per round). */
  done?: { callId: string; name: string; outcome: CallOutcome; result: ToolResult }[];
  settled: Record<string, { outcome: CallOutcome; result: ToolResult }>;
  cancelled: boolean;
  cancelSent: string[];
  /** Each started call's child actor id (a slot, reused once its call has settled). */
  actorOf: Record<string, string>;
}

/** The started, unsettled call whose actor is `actorId`. */
const callOn = (t: Trace, actorId: string) =>
  t.started.find((id) => !t.settled[id] && t.actorOf[id] === actorId);

const resultFor = (id: string, outcome: CallOutcome): ToolResult =>
  outcome === "completed"
    ? { ok: true, content: `${id} done` }
    : { ok: false, code: "EXECUTION_FAILED", message: `${id} ${outcome}`, retryable: false };

/** Everything that can happen next: a running call reaches a final state, or a cancel. */
function nextEvents(t: Trace, withErrors: boolean) {
  const events: Snap[] = [{ type: "batch.cancel", reason: "user interrupt" }];
  for (const id of t.started.filter((s) => !t.settled[s])) {
    const actor = t.actorOf[id];
    const outcomes: CallOutcome[] = ["completed", "failed", "unknown"];
    if (t.cancelSent.includes(id)) outcomes.push("cancelled", "not_executed");
    for (const outcome of outcomes) {
      const output = { callId: id, outcome, result: resultFor(id, outcome) };
      events.push({ type: `xstate.done.actor.${actor}`, actorId: actor, output });
    }
    if (withErrors)
      events.push({ type: `xstate.error.actor.${actor}`, actorId: actor, error: "boom" });
  }
  return events;
}

/** Checks one step against invariants 1, 4 and 5 of docs/architecture.md; returns a problem sentence or undefined. */
function step(input: BatchInput, t: Trace, event: Snap, snap: Snap, actions: Action[]) {
  const calls = input.calls!;
  const at = (id: string) => calls.findIndex((c) => c.callId === id);
  const settledNow: string[] = [];
  for (const a of actions) {
    if (a.type === "callSettled") {
      const { callId, outcome, result } = a.params;
      if (t.settled[callId]) return `call ${callId} settled twice`;
      t.settled[callId] = { outcome, result };
      settledNow.push(callId);
    }
    // A call's actor is created when it starts: a spawn is a start.
    if (a.type === "xstate.spawnChild") {
      const id: string = a.params.input.callId;
      const actor: string = a.params.id;
      const i = at(id);
      if (callOn(t, actor))
        return `call ${id} got actor ${actor}, still held by ${callOn(t, actor)}`;
      const slots = new Set([...Object.values(t.actorOf), actor]);
      // Child ids are bounded (XState caches per event type forever): never more than can run.
      if (slots.size > (input.maxParallelToolCalls ?? 8))
        return `${slots.size} distinct child ids for maxParallel ${input.maxParallelToolCalls ?? 8}`;
      if (t.cancelled) return `call ${id} started after batch.cancel`;
      if (t.started.includes(id) || t.settled[id]) return `call ${id} started twice`;
      const earlierOpen = calls.slice(0, i).some((c) => !t.settled[c.callId]);
      const sequential = calls.some((c) => c.executionMode === "sequential");
      if (earlierOpen && sequential) return `sequential batch started ${id} out of call order`;
      if (earlierOpen && !calls[i].concurrencySafe)
        return `unsafe ${id} started before earlier calls settled`;
      t.started.push(id);
      t.actorOf[id] = actor;
    }
    if (a.type === "roundDone") {
      if (t.done) return "roundDone reported twice in one round";
      t.done = a.params.results;
    }
    if (a.type === "xstate.sendTo" && a.params.event.type === "call.cancel") {
      const id = callOn(t, a.params.to.id);
      if (!id) return `call.cancel sent to ${a.params.to.id}, which runs no call`;
      t.cancelSent.push(id);
    }
  }
  if (event.type === "batch.cancel" && !t.cancelled) {
    t.cancelled = true;
    for (const id of t.started) {
      if (!t.settled[id] && !t.cancelSent.includes(id)) return `running ${id} was not cancelled`;
    }
  }
  if (event.type.startsWith("xstate.done.actor.") && settledNow[0] !== event.output.callId) {
    return `callSettled out of completion order: ${event.output.callId} finished, got ${settledNow}`;
  }
  const running = t.started.filter((id) => !t.settled[id]).map((id) => calls[at(id)]);
  if (running.length > (input.maxParallelToolCalls ?? 8)) return "more than maxParallel running";
  if (running.length > 1 && running.some((c) => !c.concurrencySafe)) {
    return `an unsafe call overlaps: ${running.map((c) => c.callId)}`;
  }
  const keys = running.flatMap((c) => (c.resourceKey ? [c.resourceKey] : []));
  if (new Set(keys).size !== keys.length) return `two running calls share a resource key`;
  const phases: string[] = snap.context.phases;
  if (running.some((c) => phases[at(c.callId)] !== "running")) return "context phases disagree";
  if (snap.status !== "active") return `the batch actor ended (${snap.status}); it must live on`;
  if (snap.value === "running" && running.length === 0) return "stalled: nothing runs, not done";
  if (snap.value === "idle" && !t.done) return "the round ended without roundDone";
  if (t.done) {
    if (snap.value !== "idle") return "roundDone while the round still runs";
    if (Object.keys(t.settled).length !== calls.length) return "done before every call settled";
    // Each result once, in the order callSettled reported them (object keys keep that order:
    // call ids here are never integer-like). The model's call order is the projection's.
    const expected = Object.keys(t.settled).map((id) => ({
      callId: id,
      name: calls[at(id)].name,
      ...t.settled[id],
    }));
    if (JSON.stringify(t.done) !== JSON.stringify(expected)) {
      return "roundDone is not every result in settle order";
    }
  }
  return undefined;
}

/**
 * Exhaustive search over every completion order and cancel point of one batch round; with
 * `second`, every way the first round can end is followed by a second round (`batch.run`) on the
 * same actor, searched the same way: a long-lived batch must start each round clean.
 */
function searchBatch(
  machine: AnyStateMachine,
  input: BatchInput,
  withErrors = false,
  second?: BatchInput,
) {
  const seen = new Set<string>();
  const visit = (
    snap: Snap,
    t: Trace,
    path: string[],
    round: BatchInput = input,
    timers: Timers = noTimers,
  ): string | undefined => {
    if (snap.value === "idle") {
      if (!second || round === second) return undefined;
      const event = { type: "batch.run", calls: second.calls };
      const [next, actions] = transition(machine, snap, event);
      const fresh: Trace = {
        started: [],
        settled: {},
        cancelled: false,
        cancelSent: [],
        actorOf: {},
      };
      const p = [...path, "batch.run"];
      const problem = step(second, fresh, event, next, actions as Action[]);
      if (problem) return `${problem} after ${p.join(" → ")}`;
      return visit(next, fresh, p, second);
    }
    const key = JSON.stringify([
      round === input ? 1 : 2,
      snap.context.phases,
      snap.context.outcomes,
      snap.context.cancelled,
      snap.context.completionOrder,
      t,
      // Timers the batch armed (none today; the calls' stop deadlines live in their actors).
      timerKey(timers),
    ]);
    if (seen.has(key)) return undefined;
    seen.add(key);
    for (const event of nextEvents(t, withErrors)) {
      const [next, actions] = transition(machine, snap, event);
      const t2: Trace = {
        ...t,
        started: [...t.started],
        settled: { ...t.settled },
        cancelSent: [...t.cancelSent],
        actorOf: { ...t.actorOf },
      };
      const p = [...path, event.type];
      const problem = step(round, t2, event, next, actions as Action[]);
      if (problem) return `${problem} after ${p.join(" → ")}`;
      const timed = stepTimers(timers, event.type, actions as Action[]);
      if (timed.rearmed.length > 0) return `${timed.rearmed[0].id} re-armed after ${p.join(" → ")}`;
      const found = visit(next, t2, p, round, timed.timers);
      if (found) return found;
    }
    return undefined;
  };
  const [initial, actions] = initialTransition(machine, input);
  const t0: Trace = { started: [], settled: {}, cancelled: false, cancelSent: [], actorOf: {} };
  const problem = step(input, t0, { type: "xstate.init" }, initial, actions as Action[]);
  return problem ?? visit(initial, t0, []);
}

const spec = (callId: string, traits: Partial<BatchCallSpec> = {}): BatchCallSpec => ({
  callId,
  name: `tool-${callId}`,
  concurrencySafe: true,
  cancellable: true,
  executionMode: "parallel",
  ...traits,
});

/** Random batches of 1–4 calls with random traits (dependencies only on earlier calls). */
const batchArb = fc
  .array(
    fc.record({
      concurrencySafe: fc.boolean(),
      resourceKey: fc.constantFrom(undefined, "k1", "k2"),
    }),
    { minLength: 1, maxLength: 4 },
  )
  .chain((traits) =>
    fc.record({
      maxParallel: fc.integer({ min: 1, max: 3 }),
      /** Index of the one sequential call; past the end means none. */
      sequential: fc.integer({ min: 0, max: 5 }),
      traits: fc.constant(traits),
    }),
  )
  .map(
    ({ maxParallel, sequential, traits }): BatchInput => ({
      maxParallelToolCalls: maxParallel,
      stopDeadlineMs: 1000,
      calls: traits.map((tr, i) =>
        spec(`c${i}`, {
          concurrencySafe: tr.concurrencySafe,
          executionMode: sequential === i ? "sequential" : "parallel",
          resourceKey: tr.resourceKey,
        }),
      ),
    }),
  );

const fixed: Record<string, BatchInput> = {
  "two safe calls": { stopDeadlineMs: 1000, calls: [spec("a"), spec("b")] },
  "safe, unsafe, safe": {
    stopDeadlineMs: 1000,
    calls: [spec("a"), spec("w", { concurrencySafe: false }), spec("b")],
  },
  "same resource key": {
    stopDeadlineMs: 1000,
    calls: [spec("a", { resourceKey: "/f" }), spec("b", { resourceKey: "/f" }), spec("c")],
  },
  "sequential batch": {
    stopDeadlineMs: 1000,
    calls: [spec("a"), spec("b", { executionMode: "sequential" }), spec("c")],
  },
  "four calls, two at a time": {
    stopDeadlineMs: 1000,
    maxParallelToolCalls: 2,
    calls: [spec("a"), spec("b"), spec("c"), spec("d")],
  },
};

describe("batch: exhaustive search over completion orders and cancel points", () => {
  for (const [name, input] of Object.entries(fixed)) {
    it(`every call settles once, in completion order, committed in call order, never overlapping unsafely (${name})`, () => {
      expect(searchBatch(batchMachine, input, true)).toBeUndefined();
    });
  }

  it("a second round on the same actor, after every way the first can end (cancel, errors, unknown), keeps every invariant", () => {
    const second: BatchInput = {
      stopDeadlineMs: 1000,
      calls: [spec("a2"), spec("w2", { concurrencySafe: false })],
    };
    expect(searchBatch(batchMachine, fixed["two safe calls"], true, second)).toBeUndefined();
    expect(searchBatch(batchMachine, fixed["same resource key"], false, second)).toBeUndefined();
  });

  it("the two-round search catches the mutant batch that keepsCancelAcrossRounds", () => {
    const second: BatchInput = { stopDeadlineMs: 1000, calls: [spec("a2")] };
    expect(searchBatch(batchMutants.keepsCancelAcrossRounds, fixed["two safe calls"])).toBe(
      undefined,
    );
    expect(
      searchBatch(batchMutants.keepsCancelAcrossRounds, fixed["two safe calls"], false, second),
    ).toMatch(/stalled/);
  });

  it("the invariants hold for random batches of 1–4 calls with random traits", () => {
    fc.assert(
      fc.property(batchArb, (input) => searchBatch(batchMachine, input) === undefined),
      {
        numRuns: 60,
        seed: 7,
      },
    );
  });

  const catches: [keyof typeof batchMutants, string, RegExp][] = [
    ["ignoresResourceKeys", "same resource key", /share a resource key/],
    ["unsafeRunsBesideOthers", "safe, unsafe, safe", /unsafe/],
    ["ignoresSequential", "sequential batch", /sequential|out of call order/],
    [
      "ignoresMaxParallel",
      "four calls, two at a time",
      /more than maxParallel|ids for maxParallel 2/,
    ],
    ["childIdPerCall", "four calls, two at a time", /distinct child ids/],
    ["reusesBusySlot", "two safe calls", /still held by/],
  ];
  for (const [mutant, config, message] of catches) {
    it(`the search catches the mutant batch that ${mutant}`, () => {
      expect(searchBatch(batchMutants[mutant], fixed[config])).toMatch(message);
    });
  }
});
