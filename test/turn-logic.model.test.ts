import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type ActorLogic,
  type AnyActorLogic,
  type AnyActorRef,
  createActor,
  type EventObject,
  SimulatedClock,
} from "xstate";
import { type TurnChartEffects, turnLogic } from "../actors/turn-logic.ts";
import { type TurnCallSpec, turnMachine } from "../machines/turn.machine.ts";

/**
 * The runtime hosts every turn with `turnLogic`, a hand-compiled copy of the `turnMachine`
 * chart; the model search, the mutants and the inspector's chart use the machine. This test
 * drives both, side by side, with the same random events at any point — current and stale
 * attempt results and failures (with and without retry), permission answers, batch rounds
 * ending, steering at the natural end, interrupts, finalizer answers, the batch failing, and
 * the clock passing retry delays, turn deadlines and finalizer deadlines — and requires the
 * same state value, status, context, output, children, effects (with params, in order, and
 * what the batch was sent) and pending timers after every one. Broken copies show the
 * comparison catching a difference.
 */

/** What a side's effects write to; `armed` makes the next effect throw (then disarms). */
type Fx = { trace: string[]; armed: boolean };

/** Records an effect; throws if armed (an effect that breaks its contract mid-run). */
function effect(fx: Fx, line: string): void {
  fx.trace.push(line);
  if (fx.armed) {
    fx.armed = false;
    throw new Error(`effect failed: ${line}`);
  }
}

/**
 * A stand-in batch: records what it is sent, and its stop; `boom` makes it throw (its actor
 * errors).
 */
function fakeBatch(trace: string[]): AnyActorLogic {
  const logic: ActorLogic<
    { status: "active"; output: undefined; error: undefined },
    EventObject,
    unknown
  > = {
    getInitialSnapshot: () => ({ status: "active", output: undefined, error: undefined }),
    transition: (s, event) => {
      if (event.type === "boom") throw new Error("the batch broke");
      if (event.type === "xstate.stop") {
        trace.push("batch stopped");
        return { ...s, status: "stopped" } as never;
      }
      if (!event.type.startsWith("xstate.")) trace.push(`batch got ${JSON.stringify(event)}`);
      return s;
    },
    getPersistedSnapshot: (s) => s,
  };
  return logic;
}

const names = [
  "prepare",
  "startAttempt",
  "abortAttempt",
  "pollAtEnd",
  "refuseCalls",
  "checkPermissions",
  "rejectInvalid",
  "commitBatch",
  "retryScheduled",
  "cancelAcknowledged",
  "executionStopped",
  "finalize",
  "ended",
] as const;

type Host = (fx: Fx) => AnyActorLogic;

const machineHost: Host = (fx) =>
  turnMachine.provide({
    actors: { batch: fakeBatch(fx.trace) as never },
    actions: Object.fromEntries(
      names.map((n) => [n, (_: unknown, p: unknown) => effect(fx, `${n} ${JSON.stringify(p)}`)]),
    ),
  });

const logicHost: Host = (fx) =>
  turnLogic({
    batch: fakeBatch(fx.trace),
    effects: Object.fromEntries(
      names.map((n) => [
        n,
        (_self: unknown, _system: unknown, p: unknown) => effect(fx, `${n} ${JSON.stringify(p)}`),
      ]),
    ) as unknown as TurnChartEffects,
  });

const limitsArb = fc.record({
  maxSteps: fc.integer({ min: 1, max: 6 }),
  maxTokens: fc.constantFrom(0, 8, 20),
  deadlineMs: fc.constantFrom(0, 0, 60),
});

const callSpec = (i: number): TurnCallSpec => ({
  callId: `c${i}`,
  name: "edit",
  concurrencySafe: true,
  cancellable: true,
  executionMode: "parallel",
});

/** One input; `stale` attempt events carry the previous attempt's number. */
const inputArb = fc.oneof(
  {
    weight: 12,
    arbitrary: fc.record({
      kind: fc.constant("done" as const),
      stale: fc.nat(5).map((n) => n === 0),
      finishReason: fc.constantFrom("stop", "tool_calls", "tool_calls", "tool_calls", "length"),
      callCount: fc.nat(2),
      valid: fc.nat(2),
      needsPermission: fc.nat(3).map((n) => n === 0),
      tokens: fc.nat(4),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("failed" as const),
      stale: fc.nat(5).map((n) => n === 0),
      retry: fc.nat(3).map((n) => n > 0),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("allowed" as const), count: fc.nat(2) }) },
  { weight: 1, arbitrary: fc.constant({ kind: "declined" as const }) },
  { weight: 10, arbitrary: fc.constant({ kind: "batch.done" as const }) },
  {
    weight: 3,
    arbitrary: fc.constantFrom({ kind: "end.steered" as const }, { kind: "end.none" as const }),
  },
  { weight: 3, arbitrary: fc.constant({ kind: "finalize.done" as const }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("interrupt" as const), budget: fc.boolean() }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant("tick" as const), ms: fc.constantFrom(5, 20, 60) }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: "boom" as const }) },
  // Stray child reports: an error no transition takes errors the turn (a machine does so).
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      { kind: "stray error" as const, from: "batch" },
      { kind: "stray error" as const, from: "other" },
      { kind: "stray done" as const, from: "batch" },
    ),
  },
  { weight: 1, arbitrary: fc.constant({ kind: "stop" as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: "arm" as const }) },
);
type Input = typeof inputArb extends fc.Arbitrary<infer T> ? T : never;

const scenarioArb = fc.record({
  limits: limitsArb,
  inputs: fc.array(inputArb, { minLength: 1, maxLength: 40 }),
});
type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

const MATCHES = [
  "running",
  { running: "sampling" },
  { running: { sampling: "stopping" } },
  { running: "executing" },
  { running: "waiting" },
  "finalizing",
  "done",
];

class Side {
  readonly fx: Fx = { trace: [], armed: false };
  readonly clock = new SimulatedClock();
  readonly actor: AnyActorRef;
  /** The batch child the turn created (kept to see that it is stopped). */
  readonly batch: AnyActorRef | undefined;
  private readonly setAt = new Map<string, number>();
  constructor(
    host: Host,
    readonly sc: Scenario,
  ) {
    this.actor = createActor(host(this.fx), {
      input: {
        turnId: "t1",
        limits: sc.limits,
        maxParallelToolCalls: 4,
        stopDeadlineMs: 10,
        finalizeDeadlineMs: 20,
      },
      clock: this.clock,
    });
    this.actor.subscribe({ error: () => {} });
    this.actor.start();
    this.batch = this.actor.getSnapshot().children?.batch;
  }

  send(input: Input, attemptSeq: number): void {
    // An ended turn drops events whatever its logic (XState's actor); only the clock moves.
    if (this.actor.getSnapshot().status !== "active" && input.kind !== "tick") return;
    if (input.kind === "arm") {
      this.fx.armed = true;
      return;
    }
    if (input.kind === "stop") {
      this.actor.stop();
      return;
    }
    if (input.kind === "stray error") {
      const error = new Error("a late report");
      this.actor.send({ type: `xstate.error.actor.${input.from}`, error } as never);
      return;
    }
    if (input.kind === "stray done") {
      this.actor.send({ type: `xstate.done.actor.${input.from}`, output: undefined } as never);
      return;
    }
    const attempt = "stale" in input && input.stale ? attemptSeq - 1 : attemptSeq;
    switch (input.kind) {
      case "done":
        this.actor.send({
          type: "attempt.done",
          attempt,
          finishReason: input.finishReason,
          callCount: input.callCount,
          calls: Array.from({ length: Math.min(input.valid, input.callCount) }, (_, i) =>
            callSpec(i),
          ),
          needsPermission: input.needsPermission,
          tokens: input.tokens,
        });
        return;
      case "failed":
        this.actor.send({
          type: "attempt.failed",
          attempt,
          retry: input.retry ? { delayMs: 5 } : undefined,
          status: "failed",
          reason: "the provider said no",
        });
        return;
      case "allowed":
        this.actor.send({
          type: "gate.allowed",
          calls: Array.from({ length: input.count }, (_, i) => callSpec(i)),
        });
        return;
      case "declined":
        this.actor.send({ type: "gate.declined", reason: "the user said no" });
        return;
      case "interrupt":
        this.actor.send({
          type: "turn.interrupt",
          reason: "the user pressed stop",
          status: input.budget ? "budget_exhausted" : undefined,
        });
        return;
      case "tick":
        this.clock.increment(input.ms);
        return;
      case "boom":
        this.actor.getSnapshot().children?.batch?.send({ type: "boom" });
        return;
      default:
        this.actor.send({ type: input.kind });
    }
  }

  /** Everything an observer can see, and the effects since the last look. */
  look(): string {
    const s = this.actor.getSnapshot();
    const pending = this.actor.system.getSnapshot()._scheduledEvents;
    for (const key of this.setAt.keys()) if (!(key in pending)) this.setAt.delete(key);
    const timers = Object.entries(pending)
      // The machine arms a never-taken 2^31 − 1 ms deadline timer on a turn without one.
      .filter(
        ([, t]) => !(t.event.type.includes("turnDeadline") && this.sc.limits.deadlineMs === 0),
      )
      .map(([key, t]) => {
        if (!this.setAt.has(key)) this.setAt.set(key, this.clock.now());
        return `${t.event.type} (${t.delay} ms) set ${this.clock.now() - this.setAt.get(key)!} ms ago`;
      })
      .sort();
    const trace = this.fx.trace.splice(0);
    const children = Object.keys(s.children ?? {}).sort();
    // The snapshot API too: `matches` at every level of the chart.
    const matches = MATCHES.map((v) => (typeof s.matches === "function" ? s.matches(v) : "none"));
    return JSON.stringify([
      this.batch?.getSnapshot().status,
      matches,
      s.value,
      s.status,
      s.status === "error" ? String(s.error) : undefined,
      s.context,
      s.output,
      children,
      trace,
      timers,
    ]);
  }
}

/** Runs the scenario on both sides; the first input after which they differ, or undefined. */
function compare(sc: Scenario, logic: Host = logicHost): string | undefined {
  const sides = [new Side(machineHost, sc), new Side(logic, sc)];
  const log: string[] = ["start"];
  let [want, got] = sides.map((side) => side.look());
  if (want !== got) return `at start\n  machine: ${want}\n  logic:   ${got}`;
  for (const input of sc.inputs) {
    const attemptSeq = sides[0].actor.getSnapshot().context.attemptSeq;
    for (const side of sides) side.send(input, attemptSeq);
    log.push(JSON.stringify(input));
    [want, got] = sides.map((side) => side.look());
    if (want !== got) return `${log.join(" → ")}\n  machine: ${want}\n  logic:   ${got}`;
  }
  return undefined;
}

type Transition = AnyActorLogic["transition"];

/** A broken copy: wraps the logic's transition. */
function broken(wrap: (inner: Transition) => Transition): Host {
  return (trace) => {
    const logic = logicHost(trace);
    return { ...logic, transition: wrap(logic.transition) };
  };
}

const mutants: Record<string, Host> = {
  "takes a stale attempt's result": broken((inner) => (s, event, scope) => {
    const current = s.context.attemptSeq;
    return inner(s, event.attempt === undefined ? event : { ...event, attempt: current }, scope);
  }),
  "ignores the finalizer deadline": broken(
    (inner) => (s, event, scope) =>
      event.type.includes("finalizeDeadline") ? s : inner(s, event, scope),
  ),
  "forgets its batch running when it leaves running": broken(
    (inner) => (s, event, scope) => inner(s, event, { ...scope, stopChild: () => {} } as never),
  ),
  "never tells the batch to cancel": broken(
    (inner) => (s, event, scope) =>
      event.type === "turn.interrupt"
        ? inner(s, event, { ...scope, defer: () => {} } as never)
        : inner(s, event, scope),
  ),
};

describe("turnLogic against the turnMachine chart", () => {
  it("shows the same state, context, output, children, effects and timers as the machine after every event of random turns", () => {
    fc.assert(
      fc.property(scenarioArb, (sc) => {
        const difference = compare(sc);
        if (difference) throw new Error(difference);
      }),
      { numRuns: 1500, seed: 5 },
    );
  });

  for (const [name, host] of Object.entries(mutants)) {
    it(`the comparison catches a logic that ${name}`, () => {
      const result = fc.check(
        fc.property(scenarioArb, (sc) => compare(sc, host) === undefined),
        { numRuns: 1500, seed: 5 },
      );
      expect(result.failed).toBe(true);
    });
  }
});
