import { assign } from "xstate";
import { type BatchPolicy, createBatchMachine } from "../../../machines/batch.machine.ts";
import {
  type BatchCallSpec,
  type Scheduler,
  scheduleBatch,
} from "../../../machines/policies/batch-schedule.ts";

/** BROKEN on purpose: schedules as if no call had a resource key. */
export const ignoresResourceKeys: Scheduler = (state) =>
  scheduleBatch({ ...state, calls: state.calls.map(({ resourceKey: _, ...call }) => call) });

/** BROKEN on purpose: treats unsafe calls as concurrency-safe, so they overlap others. */
export const unsafeRunsBesideOthers: Scheduler = (state) =>
  scheduleBatch({ ...state, calls: state.calls.map((c) => ({ ...c, concurrencySafe: true })) });

/** BROKEN on purpose: ignores `maxParallelToolCalls`: every safe call starts at once. */
export const ignoresMaxParallel: Scheduler = (state) =>
  scheduleBatch({ ...state, maxParallel: Number.POSITIVE_INFINITY });

/** BROKEN on purpose: ignores `executionMode: "sequential"`. */
export const ignoresSequential: Scheduler = (state) =>
  scheduleBatch({ ...state, sequential: false });

/**
 * BROKEN on purpose: a new round keeps the last round's `cancelled` flag, so after one
 * cancelled round the long-lived batch never starts a call again.
 */
const keepsCancelAcrossRounds = createBatchMachine().provide({
  actions: {
    beginRound: assign(({ event }) => {
      const calls = (event as unknown as { calls: BatchCallSpec[] }).calls;
      return {
        calls,
        index: Object.fromEntries(calls.map((c, i) => [c.callId, i])),
        phases: calls.map(() => "pending" as const),
        outcomes: calls.map(() => undefined),
        results: calls.map(() => undefined),
        actorIds: calls.map(() => undefined),
        completionOrder: [],
      };
    }),
  },
});

/** The broken policies; `createBatchMachine(policy)` builds the batch chart with one of them. */
export const batchMutantPolicies = {
  ignoresResourceKeys: { schedule: ignoresResourceKeys },
  unsafeRunsBesideOthers: { schedule: unsafeRunsBesideOthers },
  ignoresSequential: { schedule: ignoresSequential },
  ignoresMaxParallel: { schedule: ignoresMaxParallel },
} satisfies Record<string, Partial<BatchPolicy>>;

/** Batches built with one broken policy each; every invariant check must catch its mutant. */
export const batchMutants = {
  ignoresResourceKeys: createBatchMachine(batchMutantPolicies.ignoresResourceKeys),
  unsafeRunsBesideOthers: createBatchMachine(batchMutantPolicies.unsafeRunsBesideOthers),
  ignoresSequential: createBatchMachine(batchMutantPolicies.ignoresSequential),
  ignoresMaxParallel: createBatchMachine(batchMutantPolicies.ignoresMaxParallel),
  keepsCancelAcrossRounds,
  /**
   * Names each call's actor after its call id: every call then has its own
   * `xstate.done.actor.<id>` event type, which XState caches per machine forever (a leak).
   */
  childIdPerCall: createBatchMachine({
    childIds: (c, start) => start.map((i) => c.calls[i].callId),
  }),
  /** Gives every starting call the same child id, even while another call's actor holds it. */
  reusesBusySlot: createBatchMachine({ childIds: (_, start) => start.map(() => "slot0") }),
};
