import { describe, expect, it } from "vitest";
import type { Spend } from "../contracts/budget.ts";
import {
  addSpend,
  budgetReason,
  checkBudget,
  costOf,
  earliestDeadline,
  firstExhausted,
  type ScopeBudget,
} from "../machines/policies/budget.ts";
import type { LogEntry } from "../session/entries.ts";
import { spendOf } from "../session/spend.ts";

const NONE: Spend = { steps: 0, inputTokens: 0, outputTokens: 0, cost: 0, timeMs: 0 };
const spend = (s: Partial<Spend>): Spend => ({ ...NONE, ...s });

describe("budget policy (machines/policies/budget.ts)", () => {
  it("a cap is reached when what the scope spent before plus what the turn spent meets it, not before", () => {
    const scopes: ScopeBudget[] = [
      { scope: "prompt", budget: { maxSpendTokens: 100 }, spent: spend({ inputTokens: 60 }) },
    ];
    expect(firstExhausted(scopes, spend({ inputTokens: 30, outputTokens: 9 }))).toBeUndefined();
    expect(firstExhausted(scopes, spend({ inputTokens: 30, outputTokens: 10 }))).toEqual({
      scope: "prompt",
      kind: "tokens",
      limit: 100,
      spent: 100,
      defaulted: false,
    });
  });

  it("the narrowest scope wins when several are spent at once, and within a scope steps come before tokens, input, output, cost and time", () => {
    const all = {
      maxSteps: 1,
      maxSpendTokens: 1,
      maxInputTokens: 1,
      maxOutputTokens: 1,
      maxCost: 1,
      maxTimeMs: 1,
    };
    const full = spend({ steps: 1, inputTokens: 1, outputTokens: 1, cost: 1, timeMs: 1 });
    const scopes: ScopeBudget[] = [
      { scope: "prompt", budget: { maxCost: 1 }, spent: full },
      { scope: "session", budget: all, spent: full },
    ];
    expect(firstExhausted(scopes, NONE)?.scope).toBe("prompt");
    const kinds: string[] = [];
    let budget: Record<string, number> = { ...all };
    for (;;) {
      const stop = firstExhausted([{ scope: "agent", budget, spent: full }], NONE);
      if (!stop) break;
      kinds.push(stop.kind);
      const field = Object.keys(budget)[0]!;
      budget = Object.fromEntries(Object.entries(budget).slice(1));
      expect(stop.limit).toBe(all[field as keyof typeof all]);
    }
    expect(kinds).toEqual(["steps", "tokens", "inputTokens", "outputTokens", "cost", "time"]);
  });

  it("a cap of 0 or absent is no cap, and input and output caps count only their side", () => {
    const big = spend({ steps: 1e6, inputTokens: 1e6, outputTokens: 1e6, cost: 1e6, timeMs: 1e6 });
    expect(
      firstExhausted([{ scope: "agent", budget: { maxSteps: 0 }, spent: big }], NONE),
    ).toBeUndefined();
    expect(firstExhausted([{ scope: "agent", budget: {}, spent: big }], NONE)).toBeUndefined();
    const output: ScopeBudget = { scope: "session", budget: { maxOutputTokens: 5 }, spent: NONE };
    expect(firstExhausted([output], spend({ inputTokens: 100, outputTokens: 4 }))).toBeUndefined();
    expect(firstExhausted([output], spend({ outputTokens: 5 }))?.kind).toBe("outputTokens");
  });

  it("a default cap that is reached says it was a default, in the stop and in the reason", () => {
    const stop = firstExhausted(
      [{ scope: "prompt", budget: { maxSteps: 2 }, spent: NONE, defaulted: ["steps"] }],
      spend({ steps: 2 }),
    )!;
    expect(stop.defaulted).toBe(true);
    expect(budgetReason(stop)).toBe(
      "prompt budget: maxSteps (2) reached: 2 spent (Keel's default prompt maxSteps; set it with createAgent({ promptBudget }) or agent.session(id, { promptBudget }))",
    );
  });

  it("the turn's own steps, tokens and time keep the wording of limits", () => {
    const base = { scope: "turn" as const, defaulted: false };
    expect(budgetReason({ ...base, kind: "steps", limit: 3, spent: 3 })).toBe(
      "maxSteps (3) reached",
    );
    expect(budgetReason({ ...base, kind: "tokens", limit: 5, spent: 7 })).toBe(
      "maxSpendTokens (5) reached: 7 tokens used",
    );
    expect(budgetReason({ ...base, kind: "time", limit: 9, spent: 9 })).toBe(
      "turn deadline reached",
    );
    expect(budgetReason({ ...base, kind: "cost", limit: 1, spent: 2 })).toBe(
      "turn budget: maxCost (1) reached: 2 spent",
    );
  });

  it("the deadline is the nearest wall-time cap left among the scopes (never negative), and none without one", () => {
    const scopes: ScopeBudget[] = [
      { scope: "turn", budget: { maxTimeMs: 5000 }, spent: NONE },
      {
        scope: "prompt",
        budget: { maxTimeMs: 10_000 },
        spent: spend({ timeMs: 7000 }),
        defaulted: ["time"],
      },
      { scope: "session", budget: { maxTimeMs: 3000 }, spent: spend({ timeMs: 2000 }) },
    ];
    expect(earliestDeadline(scopes)).toEqual({
      ms: 1000,
      stop: { scope: "session", kind: "time", limit: 3000, spent: 3000, defaulted: false },
    });
    expect(earliestDeadline(scopes.slice(0, 2))).toEqual({
      ms: 3000,
      stop: { scope: "prompt", kind: "time", limit: 10_000, spent: 10_000, defaulted: true },
    });
    const over: ScopeBudget = {
      scope: "agent",
      budget: { maxTimeMs: 10 },
      spent: spend({ timeMs: 50 }),
    };
    expect(earliestDeadline([over])?.ms).toBe(0);
    expect(
      earliestDeadline([{ scope: "turn", budget: { maxSteps: 3 }, spent: NONE }]),
    ).toBeUndefined();
  });

  it("cost: cached input at its own price (default the input price), the rest of the input and the output at theirs, per million tokens", () => {
    const usage = { inputTokens: 3_000_000, outputTokens: 1_000_000, cachedInputTokens: 1_000_000 };
    expect(costOf(usage, { input: 2, output: 8, cachedInput: 0.5 })).toBeCloseTo(
      2 * 2 + 0.5 + 8,
      10,
    );
    expect(costOf(usage, { input: 2, output: 8 })).toBeCloseTo(3 * 2 + 8, 10);
    expect(costOf({ inputTokens: 500_000, outputTokens: 0 }, { input: 4, output: 0 })).toBeCloseTo(
      2,
      10,
    );
  });

  it("addSpend adds every dimension", () => {
    expect(
      addSpend(
        spend({ steps: 1, inputTokens: 2, outputTokens: 3, cost: 4, timeMs: 5 }),
        spend({ steps: 10, inputTokens: 20, outputTokens: 30, cost: 40, timeMs: 50 }),
      ),
    ).toEqual({
      steps: 11,
      inputTokens: 22,
      outputTokens: 33,
      cost: 44,
      timeMs: 55,
    });
  });

  it("a bad budget is a TypeError naming the field, what it got and what is expected", () => {
    expect(() => checkBudget("createAgent: `budget`", { maxSteps: -1 })).toThrow(
      /createAgent: `budget`.maxSteps must be a finite number from 0 .* got -1/,
    );
    expect(() => checkBudget("x", { maxTimeMs: 2 ** 31 })).toThrow(/maxTimeMs .* 2147483647/);
    expect(() => checkBudget("x", { steps: 3 })).toThrow(
      /unknown field `steps`; a budget takes maxSteps/,
    );
    expect(() => checkBudget("x", 5)).toThrow(/must be an object/);
    expect(checkBudget("x", { maxCost: 0.5, maxSteps: undefined })).toEqual({ maxCost: 0.5 });
  });
});

describe("a session's spend as its log says it (session/spend.ts)", () => {
  it("counts each committed response with its usage and cost, and each ended turn's wall time, over every branch", () => {
    const e = (x: Record<string, unknown>) => x as unknown as LogEntry;
    const entries = [
      e({ type: "turn_start", turnId: "t1", at: 1000 }),
      e({
        type: "assistant_message",
        turnId: "t1",
        usage: { inputTokens: 10, outputTokens: 2 },
        cost: 0.5,
        at: 1100,
      }),
      e({ type: "assistant_message", turnId: "t1", at: 1200 }),
      e({ type: "turn_end", turnId: "t1", status: "completed", at: 1500 }),
      e({ type: "turn_start", turnId: "t2", at: 2000 }),
      e({
        type: "assistant_message",
        turnId: "t2",
        usage: { inputTokens: 5, outputTokens: 1 },
        at: 2100,
      }),
      // A second turn_end (the store refused the first): the last one counts.
      e({ type: "turn_end", turnId: "t2", status: "completed", at: 2300 }),
      e({ type: "turn_end", turnId: "t2", status: "failed", at: 2400 }),
      e({ type: "turn_start", turnId: "t3", at: 3000 }), // still open: no time yet
    ];
    expect(spendOf(entries)).toEqual({
      steps: 3,
      inputTokens: 15,
      outputTokens: 3,
      cost: 0.5,
      timeMs: 500 + 400,
    });
  });
});
