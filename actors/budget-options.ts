import type { Logger } from "pino";
import type { Budget, BudgetKind, PriceTable } from "../contracts/budget.ts";
import { checkDuration } from "../contracts/clock.ts";
import type { Model } from "../contracts/model.ts";
import { capsCost, checkBudget } from "../machines/policies/budget.ts";
import type { TurnLimits } from "../machines/turn.types.ts";
import type { SharedSpend } from "./postgres-agent-budget.ts";
import { AgentSpend } from "./session-budgets.ts";

/** `createAgent({ limits })`: each turn's budget. */
export type LimitsOption = Partial<Omit<TurnLimits, "defaulted">> & {
  /** @deprecated Renamed `maxSpendTokens` (a spend cap, not a window); removed in the next release. */
  maxTokens?: number;
};

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

export const DEFAULT_LIMITS: TurnLimits = { maxSteps: 50, maxSpendTokens: 0, deadlineMs: 0 };

/**
 * `limits` with the deprecated `maxTokens` read as `maxSpendTokens` (with a warning, once), and
 * `deadlineMs` checked: at most 2^31 − 1 ms, `Infinity` (or 0) for none.
 */
export function resolveLimits(limits: LimitsOption | undefined, logger: Logger): TurnLimits {
  const { maxTokens, ...rest } = limits ?? {};
  const resolved: TurnLimits = { ...DEFAULT_LIMITS, ...rest };
  if (rest.maxSteps === undefined) resolved.defaulted = ["steps"];
  const { maxInputTokens, maxOutputTokens, maxCost } = rest;
  checkBudget("createAgent: `limits`", { maxInputTokens, maxOutputTokens, maxCost });
  if (rest.deadlineMs !== undefined) {
    const ms = checkDuration("createAgent: `limits.deadlineMs`", rest.deadlineMs);
    resolved.deadlineMs = ms === Number.POSITIVE_INFINITY ? 0 : ms;
  }
  if (maxTokens !== undefined) {
    const message =
      "createAgent: `limits.maxTokens` is deprecated (it is a spend cap, not a context window): use `limits.maxSpendTokens`; the old name is removed in the next release";
    logger.warn(message);
    process.emitWarning(message, { type: "DeprecationWarning", code: "KEEL_MAX_TOKENS" });
    if (rest.maxSpendTokens === undefined) resolved.maxSpendTokens = maxTokens;
  }
  return resolved;
}

/** The agent's budget options, checked: its prices, each prompt's budget, its own spend. */
export function agentBudgetOptions(
  options: {
    model: Model;
    prices?: PriceTable;
    budget?: Budget;
    promptBudget?: Budget;
    onProblem?: (message: string) => void;
    sharedSpend?: SharedSpend;
  },
  limits: TurnLimits,
) {
  const prices = checkPrices(options.prices);
  const agentBudget = checkBudget("createAgent: `budget`", options.budget);
  const promptBudget = resolvePromptBudget(
    "createAgent: `promptBudget`",
    options.promptBudget,
    limits,
  );
  checkCostCap("createAgent", [limits, promptBudget.budget, agentBudget], options.model, prices);
  return {
    prices,
    promptBudget,
    agentSpend: new AgentSpend(agentBudget, options.onProblem, options.sharedSpend),
  };
}

/** A session's budget options (`agent.session(id, { budget, promptBudget })`), checked. */
export function sessionBudgetOptions(
  given: { budget?: Budget; promptBudget?: Budget },
  agentPrompt: { budget: Budget; defaulted: BudgetKind[] },
  limits: TurnLimits,
  model: Model,
  prices: PriceTable | undefined,
) {
  const session = checkBudget("agent.session: `budget`", given.budget);
  const prompt =
    given.promptBudget === undefined
      ? agentPrompt
      : resolvePromptBudget("agent.session: `promptBudget`", given.promptBudget, limits);
  checkCostCap("agent.session", [session, prompt.budget], model, prices);
  return { session, prompt };
}
