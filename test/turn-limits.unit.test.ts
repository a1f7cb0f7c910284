import { describe, expect, it } from "vitest";
import { initialTransition, transition } from "xstate";
import { turnMachine } from "../machines/turn.machine.ts";

// The turn chart's step and spend limits, stated on the chart itself through XState's pure
// `transition()` (the e2e tests state them through a whole agent, which the mutation run skips).

const spec = {
  callId: "c",
  name: "tool",
  concurrencySafe: true,
  cancellable: true,
  executionMode: "parallel" as const,
};

interface TurnView {
  value: unknown;
  step: number;
  tokens: number;
  status: string;
  reason: string | undefined;
}

/** Runs `steps` tool steps (10 tokens each) under `limits`; the view after each step's batch. */
function toolSteps(limits: { maxSteps: number; maxSpendTokens: number }, steps: number) {
  let [s] = initialTransition(turnMachine, {
    turnId: "t",
    limits: { ...limits, deadlineMs: 0 },
    maxParallelToolCalls: 8,
    stopDeadlineMs: 100,
    finalizeDeadlineMs: 100,
    loopFailAfter: 0,
    maxOverflowRecoveries: 1,
  });
  const views: TurnView[] = [];
  for (let i = 0; i < steps && s.matches({ running: { sampling: "preparing" } }); i++) {
    [s] = transition(turnMachine, s, { type: "attempt.recorded", attempt: s.context.attemptSeq });
    [s] = transition(turnMachine, s, {
      type: "attempt.done",
      attempt: s.context.attemptSeq,
      finishReason: "tool_calls",
      callCount: 1,
      calls: [spec],
      tokens: 10,
      needsPermission: false,
    });
    [s] = transition(turnMachine, s, { type: "batch.done" });
    const { step, tokens, status, reason } = s.context;
    views.push({ value: s.value, step, tokens, status, reason });
  }
  return views;
}

describe("turn limits", () => {
  it("each step counts once and adds its tokens", () => {
    const views = toolSteps({ maxSteps: 10, maxSpendTokens: 0 }, 3);
    expect(views.map((v) => [v.step, v.tokens])).toEqual([
      [1, 10],
      [2, 20],
      [3, 30],
    ]);
    expect(
      views.every((v) => JSON.stringify(v.value) === '{"running":{"sampling":"preparing"}}'),
    ).toBe(true);
  });

  it("maxSteps ends the turn budget_exhausted when the step count reaches it, not before", () => {
    const views = toolSteps({ maxSteps: 2, maxSpendTokens: 0 }, 5);
    expect(views).toHaveLength(2);
    expect(views[0]).toMatchObject({
      value: { running: { sampling: "preparing" } },
      status: "completed",
    });
    expect(views[1]).toMatchObject({
      value: "finalizing",
      step: 2,
      status: "budget_exhausted",
      reason: "maxSteps (2) reached",
    });
  });

  it("maxSpendTokens ends the turn when the tokens used reach it; 0 means no limit", () => {
    const over = toolSteps({ maxSteps: 10, maxSpendTokens: 15 }, 5);
    expect(over).toHaveLength(2);
    expect(over[1]).toMatchObject({
      value: "finalizing",
      status: "budget_exhausted",
      reason: "maxSpendTokens (15) reached: 20 tokens used",
    });
    const exact = toolSteps({ maxSteps: 10, maxSpendTokens: 20 }, 5);
    expect(exact).toHaveLength(2);
    expect(exact[1].status).toBe("budget_exhausted");
    expect(toolSteps({ maxSteps: 10, maxSpendTokens: 0 }, 5)).toHaveLength(5);
  });
});
