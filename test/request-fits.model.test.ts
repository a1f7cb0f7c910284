import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { ModelRequest } from "../contracts/model.ts";
import { estimateTextTokens, requestTokens } from "../contracts/tokens.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { FitInput, FitPlan } from "../session/fit-request.ts";
import { defineTool } from "../tools/define-tool.ts";
import { fitEachAlone } from "./support/mutants/fit-each-alone.ts";

/**
 * Invariant 21 of docs/architecture.md over random sessions: prompts whose steps return batches
 * of tool results of random sizes (alone under the window, together often over it), manual
 * compactions between prompts, and summarizers that answer, write too much or fail. After every
 * sequence, each request the model received fits what it takes (its window less the reserve,
 * or its input limit), counted by the model, and every prompt completes (so none fails twice
 * for the same overflow).
 */

type Summary = "ok" | "long" | "error";
interface Prompt {
  /** Each step: the sizes (characters) of the results of one batch. */
  steps: number[][];
  compactAfter: boolean;
}
interface Scenario {
  window: number;
  maxInput: number | null;
  summary: Summary;
  prompts: Prompt[];
}

const scenarioArb: fc.Arbitrary<Scenario> = fc.record({
  window: fc.constantFrom(3000, 4000, 8000),
  maxInput: fc.option(fc.constantFrom(1500, 2500), { nil: null }),
  summary: fc.constantFrom<Summary>("ok", "long", "error"),
  prompts: fc.array(
    fc.record({
      steps: fc.array(
        fc.array(fc.integer({ min: 40, max: 5000 }), { minLength: 1, maxLength: 7 }),
        {
          maxLength: 3,
        },
      ),
      compactAfter: fc.boolean(),
    }),
    { minLength: 1, maxLength: 4 },
  ),
});

const isSummary = (r: Pick<ModelRequest, "messages">) => {
  const last = r.messages.at(-1);
  return (
    last?.role === "user" &&
    last.content.some((p) => p.type === "text" && p.text.startsWith("Summarise the conversation"))
  );
};

const read = defineTool({
  name: "read",
  description: "reads a part",
  parameters: z.object({ size: z.number(), tag: z.string() }),
  traits: { readOnly: true },
  execute: ({ size, tag }) => `${tag} `.repeat(Math.ceil(size / (tag.length + 1))).slice(0, size),
});

async function run(
  s: Scenario,
  fitPlan?: (half: number) => (input: FitInput) => FitPlan,
): Promise<string | null> {
  const reserve = Math.floor(s.window / 8);
  const room = Math.min(s.window - reserve, s.maxInput ?? Infinity);
  let current: Prompt = s.prompts[0];
  let step = 0;
  const model = scriptedModel(
    (request, index) => {
      if (isSummary(request)) {
        if (s.summary === "error") return { error: { status: 500, message: "summary failed" } };
        const text = s.summary === "long" ? "s".repeat(20_000) : "The user asked to read parts.";
        return { text };
      }
      const sizes = current.steps[step++];
      if (!sizes) return { text: "done" };
      return {
        toolCalls: sizes.map((size, i) => ({
          id: `c${index}_${i}`,
          name: "read",
          arguments: JSON.stringify({ size, tag: `r${index}_${i}` }),
        })),
      };
    },
    {
      contextWindow: s.window,
      ...(s.maxInput === null ? {} : { maxInputTokens: s.maxInput }),
    },
  );
  const agent = createAgent({
    model,
    tools: [read],
    retry: { maxRetries: 0 },
    ...(fitPlan ? { context: { fitPlan: fitPlan(Math.floor(room / 2)) } } : {}),
  });
  try {
    const session = agent.session("fits");
    for (const [i, p] of s.prompts.entries()) {
      current = p;
      step = 0;
      const result = await session.prompt(`prompt ${i}: read the parts`);
      if (result.status !== "completed") return `prompt ${i} ${result.status}: ${result.reason}`;
      if (p.compactAfter) await session.compact();
    }
    for (const r of model.requests) {
      const sent = { instructions: r.instructions, messages: r.history, tools: r.tools };
      if (isSummary(sent)) continue;
      const tokens = requestTokens(sent, estimateTextTokens);
      if (tokens > room) return `request ${r.index} took ${tokens} tokens, over the room ${room}`;
    }
    return null;
  } finally {
    await agent.close();
  }
}

const SEED = 40;

describe("every request fits what the model takes (invariant 21)", () => {
  it("after any sequence of result batches and compactions, every request fits and every prompt completes", async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async (s) => {
        const problem = await run(s);
        expect(problem).toBeNull();
      }),
      { numRuns: 60, seed: SEED },
    );
  }, 120_000);

  it("MUTANT: judging each result alone against half the room (no batch-wide room) is caught", async () => {
    const out = await fc.check(
      fc.asyncProperty(scenarioArb, async (s) => (await run(s, fitEachAlone)) === null),
      { numRuns: 60, seed: SEED, endOnFailure: true },
    );
    expect(out.failed).toBe(true);
  }, 120_000);
});
