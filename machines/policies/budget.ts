/**
 * Budgets with a scope (issue 30; docs/embedding.md, "Budgets"). The turn chart holds one
 * `ScopeBudget` per scope that applies to the turn (its own, and the prompt's, the session's and
 * the agent's as spent when it started) and asks `firstExhausted` between steps; the first cap
 * reached, narrowest scope first, ends the turn `budget_exhausted` and is named in its result.
 * Pure: the spend comes from the usage the chart already sees and from the host's clock at the
 * turn's start (time is also the chart's deadline timer, `earliestDeadline`).
 */
import type {
  Budget,
  BudgetKind,
  BudgetScope,
  BudgetStop,
  ModelPrice,
  Spend,
} from "../../contracts/budget.ts";
import type { Usage } from "../../contracts/messages.ts";

/** One scope's cap, what it had spent before this turn, and which of its caps are defaults. */
export interface ScopeBudget {
  scope: BudgetScope;
  budget: Budget;
  spent: Spend;
  /** The kinds whose cap is Keel's default, not the embedder's. */
  defaulted?: readonly BudgetKind[];
}

/** Each kind: the budget field that caps it and what it counts. In the order they are checked. */
const DIMENSIONS: readonly {
  kind: BudgetKind;
  field: keyof Budget;
  of: (s: Spend) => number;
}[] = [
  { kind: "steps", field: "maxSteps", of: (s) => s.steps },
  { kind: "tokens", field: "maxSpendTokens", of: (s) => s.inputTokens + s.outputTokens },
  { kind: "inputTokens", field: "maxInputTokens", of: (s) => s.inputTokens },
  { kind: "outputTokens", field: "maxOutputTokens", of: (s) => s.outputTokens },
  { kind: "cost", field: "maxCost", of: (s) => s.cost },
  { kind: "time", field: "maxTimeMs", of: (s) => s.timeMs },
];

/** `a + b`, dimension by dimension. This is a pure function. */
export function addSpend(a: Spend, b: Spend): Spend {
  return {
    steps: a.steps + b.steps,
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cost: a.cost + b.cost,
    timeMs: a.timeMs + b.timeMs,
  };
}

/**
 * The first cap reached, scopes in the order given (the turn's first), dimensions in the order
 * steps, tokens, input, output, cost, time; undefined while every cap holds. `turn` is what the
 * running turn spent so far: it adds to every scope. A cap of 0 (or absent) is no cap.
 * This is a pure function.
 */
export function firstExhausted(
  scopes: readonly ScopeBudget[],
  turn: Spend,
): BudgetStop | undefined {
  for (const s of scopes) {
    for (const d of DIMENSIONS) {
      const limit = s.budget[d.field];
      if (limit === undefined || !(limit > 0)) continue;
      const spent = d.of(s.spent) + d.of(turn);
      if (spent >= limit) {
        return {
          scope: s.scope,
          kind: d.kind,
          limit,
          spent,
          defaulted: s.defaulted?.includes(d.kind) === true,
        };
      }
    }
  }
  return undefined;
}

/**
 * The nearest wall-time cap among `scopes`, as ms from the turn's start, and the stop it makes
 * (ties: the earlier scope). Undefined when none has a time cap. This is a pure function.
 */
export function earliestDeadline(
  scopes: readonly ScopeBudget[],
): { ms: number; stop: BudgetStop } | undefined {
  let best: { ms: number; stop: BudgetStop } | undefined;
  for (const s of scopes) {
    const limit = s.budget.maxTimeMs;
    if (limit === undefined || !(limit > 0)) continue;
    const ms = Math.max(0, limit - s.spent.timeMs);
    if (best && best.ms <= ms) continue;
    best = {
      ms,
      stop: {
        scope: s.scope,
        kind: "time",
        limit,
        spent: limit,
        defaulted: s.defaulted?.includes("time") === true,
      },
    };
  }
  return best;
}

const FIELD_OF: Record<BudgetKind, keyof Budget> = {
  steps: "maxSteps",
  tokens: "maxSpendTokens",
  inputTokens: "maxInputTokens",
  outputTokens: "maxOutputTokens",
  cost: "maxCost",
  time: "maxTimeMs",
};

/** Where the embedder sets each scope's budget (for the reason's "how to change it"). */
const OPTION_OF: Record<BudgetScope, string> = {
  turn: "createAgent({ limits })",
  prompt: "createAgent({ promptBudget }) or agent.session(id, { promptBudget })",
  session: "agent.session(id, { budget })",
  agent: "createAgent({ budget })",
};

/**
 * The turn's reason for `stop`: which scope and cap, what was spent, and, for a default, that
 * it was one and where to set it. The turn's own steps, tokens and time keep the wording of
 * `limits` (`maxSteps (50) reached`). This is a pure function.
 */
export function budgetReason(stop: BudgetStop): string {
  let text: string;
  if (stop.scope === "turn" && stop.kind === "steps") text = `maxSteps (${stop.limit}) reached`;
  else if (stop.scope === "turn" && stop.kind === "tokens")
    text = `maxSpendTokens (${stop.limit}) reached: ${stop.spent} tokens used`;
  else if (stop.scope === "turn" && stop.kind === "time") text = "turn deadline reached";
  else
    text = `${stop.scope} budget: ${FIELD_OF[stop.kind]} (${stop.limit}) reached: ${stop.spent} spent`;
  if (!stop.defaulted) return text;
  return `${text} (Keel's default ${stop.scope} ${FIELD_OF[stop.kind]}; set it with ${OPTION_OF[stop.scope]})`;
}

/**
 * The cost of one response's `usage` at `price` (per million tokens): cached input tokens at
 * `cachedInput` (default `input`), the rest of the input at `input`, output at `output`.
 * This is a pure function.
 */
export function costOf(usage: Usage, price: ModelPrice): number {
  const cached = Math.min(usage.cachedInputTokens ?? 0, usage.inputTokens);
  const fresh = usage.inputTokens - cached;
  return (
    (fresh * price.input +
      cached * (price.cachedInput ?? price.input) +
      usage.outputTokens * price.output) /
    1_000_000
  );
}

/**
 * Checks a budget an embedder passed (`what` names the option in the error): every field a
 * finite number ≥ 0 (`maxTimeMs` at most 2^31 − 1). Throws a TypeError saying which field and
 * what it got. Returns the budget with its fields copied (unknown fields refused).
 */
export function checkBudget(what: string, budget: unknown): Budget {
  if (budget === undefined) return {};
  if (typeof budget !== "object" || budget === null || Array.isArray(budget)) {
    throw new TypeError(
      `${what} must be an object { maxSteps?, maxSpendTokens?, maxInputTokens?, maxOutputTokens?, maxCost?, maxTimeMs? }, got ${String(budget)}`,
    );
  }
  const out: Budget = {};
  const known = new Set<string>(Object.values(FIELD_OF));
  for (const [key, value] of Object.entries(budget)) {
    if (!known.has(key)) {
      throw new TypeError(
        `${what}: unknown field \`${key}\`; a budget takes ${[...known].join(", ")}`,
      );
    }
    if (value === undefined) continue;
    const max = key === "maxTimeMs" ? 2_147_483_647 : Number.MAX_SAFE_INTEGER;
    if (typeof value !== "number" || !Number.isFinite(value) || value < 0 || value > max) {
      throw new TypeError(
        `${what}.${key} must be a finite number from 0 to ${max} (0: no cap), got ${String(value)}`,
      );
    }
    out[key as keyof Budget] = value;
  }
  return out;
}

/** Whether any field of `budget` caps cost. This is a pure function. */
export const capsCost = (budget: Budget | undefined) => (budget?.maxCost ?? 0) > 0;

/** Nothing spent yet. */
export const NOTHING_SPENT: Spend = Object.freeze({
  steps: 0,
  inputTokens: 0,
  outputTokens: 0,
  cost: 0,
  timeMs: 0,
});

/** A turn's budgets (`createAgent({ limits })`); reaching one ends it `budget_exhausted`. */
export interface TurnLimits {
  /** Model responses per turn (retries of one response count once). */
  maxSteps: number;
  /** Spend cap: input + output tokens per turn, summed from provider usage; 0 = none. */
  maxSpendTokens: number;
  /** Wall-clock budget of the whole turn, ms; 0 = none. */
  deadlineMs: number;
  /** Input tokens, output tokens and cost (price table's unit) per turn; 0 or absent = none. */
  maxInputTokens?: number;
  maxOutputTokens?: number;
  maxCost?: number;
  /** The caps that are Keel's defaults, not the embedder's (the result says so when one stops it). */
  defaulted?: readonly BudgetKind[];
}

/** A turn's own caps (`TurnLimits`), as a scope. This is a pure function. */
export function turnScope(limits: TurnLimits): ScopeBudget {
  const scope: ScopeBudget = {
    scope: "turn",
    budget: {
      maxSteps: limits.maxSteps,
      maxSpendTokens: limits.maxSpendTokens,
      maxInputTokens: limits.maxInputTokens,
      maxOutputTokens: limits.maxOutputTokens,
      maxCost: limits.maxCost,
      maxTimeMs: limits.deadlineMs,
    },
    spent: NOTHING_SPENT,
  };
  if (limits.defaulted) scope.defaulted = limits.defaulted;
  return scope;
}

/**
 * The spend after one more model response: `tokens` is input + output; absent `inputTokens`,
 * all of it counts as input. Time is not counted here (it is the deadline timer's).
 * This is a pure function.
 */
export function spendAfter(
  spent: Spend,
  response: { tokens: number; inputTokens?: number; outputTokens?: number; cost?: number },
): Spend {
  const output = response.outputTokens ?? 0;
  return {
    steps: spent.steps + 1,
    inputTokens: spent.inputTokens + (response.inputTokens ?? response.tokens - output),
    outputTokens: spent.outputTokens + output,
    cost: spent.cost + (response.cost ?? 0),
    timeMs: 0,
  };
}

/**
 * The spend of summary requests: their tokens and cost, no step, no time. This is a pure
 * function.
 */
export function summarySpend(charge: { usage: Usage; cost?: number }): Spend {
  return {
    steps: 0,
    inputTokens: charge.usage.inputTokens,
    outputTokens: charge.usage.outputTokens,
    cost: charge.cost ?? 0,
    timeMs: 0,
  };
}

/** What one model response is charged: the usage that counts, and whether Keel estimated it. */
export interface Charge {
  usage: Usage;
  /** True when `usage` is Keel's estimate (the provider reported none, or none plausible). */
  estimated: boolean;
  /** Why the reported usage was not used (absent when it was, or when none was reported). */
  problem?: string;
}

/** With no context window known, reported counts above this are not plausible. */
export const MAX_PLAUSIBLE_TOKENS = 100_000_000;

/**
 * The usage a response is charged (docs/embedding.md, "Budgets"): the provider's `reported`
 * usage when it is plausible, else `estimate` (Keel's count of the request and the answer).
 * Absent or all-zero usage is "not reported"; usage with a negative, fractional or non-finite
 * count, or a count over `window` (the model's context window: no request or answer is larger;
 * default {@link MAX_PLAUSIBLE_TOKENS}) is not plausible and is replaced, with a `problem` that
 * says why. This is a pure function.
 */
export function chargeOf(
  reported: Usage | undefined,
  estimate: Usage,
  window: number = MAX_PLAUSIBLE_TOKENS,
): Charge {
  if (reported === undefined) return { usage: estimate, estimated: true };
  const counts = [reported.inputTokens, reported.outputTokens];
  for (const v of [reported.cachedInputTokens, reported.reasoningTokens]) {
    if (v !== undefined) counts.push(v);
  }
  const bad = counts.find((v) => typeof v !== "number" || !Number.isInteger(v) || v < 0);
  const absurd = bad === undefined && counts.some((v) => v > window);
  if (bad !== undefined || absurd) {
    const shown = JSON.stringify(reported);
    const why =
      bad !== undefined ? `a count of ${String(bad)}` : `a count over the ${window}-token window`;
    return {
      usage: estimate,
      estimated: true,
      problem: `the provider reported usage ${shown}, which is not plausible (${why}); Keel's estimate (${estimate.inputTokens} in, ${estimate.outputTokens} out) is charged instead`,
    };
  }
  if (reported.inputTokens + reported.outputTokens <= 0)
    return { usage: estimate, estimated: true };
  return { usage: reported, estimated: false };
}
