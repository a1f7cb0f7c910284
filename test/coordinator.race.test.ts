import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type CoordinatorState,
  CoordinatorStoppedError,
  createCoordinator,
} from "../actors/coordinator.ts";
import type { InboxLane } from "../contracts/status.ts";
import type { CoordinatorMachine } from "../machines/coordinator.machine.ts";
import {
  clear,
  drain,
  emptyInbox,
  type InboxEvent,
  queued,
  receive,
} from "../machines/policies/inbox.ts";
import { coordinatorDropsWake } from "./support/mutants/coordinator-drops-wake.ts";
import { coordinatorIdleAfterCleanup } from "./support/mutants/coordinator-idle-after-cleanup.ts";
import { coordinatorInterruptDropsLaterWake } from "./support/mutants/coordinator-interrupt-drops-later-wake.ts";

/** Fixed so every run explores the same interleavings; change it to explore others. */
const SEED = 0x6b65656c;

function deferred() {
  let resolve!: () => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets every already-queued promise callback run (a barrier, not a timed sleep). */
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A coordinator whose every run and cleanup is a barrier the test releases by hand. */
function harness(options: { machine?: CoordinatorMachine; pending?: () => boolean } = {}) {
  const runs: (ReturnType<typeof deferred> & { signal: AbortSignal })[] = [];
  const cleanups: ReturnType<typeof deferred>[] = [];
  const states: CoordinatorState["value"][] = [];
  const coordinator = createCoordinator({
    ...options,
    run: (signal) => {
      const barrier = { ...deferred(), signal };
      runs.push(barrier);
      return barrier.promise;
    },
    cleanup: () => {
      const barrier = deferred();
      cleanups.push(barrier);
      return barrier.promise;
    },
    onStateChange: (state) => states.push(state.value),
  });
  /** Ends the latest run and its cleanup. */
  const finish = async () => {
    runs.at(-1)?.resolve();
    await flush();
    cleanups.at(-1)?.resolve();
    await flush();
  };
  return { runs, cleanups, states, coordinator, finish };
}

describe("coordinator: each window where a wake-up can be lost", () => {
  it("an input that arrives during the runner's last drain starts a successor for it", async () => {
    const { runs, coordinator, finish } = harness();
    coordinator.wake();
    coordinator.wake(); // the runner has drained and is deciding to exit
    expect(coordinator.state()).toMatchObject({
      value: "running",
      pendingWake: { seq: 2 },
    });
    await finish();
    expect(runs).toHaveLength(2);
    expect(coordinator.state()).toMatchObject({
      value: "running",
      execution: 2,
      pendingWake: null,
    });
    await finish();
    expect(coordinator.state().value).toBe("idle");
  });

  it("an input that arrives after the drain but before idle (during cleanup) is handed to a successor", async () => {
    const { runs, cleanups, coordinator } = harness();
    coordinator.wake();
    runs[0].resolve();
    await flush();
    expect(coordinator.state().value).toBe("cleaning");
    coordinator.wake();
    cleanups[0].resolve();
    await flush();
    expect(runs).toHaveLength(2);
  });

  it("a wake during interrupt cleanup is kept: the doorbell holds the latest wake", async () => {
    const { runs, cleanups, coordinator } = harness();
    coordinator.wake();
    coordinator.interrupt();
    expect(runs[0].signal.aborted).toBe(true);
    expect(coordinator.state().value).toBe("stopping");
    coordinator.wake(); // submitted after the interrupt: must survive it
    runs[0].resolve();
    await flush();
    coordinator.wake();
    coordinator.wake();
    expect(coordinator.state().pendingWake?.seq).toBe(5);
    cleanups[0].resolve();
    await flush();
    expect(runs).toHaveLength(2);
    expect(runs[1].signal.aborted).toBe(false);
    expect(coordinator.state().lastOutcome).toBe("interrupted");
  });

  it("an interrupt clears the wakes submitted before it: no successor runs for them", async () => {
    const { runs, coordinator, finish } = harness();
    coordinator.wake();
    coordinator.wake();
    coordinator.interrupt();
    expect(coordinator.state().pendingWake).toBeNull();
    await finish();
    expect(runs).toHaveLength(1);
    expect(coordinator.state().value).toBe("idle");
  });

  it("a wake that races a failing run still gets a successor, after cleanup, and the failure is recorded", async () => {
    const { runs, cleanups, coordinator } = harness();
    coordinator.wake();
    runs[0].reject(new Error("model exploded"));
    coordinator.wake(); // same tick: the rejection has not been observed yet
    await flush();
    expect(coordinator.state()).toMatchObject({ value: "cleaning", lastOutcome: "failed" });
    expect(coordinator.state().lastError).toContain("model exploded");
    cleanups[0].resolve();
    await flush();
    expect(runs).toHaveLength(2);
  });

  it("a run that throws synchronously is a failed run that still goes through cleanup and handover", async () => {
    let calls = 0;
    let cleaned = 0;
    const coordinator = createCoordinator({
      run: () => {
        calls += 1;
        if (calls === 1) throw new TypeError("bad run");
        return Promise.resolve();
      },
      cleanup: async () => {
        cleaned += 1;
      },
      pending: () => calls === 1,
    });
    coordinator.wake();
    await coordinator.awaitIdle();
    expect({ calls, cleaned, state: coordinator.state().value }).toEqual({
      calls: 2,
      cleaned: 2,
      state: "idle",
    });
  });

  it("the host's re-check at the handover starts a successor when a failed run left work queued", async () => {
    let queuedWork = true;
    const { runs, coordinator, finish } = harness({ pending: () => queuedWork });
    coordinator.wake();
    runs[0].reject(new Error("crashed before draining"));
    await flush();
    await finish();
    expect(runs).toHaveLength(2);
    queuedWork = false;
    await finish();
    expect(coordinator.state().value).toBe("idle");
  });

  it("awaitSettlement waits for the current execution only; awaitIdle also waits for successors", async () => {
    const { coordinator, runs, cleanups } = harness();
    await coordinator.awaitSettlement(); // idle: at once
    await coordinator.awaitIdle();
    coordinator.wake();
    coordinator.wake();
    const seen: string[] = [];
    coordinator.awaitSettlement().then(() => seen.push("settled"));
    coordinator.awaitIdle().then(() => seen.push("idle"));
    runs[0].resolve();
    await flush();
    expect(seen).toEqual([]); // cleanup is part of the execution
    cleanups[0].resolve();
    await flush();
    expect(seen).toEqual(["settled"]);
    expect(coordinator.state().value).toBe("running");
    runs[1].resolve();
    await flush();
    cleanups[1].resolve();
    await flush();
    expect(seen).toEqual(["settled", "idle"]);
  });

  it("stop aborts the run and rejects pending awaits with CoordinatorStoppedError", async () => {
    const { coordinator, runs } = harness();
    coordinator.wake();
    const idle = coordinator.awaitIdle();
    coordinator.stop();
    expect(runs[0].signal.aborted).toBe(true);
    await expect(idle).rejects.toBeInstanceOf(CoordinatorStoppedError);
    await expect(coordinator.awaitSettlement()).rejects.toBeInstanceOf(CoordinatorStoppedError);
  });

  it("the exit-window scenarios lose the wake on the mutants (the barrier tests can fail)", async () => {
    for (const machine of [coordinatorDropsWake, coordinatorIdleAfterCleanup]) {
      const { runs, coordinator, finish } = harness({ machine });
      coordinator.wake();
      coordinator.wake();
      await finish();
      expect(runs).toHaveLength(1);
      expect(coordinator.state().value).toBe("idle");
    }
  });
});

interface Plan {
  producers: { lane: InboxLane; replay: boolean }[];
  interrupts: number;
  /** Per run index: whether that run fails (at its exit, or mid-drain with `crashMidway`). */
  failures: boolean[];
}

const planArb: fc.Arbitrary<Plan> = fc.record({
  producers: fc.array(
    fc.record({ lane: fc.constantFrom<InboxLane>("next-step", "next-turn"), replay: fc.boolean() }),
    { minLength: 1, maxLength: 6 },
  ),
  interrupts: fc.nat({ max: 2 }),
  failures: fc.array(fc.boolean(), { maxLength: 4 }),
});

/**
 * Producers, runs, cleanups and interrupts interleaved by the fast-check scheduler over a real
 * inbox. Returns a description of the broken invariant (§10.6), or null.
 */
async function simulate(
  s: fc.Scheduler,
  plan: Plan,
  options: { machine?: CoordinatorMachine; recheck: boolean; crashMidway: boolean },
): Promise<string | null> {
  let inbox = emptyInbox();
  const consumed = new Map<string, number>();
  const take = (events: InboxEvent[]) => {
    for (const e of events) consumed.set(e.id, (consumed.get(e.id) ?? 0) + 1);
  };
  let runCount = 0;
  const coordinator = createCoordinator({
    machine: options.machine,
    run: async (signal) => {
      const me = runCount++;
      const fails = plan.failures[me] ?? false;
      for (;;) {
        await s.schedule(Promise.resolve(`run ${me} drains`));
        if (signal.aborted) return;
        if (fails && options.crashMidway) throw new Error(`run ${me} crashed`);
        const steer = drain(inbox, "next-step", "one-at-a-time");
        const next = steer.events.length > 0 ? steer : drain(inbox, "next-turn", "one-at-a-time");
        if (next.events.length === 0) break; // the last drain found nothing
        inbox = next.inbox;
        take(next.events);
      }
      await s.schedule(Promise.resolve(`run ${me} exits`));
      if (fails) throw new Error(`run ${me} failed while exiting`);
    },
    cleanup: () => s.schedule(Promise.resolve("cleanup")).then(() => undefined),
    pending: options.recheck ? () => queued(inbox).length > 0 : undefined,
  });
  const arrive = s.scheduleFunction(async (label: string) => label);
  plan.producers.forEach((p, i) => {
    const event: InboxEvent = { id: `e${i}`, source: "user", lane: p.lane, body: `m${i}`, seq: i };
    const deliver = () => {
      const result = receive(inbox, event);
      inbox = result.inbox;
      if (result.type === "accepted") coordinator.wake();
    };
    arrive(`produce e${i}`).then(deliver);
    if (p.replay) arrive(`replay e${i}`).then(deliver);
  });
  for (let i = 0; i < plan.interrupts; i++) {
    arrive(`interrupt ${i}`).then(() => {
      const result = clear(inbox); // an interrupt discards what was queued before it
      inbox = result.inbox;
      take(result.cleared);
      coordinator.interrupt();
    });
  }
  await s.waitIdle();
  const state = coordinator.state();
  if (state.value !== "idle") return `coordinator ended ${state.value}`;
  if (queued(inbox).length > 0) return `stranded: ${queued(inbox).map((e) => e.id)}`;
  for (let i = 0; i < plan.producers.length; i++) {
    if (consumed.get(`e${i}`) !== 1) return `e${i} consumed ${consumed.get(`e${i}`) ?? 0} times`;
  }
  await coordinator.awaitIdle();
  return null;
}

const property = (options: Parameters<typeof simulate>[2]) =>
  fc.asyncProperty(fc.scheduler(), planArb, async (s, plan) => {
    const violation = await simulate(s, plan, options);
    if (violation !== null) throw new Error(violation);
  });

describe("coordinator under the fast-check scheduler", () => {
  it("every inbox event is consumed exactly once and the coordinator ends idle, in every interleaving of producers, runs, failures and interrupts", async () => {
    await fc.assert(property({ recheck: false, crashMidway: false }), { numRuns: 300, seed: SEED });
  });

  it("with the host's re-check, even runs that crash mid-drain strand no event", async () => {
    await fc.assert(property({ recheck: true, crashMidway: true }), { numRuns: 300, seed: SEED });
  });

  it("without the re-check, a run that crashes mid-drain strands its inputs (why `pending` exists)", async () => {
    const result = await fc.check(property({ recheck: false, crashMidway: true }), {
      numRuns: 300,
      seed: SEED,
    });
    expect(result.failed).toBe(true);
    expect(String(result.errorInstance)).toMatch(/stranded/);
  });

  it.each([
    ["drops a wake while running", coordinatorDropsWake],
    ["goes idle after cleanup without answering the doorbell", coordinatorIdleAfterCleanup],
    ["lets an interrupt drop a wake submitted after it", coordinatorInterruptDropsLaterWake],
  ])("the property FAILS on a mutant that %s", async (_name, machine) => {
    const result = await fc.check(property({ machine, recheck: false, crashMidway: false }), {
      numRuns: 300,
      seed: SEED,
    });
    expect(result.failed).toBe(true);
    expect(String(result.errorInstance)).toMatch(/stranded|consumed 0 times/);
  });
});
