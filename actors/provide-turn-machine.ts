import type { BatchMachine } from "../machines/batch.machine.ts";
import { turnMachine } from "../machines/turn.machine.ts";
import { batchLogic } from "./batch-logic.ts";
import { toolCallLogic } from "./tool-call-logic.ts";
import { turnLogic } from "./turn-logic.ts";
import type { TurnRun } from "./turn-runner.ts";

/** The effects a turn statechart names, as one run performs them. */
export type TurnEffects = TurnRun["effects"];

/** The run each actor system (one per turn actor tree) belongs to. */
const runs = new WeakMap<object, TurnEffects>();
const runOf = (system: object): TurnEffects => runs.get(system)!;

/** Binds a turn's effects to the actor system of its turn actor (before it starts). */
export function bindRun(system: object, effects: TurnEffects): void {
  runs.set(system, effects);
}
const providedMachines = new WeakMap<typeof turnMachine, typeof turnMachine>();

/**
 * The turn statechart (or a test variant) with its effects bound, built once per variant and
 * shared by every turn: building machines per turn cost more than a whole step. Each action
 * finds its run through the actor system it executes in.
 *
 * The three hot charts run as their hand-compiled logic (`turnLogic`, `batchLogic`,
 * `toolCallLogic`), each checked against its machine by a differential test: hosting them
 * through XState's interpreter cost ≈ 60 % of a step. The actors stay XState actors (the same
 * tree, ids, snapshots and `@xstate.actor` / `@xstate.event` / `@xstate.snapshot` inspection
 * events). A turn variant (a test's mutant) runs as the machine it is, hosting the compiled
 * batch and calls.
 *
 * What differs from hosting the machines, for an `inspect` callback or a snapshot reader:
 * no `@xstate.action` or `@xstate.microstep` inspection events (Keel's inspector reads neither);
 * snapshots have `matches`, `hasTag` and `toJSON` but not `can`; a turn without a deadline arms
 * no never-taken timer; an effect that throws while an actor starts errors it without a
 * snapshot inspection event first (effects must not throw).
 */
export function provideTurnMachine(variant: typeof turnMachine): typeof turnMachine {
  const cached = providedMachines.get(variant);
  if (cached) return cached;
  // The tool-call chart runs as hand-compiled logic (see toolCallLogic): checked against
  // `toolCallMachine`, at a fraction of the interpreter's cost per call.
  const toolCall = toolCallLogic({
    // Answers go straight to the call's own actor: the batch learns the outcome from the
    // call's done event, so forwarding through it would only add a step.
    recordStart: (self, system, { callId }) => runOf(system).recordStart(self, callId),
    execute: (self, system, { callId }) => runOf(system).execute(self, callId),
    abort: (_self, system, { callId }) => runOf(system).abort(callId),
  });
  // The batch chart, hand-compiled likewise (see batchLogic): checked against `batchMachine`.
  const batch = batchLogic({
    toolCall,
    effects: {
      callSettled: (_self, system, result) => runOf(system).callSettled(result),
      roundDone: (_self, system) => runOf(system).roundDone(),
    },
  }) as unknown as BatchMachine;
  // The production chart runs hand-compiled too (see turnLogic); a variant (a test's mutant)
  // runs as the machine it is.
  const provided =
    variant === turnMachine
      ? (turnLogic({
          batch,
          effects: {
            prepare: (_self, system) => runOf(system).prepare(),
            startAttempt: (self, system, { attempt, step }) =>
              runOf(system).startAttempt(self, attempt, step),
            pollAtEnd: (self, system) => runOf(system).pollAtEnd(self),
            abortAttempt: (_self, system) => runOf(system).abortAttempt(),
            refuseCalls: (_self, system) => runOf(system).refuseCalls(),
            checkPermissions: (self, system) => runOf(system).checkPermissions(self),
            rejectInvalid: (_self, system) => runOf(system).rejectInvalid(),
            commitBatch: (_self, system) => runOf(system).commitBatch(),
            retryScheduled: (_self, system, { delayMs, attempt }) =>
              runOf(system).retryScheduled(delayMs, attempt),
            cancelAcknowledged: (_self, system, { reason }) =>
              runOf(system).cancelAcknowledged(reason),
            executionStopped: (_self, system) => runOf(system).executionStopped(),
            finalize: (self, system, params) => runOf(system).finalize(self, params),
            ended: (_self, system, { status, reason }) => runOf(system).ended(status, reason),
          },
        }) as unknown as typeof turnMachine)
      : (variant.provide({
          actors: { batch },
          actions: {
            prepare: ({ system }) => runOf(system).prepare(),
            startAttempt: ({ self, system }, { attempt, step }) =>
              runOf(system).startAttempt(self, attempt, step),
            pollAtEnd: ({ self, system }) => runOf(system).pollAtEnd(self),
            abortAttempt: ({ system }) => runOf(system).abortAttempt(),
            refuseCalls: ({ system }) => runOf(system).refuseCalls(),
            checkPermissions: ({ self, system }) => runOf(system).checkPermissions(self),
            rejectInvalid: ({ system }) => runOf(system).rejectInvalid(),
            commitBatch: ({ system }) => runOf(system).commitBatch(),
            retryScheduled: ({ system }, { delayMs, attempt }) =>
              runOf(system).retryScheduled(delayMs, attempt),
            cancelAcknowledged: ({ system }, { reason }) =>
              runOf(system).cancelAcknowledged(reason),
            executionStopped: ({ system }) => runOf(system).executionStopped(),
            finalize: ({ self, system }, params) => runOf(system).finalize(self, params),
            ended: ({ system }, { status, reason }) => runOf(system).ended(status, reason),
          },
        }) as typeof turnMachine);
  providedMachines.set(variant, provided);
  return provided;
}
