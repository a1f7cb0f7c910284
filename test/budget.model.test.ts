import { describe, expect, it } from "vitest";
import { type AnyStateMachine, initialTransition, transition } from "xstate";
import type { ScopeBudget } from "../machines/policies/budget.ts";
import { turnMachine } from "../machines/turn.machine.ts";
import { ignoresWiderBudgetsTurnMachine } from "./support/mutants/turn.mutants.ts";

// biome-ignore lint/suspicious/noExplicitAny: snapshots of real and mutant machines alike
type Snap = any;

const NONE = { steps: 0, inputTokens: 0, outputTokens: 0, cost: 0, timeMs: 0 };

/**
 * Three scopes: the turn (3 steps), the prompt (50 tokens, 15 spent by earlier rounds) and the
 * session (a cost of 2). A response is either small (7 + 3 tokens, cost 1) or big (14 + 6
 * tokens, cost 0), so the order of responses decides which cap is reached first. The oracle
 * recomputes every cap from these numbers, not from the chart.
 */
const budgets: ScopeBudget[] = [
  { scope: "prompt", budget: { maxSpendTokens: 50 }, spent: { ...NONE, inputTokens: 15 } },
  { scope: "session", budget: { maxCost: 2 }, spent: NONE },
];
const input = {
  turnId: "t",
  limits: { maxSteps: 3, maxSpendTokens: 0, deadlineMs: 0 },
  budgets,
  maxParallelToolCalls: 8,
  stopDeadlineMs: 100,
  finalizeDeadlineMs: 100,
  maxOverflowRecoveries: 0,
};
const spec = {
  callId: "c",
  name: "tool",
  concurrencySafe: true,
  cancellable: true,
  executionMode: "parallel" as const,
};

interface Counted {
  responses: number;
  tokens: number;
  cost: number;
}

/** Which cap the responses seen so far reached, narrowest scope first; or none. */
function oracle(c: Counted): { scope: string; kind: string } | undefined {
  if (c.responses >= 3) return { scope: "turn", kind: "steps" };
  if (15 + c.tokens >= 50) return { scope: "prompt", kind: "tokens" };
  if (c.cost >= 2) return { scope: "session", kind: "cost" };
  return undefined;
}

function events(snap: Snap): Snap[] {
  const a = snap.context.attemptSeq;
  const done = (finishReason: string, callCount: number, big: boolean) => ({
    type: "attempt.done",
    attempt: a,
    finishReason,
    callCount,
    calls: callCount > 0 ? [spec] : [],
    tokens: big ? 20 : 10,
    inputTokens: big ? 14 : 7,
    outputTokens: big ? 6 : 3,
    cost: big ? 0 : 1,
  });
  return [
    { type: "compact.due" },
    { type: "attempt.recorded", attempt: a },
    done("tool_calls", 1, false),
    done("tool_calls", 1, true),
    done("stop", 0, false),
    { type: "batch.done" },
    { type: "end.steered" },
    { type: "end.none" },
    { type: "finalize.done" },
    { type: "turn.interrupt", reason: "stop" },
  ];
}

const key = (s: Snap) =>
  JSON.stringify([s.value, s.status, s.context.attemptSeq, s.context.step, s.context.status]);

/**
 * Every event sequence up to `depth` through `transition()`, with the number of responses the
 * turn took counted by the search itself. Checks after every step: no model request is recorded
 * once a cap is reached (the budget stops work between steps); a turn that ends
 * `budget_exhausted` names the cap the oracle names, and never before one is reached.
 */
/** The caps the last search saw a turn stop on (so a search that reaches none is caught). */
const stopsSeen = new Set<string>();

function search(machine: AnyStateMachine, depth: number): string | undefined {
  stopsSeen.clear();
  const [start] = initialTransition(machine, input);
  const none: Counted = { responses: 0, tokens: 0, cost: 0 };
  let frontier: { snap: Snap; counted: Counted; trace: string[] }[] = [
    { snap: start, counted: none, trace: [] },
  ];
  const seen = new Set([`${key(start)}|${JSON.stringify(none)}`]);
  for (let d = 0; d < depth; d++) {
    const next: typeof frontier = [];
    for (const { snap, counted, trace } of frontier) {
      for (const event of events(snap)) {
        const [after, actions] = transition(machine, snap, event);
        const took = event.type === "attempt.done" && after.context.step > snap.context.step;
        const count: Counted = took
          ? {
              responses: counted.responses + 1,
              tokens: counted.tokens + event.tokens,
              cost: counted.cost + event.cost,
            }
          : counted;
        const t = [...trace, event.type];
        const reached = oracle(count);
        // `prepare` records the attempt of a new step; `recordAttempt` a retry's or after a compaction.
        const recorded = actions.some((x: { type: string }) =>
          ["prepare", "recordAttempt"].includes(x.type),
        );
        if (reached && recorded) {
          return `a request after the ${reached.scope} ${reached.kind} budget was spent: ${t.join(" → ")}`;
        }
        if (
          after.context.status === "budget_exhausted" &&
          snap.context.status !== "budget_exhausted"
        ) {
          if (!reached) return `budget_exhausted before any cap was reached: ${t.join(" → ")}`;
          const named = after.context.budget;
          stopsSeen.add(`${named?.scope} ${named?.kind}`);
          if (named?.scope !== reached.scope || named?.kind !== reached.kind) {
            return `the turn named ${named?.scope} ${named?.kind}, not ${reached.scope} ${reached.kind}: ${t.join(" → ")}`;
          }
        }
        const k = `${key(after)}|${JSON.stringify(count)}`;
        if (seen.has(k)) continue;
        seen.add(k);
        next.push({ snap: after, counted: count, trace: t });
      }
    }
    frontier = next;
  }
  return undefined;
}

describe("budgets with a scope, bounded exhaustive search of the turn chart", () => {
  it("no request goes out once any scope's cap is reached, and the turn names the first cap reached, never one not reached (depth 16)", () => {
    expect(search(turnMachine, 16)).toBeUndefined();
    expect([...stopsSeen].sort()).toEqual(["prompt tokens", "session cost", "turn steps"]);
  }, 60_000);

  it("the search catches a chart that reads only the turn's own budget (a budget reset per round)", () => {
    expect(search(ignoresWiderBudgetsTurnMachine, 16)).toMatch(
      /^a request after the (prompt tokens|session cost) budget was spent/,
    );
  });

  it("a wider scope already spent when the turn starts stops it before its first request", () => {
    const spent: ScopeBudget = {
      scope: "session",
      budget: { maxSteps: 10 },
      spent: { ...NONE, steps: 10 },
    };
    const [s, actions] = initialTransition(turnMachine, { ...input, budgets: [spent] });
    expect(s.value).toBe("finalizing");
    expect(actions.map((a) => a.type)).not.toContain("prepare");
    expect(actions.map((a) => a.type)).not.toContain("recordAttempt");
    expect(s.context.budget).toEqual({
      scope: "session",
      kind: "steps",
      limit: 10,
      spent: 10,
      defaulted: false,
    });
  });
});
