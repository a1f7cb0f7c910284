// The calls of one committed model message, made ready for the turn chart: each prepared
// (repaired, validated, checked by the acceptance guard), its spec for the batch's scheduler,
// and the results the loop guard reads for calls that will not run. Called by ModelAttempts'
// commit (actors/model-attempt.ts).
import type { ToolCallPart } from "../contracts/messages.ts";
import type { ObservedResult } from "../machines/policies/loop-guard.ts";
import type { TurnCallSpec } from "../machines/turn.types.ts";
import type { createAssembler } from "../providers/stream-assembler.ts";
import { messageLimitRefusals } from "../tools/prepare/message-limits.ts";
import { truncatedCallResult } from "../tools/prepare/truncated-call.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import type { PreparedCall, PrepareOutcome } from "../tools/types.ts";
import type { TurnScope } from "./turn-scope.ts";

/** What the batch's scheduler needs to know about a prepared call. */
export const specOf = (call: PreparedCall): TurnCallSpec => ({
  callId: call.id,
  name: call.name,
  concurrencySafe: call.traits.concurrencySafe,
  cancellable: call.traits.cancellable,
  executionMode: call.traits.executionMode,
  resourceKey: call.resourceKey,
});

/**
 * Prepares the calls of `message` (its parts as committed: `toolCalls`) into `turn.prepared`,
 * emits `call.queued` for each that can run, and returns their specs with the loop guard's view
 * of those that cannot: refused by preparation (`invalid`) or cut by length (`truncated`).
 */
export function prepareMessageCalls(
  turn: TurnScope,
  message: ReturnType<ReturnType<typeof createAssembler>["finish"]>,
  toolCalls: readonly ToolCallPart[],
): { specs: TurnCallSpec[]; invalid: ObservedResult[]; truncated: ObservedResult[] } {
  const { registry, emit } = turn.deps;
  turn.prepared.clear();
  turn.records.clear();
  const specs: TurnCallSpec[] = [];
  // Bounded per message: calls past the limits are refused before their arguments are read.
  const limited = messageLimitRefusals(message.toolCalls);
  for (const [index, c] of message.toolCalls.entries()) {
    const over = limited[index];
    let outcome: PrepareOutcome = over
      ? { ok: false, id: c.id, name: c.name, argumentsText: c.argumentsText, error: over }
      : prepareCall({ id: c.id, name: c.name, argumentsText: c.argumentsText }, registry);
    const refused = outcome.ok ? turn.deps.guardCall?.(outcome.call) : undefined;
    if (refused) {
      outcome = {
        ok: false,
        id: c.id,
        name: c.name,
        argumentsText: c.argumentsText,
        error: refused,
      };
    }
    turn.prepared.set(c.id, outcome);
    if (!outcome.ok) continue;
    const { call } = outcome;
    for (const warning of call.warnings) {
      emit({
        type: "log.written",
        level: "warn",
        message: `${call.name} (${call.id}): ${warning}`,
      });
    }
    specs.push(specOf(call));
    emit({ type: "call.queued", turnId: turn.turnId, callId: call.id, name: call.name });
  }
  // The results this message's refused calls get (for length, or for failing preparation),
  // as the loop guard reads them: the chart folds whichever its path settles.
  const guard = turn.deps.loopGuard;
  const invalid: ObservedResult[] = [];
  const truncated: ObservedResult[] = [];
  if (guard && toolCalls.length > 0) {
    for (const c of message.toolCalls) {
      const outcome = turn.prepared.get(c.id)!;
      if (!outcome.ok) invalid.push(turn.observed(c.id, c.name, outcome.error));
      if (message.finishReason === "length") {
        const result = truncatedCallResult({
          id: c.id,
          name: c.name,
          argumentsText: c.argumentsText,
        });
        truncated.push(turn.observed(c.id, c.name, result));
      }
    }
  }
  return { specs, invalid, truncated };
}
