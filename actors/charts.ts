import type { ActorSystem } from "xstate";
import { type BatchEffects, batchMachine } from "../machines/batch.machine.ts";
import { type ToolCallEffects, toolCallMachine } from "../machines/tool-call.machine.ts";
import { type TurnEffects, turnMachine } from "../machines/turn.machine.ts";

// biome-ignore lint/suspicious/noExplicitAny: any actor system (its type parameter is the tree's)
type System = ActorSystem<any>;

/** The effects of the turn each actor system (one per turn actor tree) belongs to. */
const runs = new WeakMap<System, TurnEffects>();
const runOf = (system: System): TurnEffects => runs.get(system)!;

/**
 * Binds one turn's effects to the actor system of its turn actor. Call it after
 * `createActor(hostedTurnMachine(...))` and before `start()`: every actor of the tree (the turn,
 * its batch, each call) finds the effects through the system it runs in.
 */
export function bindEffects(system: System, effects: TurnEffects): void;
/** A batch hosted alone (tests): only the batch's and its calls' effects are needed. */
export function bindEffects(system: System, effects: BatchEffects & ToolCallEffects): void;
export function bindEffects(system: System, effects: BatchEffects & ToolCallEffects): void {
  runs.set(system, effects as TurnEffects);
}

const hostedBatches = new WeakMap<typeof batchMachine, typeof batchMachine>();

/**
 * The batch chart (`batchMachine`, or a test's variant) hosting the tool-call chart, with their
 * effects bound through {@link bindEffects}; built once per variant: building machines per turn
 * would cost more than a whole step. Each action finds its turn through `system`.
 */
export function hostedBatchMachine(
  variant: typeof batchMachine = batchMachine,
): typeof batchMachine {
  const cached = hostedBatches.get(variant);
  if (cached) return cached;
  const machine = variant.provide({
    actors: {
      toolCall: toolCallMachine.provide({
        actions: {
          recordStart: ({ self, system }, call) => runOf(system).recordStart(self, call),
          execute: ({ self, system }, call) => runOf(system).execute(self, call),
          abort: ({ system }, call) => runOf(system).abort(call),
          stopping: ({ system }, call) => runOf(system).stopping(call),
        },
      }),
    },
    actions: {
      callSettled: ({ system }, result) => runOf(system).callSettled(result),
      roundDone: ({ self, system }, output) => runOf(system).roundDone(self, output),
    },
  });
  hostedBatches.set(variant, machine);
  return machine;
}

const hosted = new WeakMap<typeof turnMachine, typeof turnMachine>();

/**
 * The turn chart (`turnMachine`, or a test's variant of it) with every effect of the turn, its
 * batch and its calls bound through {@link bindEffects}. This is the only place the runtime
 * connects the charts to their effects: `machine.provide` of XState, nothing else. Built once
 * per variant and shared by every turn.
 */
export function hostedTurnMachine(variant: typeof turnMachine = turnMachine): typeof turnMachine {
  const cached = hosted.get(variant);
  if (cached) return cached;
  const machine = variant.provide({
    actors: { batch: hostedBatchMachine() },
    actions: {
      prepare: ({ system }) => runOf(system).prepare(),
      startAttempt: ({ self, system }, params) => runOf(system).startAttempt(self, params),
      abortAttempt: ({ system }, params) => runOf(system).abortAttempt(params),
      pollAtEnd: ({ self, system }) => runOf(system).pollAtEnd(self),
      refuseCalls: ({ system }) => runOf(system).refuseCalls(),
      checkPermissions: ({ self, system }) => runOf(system).checkPermissions(self),
      correctCalls: ({ system }, params) => runOf(system).correctCalls(params),
      declineCalls: ({ system }, params) => runOf(system).declineCalls(params),
      rejectInvalid: ({ system }) => runOf(system).rejectInvalid(),
      commitBatch: ({ system }) => runOf(system).commitBatch(),
      retryScheduled: ({ system }, params) => runOf(system).retryScheduled(params),
      cancelAcknowledged: ({ system }, params) => runOf(system).cancelAcknowledged(params),
      executionStopped: ({ system }) => runOf(system).executionStopped(),
      finalize: ({ self, system }, params) => runOf(system).finalize(self, params),
      ended: ({ system }, params) => runOf(system).ended(params),
    },
  });
  hosted.set(variant, machine);
  return machine;
}
