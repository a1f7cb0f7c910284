import { type AnyStateMachine, createMachine } from "xstate";
import { toolCallMachine } from "../../../machines/tool-call.machine.ts";

/**
 * BROKEN on purpose: the real tool-call chart, except `settled` is not final and a late
 * `call.cancel` overwrites the outcome with "cancelled". Invariant 2 of docs/architecture.md checks must catch it.
 */
export const overwritableToolCallMachine: AnyStateMachine = createMachine(
  {
    ...toolCallMachine.config,
    states: {
      ...toolCallMachine.config.states,
      settled: { on: { "call.cancel": { target: "settled", actions: "settleCancelled" } } },
    },
    // biome-ignore lint/suspicious/noExplicitAny: a mutant rebuilt from the real config
  } as any,
  toolCallMachine.implementations,
);

/**
 * BROKEN on purpose: `recording` moves on to `started` at once instead of waiting for
 * `call.recorded`, so `execute` runs before the start record is durable. The write-ahead check
 * must catch it.
 */
export const noWriteAheadToolCallMachine: AnyStateMachine = createMachine(
  {
    ...toolCallMachine.config,
    states: {
      ...toolCallMachine.config.states,
      recording: { ...toolCallMachine.config.states!.recording!, always: "started" },
    },
    // biome-ignore lint/suspicious/noExplicitAny: a mutant rebuilt from the real config
  } as any,
  toolCallMachine.implementations,
);

/**
 * BROKEN on purpose: a repeated `call.cancel` while `stopping` re-enters the state, which
 * cancels the stop deadline and arms it again, so a caller that keeps cancelling postpones
 * `unknown` for ever. Only a search whose state key holds the timer's due time (and checks the
 * deadline's bound) sees it: the state's value and context do not change.
 */
export const rearmingStopToolCallMachine: AnyStateMachine = createMachine(
  {
    ...toolCallMachine.config,
    states: {
      ...toolCallMachine.config.states,
      stopping: {
        ...toolCallMachine.config.states!.stopping!,
        on: {
          ...toolCallMachine.config.states!.stopping!.on,
          "call.cancel": { target: "stopping", reenter: true },
        },
      },
    },
    // biome-ignore lint/suspicious/noExplicitAny: a mutant rebuilt from the real config
  } as any,
  toolCallMachine.implementations,
);
