import { type AnyStateMachine, createMachine } from "xstate";
import { toolCallMachine } from "../../../machines/tool-call.machine.ts";

/**
 * BROKEN on purpose: the real tool-call chart, except `settled` is not final and a late
 * `call.cancel` overwrites the outcome with "cancelled". Invariant 2 checks must catch it.
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
