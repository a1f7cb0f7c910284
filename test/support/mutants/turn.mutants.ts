import { assign, createMachine } from "xstate";
import { budgetReason, firstExhausted } from "../../../machines/policies/budget.ts";
import { turnMachine } from "../../../machines/turn.machine.ts";

/** Broken on purpose: the length gate never fires, so a truncated message's calls execute. */
export const ignoresLengthTurnMachine = turnMachine.provide({
  guards: { lengthWithCalls: () => false },
});

/**
 * Broken on purpose: the loop guard's verdict is never read, so a call failing the same way
 * forever keeps the turn sampling (until maxSteps) instead of ending it `loop_detected`.
 */
export const ignoresLoopsTurnMachine = turnMachine.provide({
  guards: { loopDetected: () => false },
});

/** Broken on purpose: events of an older attempt are taken as the current one's. */
export const acceptsStaleAttemptsTurnMachine = turnMachine.provide({
  guards: { isCurrentAttempt: () => true },
});

// biome-ignore lint/suspicious/noExplicitAny: surgery on a machine's raw config
type Config = any;

/** The turn machine with `running.states.executing` replaced by `edit(executing, running)`. */
function withExecuting(edit: (executing: Config, running: Config) => Config): typeof turnMachine {
  const config: Config = turnMachine.config;
  const running = config.states.running;
  const executing = edit(running.states.executing, running);
  const mutated = {
    ...config,
    states: { ...config.states, running: { ...running, states: { ...running.states, executing } } },
  };
  return createMachine(
    mutated,
    // biome-ignore lint/suspicious/noExplicitAny: implementations of the same machine
    turnMachine.implementations as any,
  ) as unknown as typeof turnMachine;
}

/**
 * Broken on purpose: an interrupt while a batch runs leaves `executing` at once, stopping the
 * batch, so running calls are settled by the finalizer without their real outcome.
 */
export const abandonsBatchTurnMachine = withExecuting((executing, running) => ({
  ...executing,
  states: {
    ...executing.states,
    running: {
      on: {
        "turn.interrupt": {
          target: "#turn.finalizing",
          actions: running.on["turn.interrupt"].actions,
        },
      },
    },
  },
}));

/**
 * Broken on purpose: steering is also drained when a batch starts, so a steer can land
 * between an assistant's tool calls and their results (invariant 11 of docs/architecture.md).
 */
export const steersMidBatchTurnMachine = withExecuting((executing) => ({
  ...executing,
  entry: [...executing.entry, "prepare"],
}));

/**
 * Broken on purpose: a compaction also starts when a batch round starts, so it runs beside
 * the batch and can cut between its calls and their results (invariant 10 of docs/architecture.md).
 */
export const compactsMidBatchTurnMachine = withExecuting((executing) => ({
  ...executing,
  entry: [...executing.entry, { type: "compact", params: { mode: "auto" } }],
}));

/**
 * Broken on purpose: an interrupt during `finalizing` re-enters it, which re-runs the finalizer
 * and arms its deadline again, so repeated interrupts postpone the end of the turn for ever.
 * The state's value and context do not change: only a search whose key holds the deadline's
 * due time (and that checks re-arming) sees it.
 */
export const rearmsFinalizerTurnMachine = (() => {
  const config: Config = turnMachine.config;
  const finalizing = config.states.finalizing;
  const mutated = {
    ...config,
    states: {
      ...config.states,
      finalizing: {
        ...finalizing,
        on: { ...finalizing.on, "turn.interrupt": { target: "finalizing", reenter: true } },
      },
    },
  };
  return createMachine(
    mutated,
    // biome-ignore lint/suspicious/noExplicitAny: implementations of the same machine
    turnMachine.implementations as any,
  ) as unknown as typeof turnMachine;
})();

/**
 * Broken on purpose (invariant 7 of docs/architecture.md): the turn's retry timer waits twice the remaining wait it was
 * given, as a layer that re-adds a Retry-After it was handed already converted would.
 */
export const waitsRetryTwiceTurnMachine = turnMachine.provide({
  delays: { retryDelay: ({ context }) => 2 * context.retryDelayMs },
});

/**
 * Broken on purpose (invariants 13, 15): the finalizer's report that its flush was refused is
 * ignored, so a turn whose end never reached the log still ends `completed`.
 */
export const ignoresRefusedFinalizeTurnMachine = turnMachine.provide({
  guards: { finalizeFailed: () => false },
});

/**
 * Broken on purpose (invariant 13): an attempt's request goes out without waiting for its start
 * to be durable, so a runner whose write was fenced still asks the model.
 */
export const sendsBeforeRecordedTurnMachine = (() => {
  const config: Config = turnMachine.config;
  const running = config.states.running;
  const sampling = running.states.sampling;
  const mutated = {
    ...config,
    states: {
      ...config.states,
      running: {
        ...running,
        states: {
          ...running.states,
          sampling: {
            ...sampling,
            states: {
              ...sampling.states,
              // The attempt's start is written (entry), then the request goes out at once.
              preparing: { ...sampling.states.preparing, always: "streaming" },
              recording: { ...sampling.states.recording, always: "streaming" },
            },
          },
        },
      },
    },
  };
  return createMachine(
    mutated,
    // biome-ignore lint/suspicious/noExplicitAny: implementations of the same machine
    turnMachine.implementations as any,
  ) as unknown as typeof turnMachine;
})();

/**
 * Broken on purpose: only the turn's own budget is read, as if every turn (every acceptance
 * round, every follow-up) started the prompt's, session's and agent's budgets afresh.
 */
export const ignoresWiderBudgetsTurnMachine = turnMachine.provide({
  guards: {
    budgetExhausted: ({ context }) =>
      firstExhausted(context.scopes.slice(0, 1), context.spent) !== undefined,
  },
  actions: {
    exhaustBudget: assign(({ context }) => {
      const budget = firstExhausted(context.scopes.slice(0, 1), context.spent)!;
      return { status: "budget_exhausted" as const, reason: budgetReason(budget), budget };
    }),
  },
});

/**
 * Broken on purpose: a step's batch commits and the turn ends there, instead of asking the
 * model again (`keel replay` shows where a session stops agreeing with its log).
 */
export const stopsAfterFirstStepTurnMachine = withExecuting((executing) => ({
  ...executing,
  on: {
    ...executing.on,
    "batch.done": executing.on["batch.done"].map((t: Config) =>
      t.target === "#turn.running.sampling.preparing" ? { ...t, target: "#turn.finalizing" } : t,
    ),
  },
}));
