import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AnyActorLogic, type AnyActorRef, createActor, SimulatedClock } from "xstate";
import { batchLogic } from "../actors/batch-logic.ts";
import { toolCallLogic } from "../actors/tool-call-logic.ts";
import {
  type BatchCallSpec,
  type BatchPolicy,
  createBatchMachine,
} from "../machines/batch.machine.ts";
import { scheduleBatch } from "../machines/batch-schedule.ts";

/**
 * The runtime hosts each turn's batch with `batchLogic`, a hand-compiled copy of the
 * `batchMachine` chart; the model search, the mutants and the inspector's chart use the machine.
 * This test drives both, side by side, through the same random rounds (safe and unsafe calls,
 * resource keys, dependencies, sequential calls, parallel limits), with every report a call's
 * tool can make, delivered through the batch or straight to the call's actor, at any point:
 * cancels, stop deadlines, actors that error, stray and late events, a `batch.run` mid-round.
 * After every step both must show the same state, context, children (slot ids and each child's
 * state) and the same effects in the same order. Both host their calls with `toolCallLogic`
 * (checked against the tool-call machine in tool-call-logic.model.test.ts), so any difference
 * is the batch's. Broken copies show the comparison catching a difference.
 */

const DEADLINE = 10;

const callArb = fc.record({
  concurrencySafe: fc.boolean(),
  cancellable: fc.boolean(),
  resourceKey: fc.constantFrom(undefined, "k1", "k2"),
  depends: fc.nat(5),
  sequential: fc.boolean(),
  /** The tool's `execute` throws: the call's actor errors (1 call in 6). */
  throws: fc.nat(5).map((n) => n === 0),
});
type CallArb = typeof callArb extends fc.Arbitrary<infer T> ? T : never;

const scenarioArb = fc.record({
  rounds: fc.array(fc.array(callArb, { minLength: 1, maxLength: 5 }), {
    minLength: 1,
    maxLength: 3,
  }),
  maxParallel: fc.integer({ min: 1, max: 4 }),
  /** Each step picks one of the enabled actions by this number, modulo their count. */
  choices: fc.array(fc.nat(1000), { minLength: 10, maxLength: 80 }),
});
type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

function specs(round: CallArb[], r: number): BatchCallSpec[] {
  // At most one sequential call (any makes the whole round sequential), in about 1 round in 6.
  const oneSequential = round.findIndex((c) => c.sequential && c.depends === 0);
  return round.map((c, i) => ({
    callId: `r${r}c${i}`,
    name: `tool${i}`,
    concurrencySafe: c.concurrencySafe,
    cancellable: c.cancellable,
    executionMode: i === oneSequential ? "sequential" : "parallel",
    resourceKey: c.resourceKey,
    dependsOn: i > 0 && c.depends % 3 === 0 ? [`r${r}c${c.depends % i}`] : undefined,
  }));
}

type Effects = {
  trace: string[];
  throws: Set<string>;
  /** The next `callSettled` or `roundDone` throws (an effect breaking its contract). */
  armed?: boolean;
  /** Every call actor ever created (to see each one stopped). */
  children?: AnyActorRef[];
};

/** Records a batch effect; throws if armed. */
function effect(fx: Effects, line: string): void {
  fx.trace.push(line);
  if (fx.armed) {
    fx.armed = false;
    throw new Error(`effect failed: ${line}`);
  }
}

type Host = (fx: Effects, policy?: Partial<BatchPolicy>) => AnyActorLogic;

function callLogic(fx: Effects) {
  return toolCallLogic({
    recordStart: (self, _system, { callId }) => {
      fx.children?.push(self);
      fx.trace.push(`recordStart ${callId} as ${self.id}`);
    },
    execute: (_self, _system, { callId }) => {
      fx.trace.push(`execute ${callId}`);
      if (fx.throws.has(callId)) throw new Error(`tool ${callId} crashed the runtime`);
    },
    abort: (_self, _system, { callId }) => fx.trace.push(`abort ${callId}`),
  });
}

const settledLine = (p: { callId: string; outcome: string; result: unknown }) =>
  `callSettled ${p.callId} ${p.outcome} ${JSON.stringify(p.result)}`;
const roundLine = (results: { callId: string; outcome: string }[]) =>
  `roundDone ${results.map((r) => `${r.callId}:${r.outcome}`).join(" ")}`;

const machineHost: Host = (fx, policy) =>
  createBatchMachine(policy).provide({
    actors: { toolCall: callLogic(fx) as never },
    actions: {
      callSettled: (_, p) => effect(fx, settledLine(p)),
      roundDone: (_, p) => effect(fx, roundLine(p.results)),
    },
  });

const logicHost: Host = (fx, policy) =>
  batchLogic({
    toolCall: callLogic(fx),
    policy,
    effects: {
      callSettled: (_self, _system, p) => effect(fx, settledLine(p)),
      roundDone: (_self, _system, p) => effect(fx, roundLine(p.results)),
    },
  });

/** One side of the comparison: a batch actor and what it did. */
class Side {
  readonly fx: Effects = { trace: [], throws: new Set(), children: [] };
  readonly clock = new SimulatedClock();
  readonly actor: AnyActorRef;
  constructor(host: Host, maxParallel: number, policy?: Partial<BatchPolicy>) {
    this.actor = createActor(host(this.fx, policy), {
      input: { maxParallelToolCalls: maxParallel, stopDeadlineMs: DEADLINE },
      clock: this.clock,
    });
    this.actor.subscribe({ error: () => {} });
    this.actor.start();
  }

  /** The child actor of a running call, by its slot. */
  child(callId: string): AnyActorRef | undefined {
    const { context, children } = this.actor.getSnapshot();
    const i = context.index[callId];
    if (i === undefined || context.phases[i] !== "running") return undefined;
    return children[context.actorIds[i]];
  }

  /** Everything an observer can see, and the effects since the last look. */
  look(): string {
    const s = this.actor.getSnapshot();
    const children = Object.entries(s.children ?? {})
      .map(([id, c]) => `${id}=${(c as AnyActorRef).getSnapshot().value}`)
      .sort();
    const trace = this.fx.trace.splice(0);
    // Every call actor ever created, in creation order: its state and status (stopped ones too).
    const calls = (this.fx.children ?? []).map((c) => {
      const cs = c.getSnapshot();
      return `${c.id}:${cs.value}:${cs.status}`;
    });
    if (s.status !== "active") return JSON.stringify([s.status, String(s.error), trace, calls]);
    return JSON.stringify([s.value, s.context, children, trace, calls]);
  }
}

/**
 * The actions enabled in this state (the same for both sides while they agree). `choice` also
 * thins out the rare ones (a cancel, a stray event, a `batch.run` mid-round that errors the
 * batch), so most steps move calls along.
 */
function enabled(side: Side, rounds: BatchCallSpec[][], next: number, choice: number): string[] {
  const s = side.actor.getSnapshot();
  if (s.status !== "active") return [];
  const out: string[] = [];
  if (choice % 13 === 0) out.push("stray");
  if (choice % 17 === 0) out.push("stray error", "stray done");
  if (choice % 31 === 0) out.push("stop");
  if (choice % 19 === 0) out.push("arm");
  if (s.value === "idle") {
    if (next < rounds.length) out.push("run");
    return out;
  }
  if (choice % 5 === 0) out.push("cancel");
  if (choice % 41 === 0) out.push("run");
  for (const call of s.context.calls as BatchCallSpec[]) {
    const state = side.child(call.callId)?.getSnapshot().value;
    if (state === "recording")
      out.push(`recorded ${call.callId}`, `direct recorded ${call.callId}`);
    if (state === "started" || state === "stopping") {
      out.push(`complete ${call.callId}`, `fail ${call.callId}`, `direct complete ${call.callId}`);
    }
    if (state === "stopping") out.push(`aborted ${call.callId}`, "tick");
  }
  return out;
}

const ok = (id: string) => ({ ok: true, content: `done ${id}` });
const failed = { ok: false, code: "EXECUTION_FAILED", message: "boom", retryable: false };

function act(side: Side, action: string, rounds: BatchCallSpec[][], next: number): void {
  const [verb, a, b] = action.split(" ");
  const direct = verb === "direct";
  const what = direct ? a : verb;
  const callId = direct ? b : a;
  const event =
    what === "recorded"
      ? { type: "call.recorded", callId }
      : what === "complete"
        ? { type: "call.complete", callId, result: ok(callId) }
        : what === "fail"
          ? { type: "call.fail", callId, result: failed }
          : { type: "call.aborted", callId };
  switch (what) {
    case "run":
      side.actor.send({ type: "batch.run", calls: rounds[next] ?? rounds[0] });
      return;
    case "cancel":
      side.actor.send({ type: "batch.cancel", reason: "interrupt" });
      return;
    case "stray":
      side.actor.send({ type: "call.complete", callId: "nobody", result: ok("nobody") });
      return;
    case "stray error":
      side.actor.send({ type: "xstate.error.actor.slot7", error: new Error("late") } as never);
      return;
    case "stray done": {
      const output = { callId: "nobody", outcome: "completed", result: ok("nobody") };
      side.actor.send({ type: "xstate.done.actor.slot7", actorId: "slot7", output } as never);
      return;
    }
    case "stop":
      side.actor.stop();
      return;
    case "arm":
      side.fx.armed = true;
      return;
    case "tick":
      side.clock.increment(DEADLINE);
      return;
  }
  if (direct) side.child(callId)?.send(event);
  else side.actor.send(event);
}

/** Runs the scenario on both sides; the first step where they differ, or undefined. */
function compare(sc: Scenario, policy?: Partial<BatchPolicy>): string | undefined {
  const rounds = sc.rounds.map(specs);
  const sides = [
    new Side(machineHost, sc.maxParallel),
    new Side(logicHost, sc.maxParallel, policy),
  ];
  sc.rounds.forEach((round, r) => {
    round.forEach((c, i) => {
      if (c.throws) for (const side of sides) side.fx.throws.add(`r${r}c${i}`);
    });
  });
  let next = 0;
  const log: string[] = [];
  for (const choice of sc.choices) {
    const options = enabled(sides[0], rounds, next, choice);
    const theirs = enabled(sides[1], rounds, next, choice);
    if (options.join() !== theirs.join()) {
      return `${log.join(" → ")}\n  machine could: ${options}\n  logic could: ${theirs}`;
    }
    if (options.length === 0) {
      if (sides[0].actor.getSnapshot().status !== "active") break;
      continue;
    }
    const action = options[choice % options.length];
    const wasIdle = sides[0].actor.getSnapshot().value === "idle";
    for (const side of sides) act(side, action, rounds, next);
    if (action === "run" && wasIdle) next++;
    log.push(action);
    const [want, got] = sides.map((side) => side.look());
    if (want !== got) return `${log.join(" → ")}\n  machine: ${want}\n  logic:   ${got}`;
  }
  return undefined;
}

describe("batchLogic against the batchMachine chart", () => {
  it("shows the same state, context, children and effects as the machine after every step of random rounds, reports, cancels, deadlines and actor errors", () => {
    fc.assert(
      fc.property(scenarioArb, (sc) => {
        const difference = compare(sc);
        if (difference) throw new Error(difference);
      }),
      { numRuns: 800, seed: 11 },
    );
  });

  it("a batch created with calls runs them as its first round, as the machine does", () => {
    const calls = specs(
      [
        {
          concurrencySafe: true,
          cancellable: true,
          resourceKey: undefined,
          depends: 1,
          sequential: false,
          throws: false,
        },
      ],
      0,
    );
    const looks = [machineHost, logicHost].map((host) => {
      const fx: Effects = { trace: [], throws: new Set() };
      const actor = createActor(host(fx), { input: { calls, stopDeadlineMs: DEADLINE } });
      const look = () => {
        const s = actor.getSnapshot();
        return JSON.stringify([s.value, s.context, Object.keys(s.children), fx.trace]);
      };
      // Before start the round is already scheduled (children created), nothing has run yet.
      const before = look();
      actor.start();
      return [before, look()];
    });
    expect(looks[1]).toEqual(looks[0]);
    expect(looks[0][0]).toContain("slot0");
  });

  it("an invalid round errors the actor on both, with the same message", () => {
    const calls = [
      {
        callId: "a",
        name: "t",
        concurrencySafe: true,
        cancellable: true,
        executionMode: "parallel" as const,
      },
      {
        callId: "a",
        name: "t",
        concurrencySafe: true,
        cancellable: true,
        executionMode: "parallel" as const,
      },
    ];
    const errors = [machineHost, logicHost].map((host) => {
      const actor = createActor(host({ trace: [], throws: new Set() }), {
        input: { stopDeadlineMs: DEADLINE },
      });
      actor.subscribe({ error: () => {} });
      actor.start();
      actor.send({ type: "batch.run", calls });
      return String(actor.getSnapshot().error);
    });
    expect(errors[0]).toMatch(/invalid batch/);
    expect(errors[1]).toBe(errors[0]);
  });

  it("stopping the batch stops its running calls' actors, on both", () => {
    const calls = specs(
      [0, 1].map(() => ({
        concurrencySafe: true,
        cancellable: true,
        resourceKey: undefined,
        depends: 1,
        sequential: false,
        throws: false,
      })),
      0,
    );
    for (const host of [machineHost, logicHost]) {
      const fx: Effects = { trace: [], throws: new Set() };
      const actor = createActor(host(fx), { input: { stopDeadlineMs: DEADLINE } }).start();
      actor.send({ type: "batch.run", calls });
      const children = Object.values(actor.getSnapshot().children) as AnyActorRef[];
      expect(children).toHaveLength(2);
      actor.stop();
      expect(children.map((c) => c.getSnapshot().status)).toEqual(["stopped", "stopped"]);
    }
  });

  const broken: [string, Partial<BatchPolicy>][] = [
    ["commits in completion order", { commitOrder: (c) => [...c.completionOrder] }],
    ["names every call's actor slot0", { childIds: (_, start) => start.map(() => "slot0") }],
    ["ignores resource keys", { schedule: scheduleWithoutKeys }],
  ];
  for (const [name, policy] of broken) {
    it(`the comparison catches a logic that ${name}`, () => {
      const result = fc.check(
        fc.property(scenarioArb, (sc) => compare(sc, policy) === undefined),
        { numRuns: 400, seed: 11 },
      );
      expect(result.failed).toBe(true);
    });
  }
});

function scheduleWithoutKeys(state: Parameters<typeof scheduleBatch>[0]) {
  return scheduleBatch({ ...state, calls: state.calls.map(({ resourceKey: _, ...c }) => c) });
}
