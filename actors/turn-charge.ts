import type { AssistantPart, Usage } from "../contracts/messages.ts";
import { messageTokens } from "../contracts/tokens.ts";
import { chargeOf, costOf } from "../machines/policies/budget.ts";
import type { TurnScope } from "./turn-scope.ts";

/** What a committed response is charged, and at what cost. */
export interface ResponseCharge {
  usage: Usage;
  estimated: boolean;
  /** From the price table; absent without a price for the model. */
  cost?: number;
}

/**
 * Charges one model response (docs/embedding.md, "Budgets"): its provider usage when plausible,
 * else Keel's estimate — `requestTokens` (the context budget's count of the request as sent)
 * in, the answer's `content` counted with the model's tokenizer out (`chargeOf`). An estimated
 * charge is told to `createAgent({ onProblem })` once an agent and warned in the session's
 * log; a reported usage replaced as implausible is told and warned every time.
 */
export function chargeResponse(
  turn: TurnScope,
  reported: Usage | undefined,
  content: readonly AssistantPart[],
  requestTokens: number,
): ResponseCharge {
  const { context, price, budgets, model } = turn.deps;
  const output = messageTokens({ role: "assistant", content: [...content] }, context.count);
  const estimate = { inputTokens: requestTokens, outputTokens: output };
  const charge = chargeOf(reported, estimate, model.contextWindow);
  if (charge.problem) {
    turn.warn(charge.problem);
    budgets?.problem(charge.problem);
  } else if (charge.estimated) {
    const message = `model ${model.name} reported no usage: budgets count Keel's estimate of each request and answer (marked usageEstimated in the result and the log)`;
    if (budgets?.firstEstimate()) turn.warn(message);
    budgets?.problem(message, true);
  }
  const cost = price ? costOf(charge.usage, price) : undefined;
  return cost === undefined
    ? { usage: charge.usage, estimated: charge.estimated }
    : { usage: charge.usage, estimated: charge.estimated, cost };
}
