import type { BudgetStop } from "./budget.ts";
import type { Usage } from "./messages.ts";
import type { TurnFailureCode, TurnStatus } from "./status.ts";

/**
 * What a turn resolves to, as its log holds it (`session/turn-result.ts` folds it from the
 * turn's entries): how it ended, its final text, its summed usage and its model requests.
 */
export interface TurnResult {
  /** How the turn ended: its last `turn_end` entry. */
  status: TurnStatus;
  reason?: string;
  /** With `status: "failed"`: the runtime's failure code (`STORE_FAILED`, `LEASE_LOST`), if any. */
  code?: TurnFailureCode;
  /** The text of the last assistant message the turn committed ("" when none). */
  text: string;
  /**
   * Provider usage summed over the turn's model responses; `cachedInputTokens` and
   * `reasoningTokens` are present when a response reported them.
   */
  usage: Usage;
  /** Set when some of `usage` is Keel's estimate (a response whose provider reported none). */
  usageEstimated?: true;
  /** Model requests the turn sent (retries included; compaction summaries not). */
  steps: number;
  /** With `status: "budget_exhausted"`: which budget ran out (docs/embedding.md, "Budgets"). */
  budget?: BudgetStop;
  /** The summed cost of its responses, when the agent has a price table (`prices`). */
  cost?: number;
}

/** Adds `usage` into `total` (the optional counts only once some response reported them). */
export function addUsage(total: Usage, usage: Usage): void {
  total.inputTokens += usage.inputTokens;
  total.outputTokens += usage.outputTokens;
  if (usage.cachedInputTokens !== undefined) {
    total.cachedInputTokens = (total.cachedInputTokens ?? 0) + usage.cachedInputTokens;
  }
  if (usage.reasoningTokens !== undefined) {
    total.reasoningTokens = (total.reasoningTokens ?? 0) + usage.reasoningTokens;
  }
}
