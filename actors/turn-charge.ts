import type { AssistantPart, Usage } from "../contracts/messages.ts";
import { messageTokens } from "../contracts/tokens.ts";
import { budgetReason, chargeOf, costOf } from "../machines/policies/budget.ts";
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
 * else Keel's estimate — `turn.requestTokens` (the context budget's count of the request sent)
 * in, the answer's `content` counted with the model's tokenizer out (`chargeOf`). An estimated
 * charge is told to `createAgent({ onProblem })` once an agent and warned in the session's
 * log; a reported usage replaced as implausible is told and warned every time.
 */
export function chargeResponse(
  turn: TurnScope,
  reported: Usage | undefined,
  content: readonly AssistantPart[],
): ResponseCharge {
  const { requestTokens } = turn;
  const { context, price, budgets, model } = turn.deps;
  turn.releaseHold?.(); // the response is charged below: its hold is given back
  turn.releaseHold = undefined;
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
  const { inputTokens, outputTokens } = charge.usage;
  budgets?.charged({ steps: 1, inputTokens, outputTokens, cost: cost ?? 0, timeMs: 0 });
  return cost === undefined
    ? { usage: charge.usage, estimated: charge.estimated }
    : { usage: charge.usage, estimated: charge.estimated, cost };
}

/**
 * Before a request is sent: reserves one step's worth of the agent's budget (the request's
 * estimate in, the model's output reserve out, at its price), so concurrent sessions never all
 * start requests the budget covers once (docs/embedding.md, "Budgets"). Returns the
 * `attempt.failed` event that ends the turn when the budget cannot cover it; otherwise holds
 * the reservation in `turn.releaseHold` (given back when the response is charged or the
 * attempt fails) and returns undefined.
 */
export function reserveStep(turn: TurnScope, attempt: number) {
  const { budgets, price, model, context } = turn.deps;
  const requestTokens = context.budget.current?.used ?? 0;
  turn.requestTokens = requestTokens;
  if (!budgets) return undefined;
  const step = {
    steps: 1,
    inputTokens: requestTokens,
    outputTokens: model.maxOutputTokens ?? 0,
    cost: 0,
    timeMs: 0,
  };
  if (price) step.cost = costOf(step, price);
  const hold = budgets.reserve(step);
  if (hold.ok) {
    turn.releaseHold = hold.release;
    return undefined;
  }
  const reason = `${budgetReason(hold.stop)}; the agent's budget cannot cover one more request (its sessions' requests in flight hold the rest)`;
  return {
    type: "attempt.failed" as const,
    attempt,
    status: "budget_exhausted" as const,
    reason,
    budget: hold.stop,
  };
}
