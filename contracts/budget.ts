/**
 * Budgets with a scope (docs/embedding.md, "Budgets"): what may be spent per turn, per prompt
 * (its turns and every acceptance round), per session and per agent, and which one stopped a run.
 */

/** Where a budget applies. */
export type BudgetScope = "turn" | "prompt" | "session" | "agent";

/** What a budget counts. `tokens` is input + output. */
export type BudgetKind = "steps" | "tokens" | "inputTokens" | "outputTokens" | "cost" | "time";

/** A budget: every field optional; absent (or 0 in `limits`) means no cap on that dimension. */
export interface Budget {
  /** Model responses (retries of one response count once). */
  maxSteps?: number;
  /** Input + output tokens, from provider usage. */
  maxSpendTokens?: number;
  maxInputTokens?: number;
  maxOutputTokens?: number;
  /** Cost in the unit of the `prices` table (per million tokens there; Keel ships no prices). */
  maxCost?: number;
  /**
   * Wall time, ms. Turn and prompt: since they started. Session and agent: the time their turns
   * ran (an idle session spends none).
   */
  maxTimeMs?: number;
}

/** What was spent in one scope. */
export interface Spend {
  steps: number;
  inputTokens: number;
  outputTokens: number;
  /** In the price table's unit; 0 without prices. */
  cost: number;
  timeMs: number;
}

/** The budget that stopped a run (`TurnResult.budget`, `turn.ended`, `turn_end`). */
export interface BudgetStop {
  scope: BudgetScope;
  kind: BudgetKind;
  /** The cap that was reached. */
  limit: number;
  /** What had been spent in that scope when it stopped. */
  spent: number;
  /** True when the cap was Keel's default, not one the embedder set. */
  defaulted: boolean;
}

/** Price of one model, per million tokens, in the embedder's currency. */
export interface ModelPrice {
  input: number;
  output: number;
  /** Cached input tokens (the provider's prompt cache); default: `input`. */
  cachedInput?: number;
}

/** `createAgent({ prices })`: by model name (`Model.name`). */
export type PriceTable = Readonly<Record<string, ModelPrice>>;

export const NO_SPEND: Readonly<Spend> = Object.freeze({
  steps: 0,
  inputTokens: 0,
  outputTokens: 0,
  cost: 0,
  timeMs: 0,
});
