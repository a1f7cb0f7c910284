import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AnyActorLogic, createActor, SimulatedClock } from "xstate";
import { type ToolCallEffects, toolCallLogic } from "../actors/tool-call-logic.ts";
import { toolCallMachine } from "../machines/tool-call.machine.ts";

/**
 * The runtime hosts every tool call with `toolCallLogic`, a hand-compiled copy of the
 * `toolCallMachine` chart; the model tests, the paths tests and the inspector's chart use the
 * machine. This test searches every reachable state under every input (and random long input
 * sequences) and requires both to be indistinguishable after every input: state value, status, context,
 * output, the effects run and their order, and the timers pending on the clock. So what the
 * machine's tests prove (write-ahead, one final outcome, result-before-deadline wins) holds
 * for what the runtime runs. Three broken copies show the search catching a difference.
 */

/** Short, so the times a pending deadline can have are few and the search stays finite. */
const DEADLINE = 4;

type Input =
  | "recorded"
  | "complete"
  | "fail"
  | "cancel"
  | "aborted"
  | "tick" // the clock moves DEADLINE - 1 ms
  | "tick1" // the clock moves 1 ms
  | "stray error" // a child's error event no transition takes: the actor errors
  | "stop"; // the actor is stopped
const INPUTS: Input[] = [
  "recorded",
  "complete",
  "fail",
  "cancel",
  "aborted",
  "tick",
  "tick1",
  "stray error",
  "stop",
];

const STATES = ["recording", "started", "stopping", "settled", "unknown"];

type Impl = { name: string; make: (fx: ToolCallEffects) => AnyActorLogic };

const machineImpl: Impl = {
  name: "machine",
  make: (fx) =>
    toolCallMachine.provide({
      actions: {
        recordStart: ({ self, system }, p) => fx.recordStart(self as never, system, p),
        execute: ({ self, system }, p) => fx.execute(self as never, system, p),
        abort: ({ self, system }, p) => fx.abort(self as never, system, p),
      },
    }),
};
const logicImpl: Impl = { name: "logic", make: toolCallLogic };

/**
 * One run of `inputs` against `impl`: what an observer sees after the start and after each
 * input, as [state, effects run by that input]. The state is the snapshot's value, status,
 * context and output, and every pending timer with its delay and the time since it was set. Inputs after the call ended are not
 * sent (an ended XState actor drops them whatever its logic; only the clock still moves).
 */
function observe(impl: Impl, cancellable: boolean, inputs: Input[]): [string, string][] {
  const clock = new SimulatedClock();
  let effects: string[] = [];
  const logic = impl.make({
    recordStart: (_s, _y, p) => effects.push(`recordStart ${p.callId} ${p.name}`),
    execute: (_s, _y, p) => effects.push(`execute ${p.callId} ${p.name}`),
    abort: (_s, _y, p) => effects.push(`abort ${p.callId} ${p.name}`),
  });
  const input = { callId: "c1", name: "edit", cancellable, stopDeadlineMs: DEADLINE };
  const actor = createActor(logic, { input, clock });
  // The stray error event errors the actor; its error is observed through the snapshot, and
  // this listener keeps XState from rethrowing it as an uncaught exception.
  actor.subscribe({ error: () => {} });
  actor.start();
  const seen: [string, string][] = [];
  // When each pending timer was first seen, on the simulated clock (XState stamps real time).
  const setAt = new Map<string, number>();
  const look = () => {
    const s = actor.getSnapshot();
    const pending = actor.system.getSnapshot()._scheduledEvents;
    for (const key of setAt.keys()) if (!(key in pending)) setAt.delete(key);
    const timers = Object.entries(pending).map(([key, t]) => {
      if (!setAt.has(key)) setAt.set(key, clock.now());
      return `${t.event.type} (${t.delay} ms) set ${clock.now() - setAt.get(key)!} ms ago`;
    });
    // The snapshot API too: `matches` for every state of the chart.
    const matches = STATES.map((v) => (typeof s.matches === "function" ? s.matches(v) : "none"));
    const state = [s.value, s.status, String(s.error), s.context, s.output, timers, matches];
    seen.push([JSON.stringify(state), effects.join()]);
    effects = [];
  };
  look();
  for (const what of inputs) {
    const active = actor.getSnapshot().status === "active";
    const result = { ok: true as const, content: "the tool's result" };
    const failure = { ok: false as const, code: "X", message: "the tool failed", retryable: false };
    if (what === "tick") clock.increment(DEADLINE - 1);
    else if (what === "tick1") clock.increment(1);
    else if (!active) {
      // dropped by the actor
    } else if (what === "recorded") actor.send({ type: "call.recorded" });
    else if (what === "complete") actor.send({ type: "call.complete", result });
    else if (what === "fail") actor.send({ type: "call.fail", result: failure });
    else if (what === "cancel") actor.send({ type: "call.cancel", reason: "interrupt" });
    else if (what === "aborted") actor.send({ type: "call.aborted" });
    else if (what === "stop") actor.stop();
    else actor.send({ type: "xstate.error.actor.x", error: new Error("late") } as never);
    look();
  }
  return seen;
}

/**
 * Breadth-first over the states both reach (the pair of observed states is the key), every
 * input from each: the reachable state space is finite (a deadline fires or the call ends), so
 * this covers every input sequence of any length. Returns the first sequence on which `impl`
 * shows something the machine does not, or undefined; and how many states it visited.
 */
function firstDifference(impl: Impl): { difference?: string; states: number } {
  let states = 0;
  for (const cancellable of [true, false]) {
    const seen = new Set<string>();
    const queue: Input[][] = [[]];
    while (queue.length > 0) {
      const seq = queue.shift()!;
      const want = observe(machineImpl, cancellable, seq);
      const got = observe(impl, cancellable, seq);
      const k = want.findIndex((w, i) => w.join(" | ") !== got[i].join(" | "));
      if (k >= 0) {
        const difference = `cancellable=${cancellable} after [${seq.slice(0, k).join(", ")}]\n  machine: ${want[k].join(" | ")}\n  ${impl.name}: ${got[k].join(" | ")}`;
        return { difference, states };
      }
      const key = `${want.at(-1)![0]} / ${got.at(-1)![0]}`;
      if (seen.has(key)) continue;
      seen.add(key);
      states++;
      for (const next of INPUTS) queue.push([...seq, next]);
    }
  }
  return { states };
}

/** Broken copies of the logic: each changes one rule of the chart. */
const mutants: Record<string, Impl> = {
  // Write-ahead broken: the tool runs as soon as the call's actor exists.
  executesBeforeRecorded: {
    name: "executesBeforeRecorded",
    make: (fx) => {
      const logic = toolCallLogic(fx);
      return {
        ...logic,
        start: (s, scope) => {
          logic.start?.(s, scope);
          fx.execute(scope.self, scope.system, { callId: s.context.callId, name: s.context.name });
        },
      };
    },
  },
  // A cancel after the tool finished its work wins over the real result.
  deadlineBeatsResult: {
    name: "deadlineBeatsResult",
    make: (fx) => {
      const logic = toolCallLogic(fx);
      return {
        ...logic,
        transition: (s, event, scope) =>
          s.value === "stopping" && event.type === "call.complete"
            ? logic.transition(s, { type: "call.aborted" }, scope)
            : logic.transition(s, event, scope),
      };
    },
  },
  // A cancelled call that ignores its abort waits forever instead of going unknown.
  forgetsStopDeadline: {
    name: "forgetsStopDeadline",
    make: (fx) => {
      const logic = toolCallLogic(fx);
      return {
        ...logic,
        transition: (s, event, scope) => {
          const next = logic.transition(s, event, scope);
          if (next.value === "stopping" && s.value !== "stopping") {
            scope.system.scheduler.cancelAll(scope.self);
          }
          return next;
        },
      };
    },
  },
};

describe("toolCallLogic against the toolCallMachine chart", () => {
  it("is indistinguishable from the machine in every reachable state under every input: state, context, output, effects in order, the pending deadline", () => {
    const { difference, states } = firstDifference(logicImpl);
    expect(difference).toBeUndefined();
    // recording, started, stopping at each time left, and the final states (both tool kinds).
    expect(states).toBeGreaterThan(10);
  });

  it("is indistinguishable from the machine on random sequences of up to 24 inputs", () => {
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.array(fc.constantFrom(...INPUTS), { maxLength: 24 }),
        (cancellable, seq) => {
          expect(observe(logicImpl, cancellable, seq)).toEqual(
            observe(machineImpl, cancellable, seq),
          );
        },
      ),
      { numRuns: 300, seed: 7 },
    );
  });

  for (const [name, mutant] of Object.entries(mutants)) {
    it(`the search catches the broken copy that ${name}`, () => {
      expect(firstDifference(mutant).difference).toBeDefined();
    });
  }

  it("an effect that throws errors the call's actor, as a throwing action errors the machine", () => {
    for (const impl of [machineImpl, logicImpl]) {
      const boom = () => {
        throw new Error("store down");
      };
      const logic = impl.make({ recordStart: boom, execute: boom, abort: boom });
      const input = { callId: "c1", name: "edit", cancellable: true, stopDeadlineMs: DEADLINE };
      const actor = createActor(logic, { input });
      actor.subscribe({ error: () => {} });
      actor.start();
      expect(actor.getSnapshot().status, impl.name).toBe("error");
      expect(String(actor.getSnapshot().error), impl.name).toMatch(/store down/);
    }
  });
});
