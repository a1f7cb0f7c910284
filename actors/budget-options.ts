import type { Budget, BudgetKind, PriceTable } from "../contracts/budget.ts";
import type { Model } from "../contracts/model.ts";
import { capsCost, checkBudget } from "../machines/policies/budget.ts";
import type { TurnLimits } from "../machines/turn.machine.ts";

// The budget options of `createAgent` and `agent.session` (docs/embedding.md, "Budgets"),
// checked and filled with Keel's defaults.

/** A prompt's default wall time (docs/embedding.md, "Budgets"). */
export const DEFAULT_PROMPT_TIME_MS = 3_600_000;
/** A prompt's default steps: this many turns' worth (a turn and three acceptance rounds). */
export const DEFAULT_PROMPT_TURNS = 4;

/** A prompt's budget with Keel's defaults for the caps the embedder did not set. */
export function resolvePromptBudget(
  what: string,
  given: Budget | undefined,
  limits: TurnLimits,
): { budget: Budget; defaulted: BudgetKind[] } {
  const budget = checkBudget(what, given);
  const defaulted: BudgetKind[] = [];
  if (budget.maxSteps === undefined) {
    budget.maxSteps = DEFAULT_PROMPT_TURNS * limits.maxSteps;
    defaulted.push("steps");
  }
  if (budget.maxTimeMs === undefined) {
    budget.maxTimeMs = DEFAULT_PROMPT_TIME_MS;
    defaulted.push("time");
  }
  return { budget, defaulted };
}

/** The price table checked: every entry's `input`, `output` (and `cachedInput`) finite and ≥ 0. */
export function checkPrices(prices: unknown): PriceTable | undefined {
  if (prices === undefined) return undefined;
  if (typeof prices !== "object" || prices === null || Array.isArray(prices)) {
    throw new TypeError(
      "createAgent: `prices` must be { [modelName]: { input, output, cachedInput? } } (per million tokens)",
    );
  }
  for (const [model, price] of Object.entries(prices)) {
    for (const field of ["input", "output", "cachedInput"] as const) {
      const value = (price as Record<string, unknown> | null)?.[field];
      if (field === "cachedInput" && value === undefined) continue;
      if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
        throw new TypeError(
          `createAgent: \`prices["${model}"].${field}\` must be a finite number ≥ 0 (price per million tokens), got ${String(value)}`,
        );
      }
    }
  }
  return prices as PriceTable;
}

/** A cost cap needs the model's price: refused at configuration, naming what is missing. */
export function checkCostCap(
  where: string,
  budgets: readonly (Budget | undefined)[],
  model: Model,
  prices: PriceTable | undefined,
): void {
  if (!budgets.some(capsCost) || prices?.[model.name]) return;
  throw new TypeError(
    `${where}: a \`maxCost\` is set but the price table has no entry for model "${model.name}"; pass createAgent({ prices: { "${model.name}": { input, output, cachedInput? } } }) (per million tokens; Keel ships no prices)`,
  );
}
