import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { scheduledModel, scheduledTool } from "../actors/fault-injection.ts";
import { seededIds } from "../actors/ids.ts";
import { modelSummarizer } from "../actors/model-summarizer.ts";
import type { Model } from "../contracts/model.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { CompactionResult, compactSession } from "../session/compaction.ts";
import type { SessionLog } from "../session/log.ts";
import { defineTool } from "../tools/define-tool.ts";
import { keptOrphan, wellFormedViolation } from "./session-random-log.ts";
import { failWithSchedule } from "./support/harness.ts";
import { compactAppendsUnvalidated } from "./support/mutants/compaction-appends-unvalidated.ts";

/**
 * Invariant 10 of docs/architecture.md for `session.compact()` as an interleaving search over a real session (automatic
 * compaction mid-turn is test/compaction.race.test.ts): prompts whose turns call tools,
 * and compactions (`session.compact()`) whose summary requests succeed, come back empty or fail,
 * all ordered by the scheduler (model answers, tool returns, each compaction and each prompt are
 * tasks). At the end, and whatever the order: the view has no orphan tool result and every call
 * exactly one result, no kept result lost its call, and only compactions that reported success
 * left a compaction entry (a failed one keeps the old baseline).
 *
 * The cut-at-a-result mutant (test/support/mutants/compaction-cuts-at-results.ts) is caught by
 * test/compaction.model.test.ts, not here: the runtime writes a batch's results right after its
 * call, and planCut keeps a tool message with its call, so no runtime log lets it cut there.
 */
type Summary = "ok" | "empty" | "error";
interface CompactingSession {
  compact: (o: { keepRecentTokens: number }) => Promise<CompactionResult>;
  readonly sessionLog: SessionLog;
  readonly currentTurn: unknown;
}
type Summarize = Parameters<typeof compactSession>[1]["summarize"];
type Compact = (
  session: CompactingSession,
  summarize: Summarize,
  keep: number,
) => Promise<CompactionResult>;

const realCompact: Compact = (session, _summarize, keep) =>
  session.compact({ keepRecentTokens: keep });

/**
 * A broken compactor run like `session.compact()` (refused while a turn is open, else on the
 * session's live log with the session model's summarizer).
 */
const mutantCompact =
  (
    run: (log: SessionLog, o: Parameters<typeof compactSession>[1]) => Promise<CompactionResult>,
  ): Compact =>
  (session, summarize, keep) =>
    session.currentTurn
      ? session.compact({ keepRecentTokens: keep })
      : run(session.sessionLog, { keepRecentTokens: keep, summarize });

async function scenario(
  s: fc.Scheduler,
  plan: { prompts: number; calls: number; summaries: Summary[]; after: number[]; keep: number },
  compact: Compact,
): Promise<string | undefined> {
  const summaries = [...plan.summaries];
  const work = defineTool({
    name: "work",
    description: "Work the scheduler finishes.",
    parameters: z.object({ n: z.number() }),
    traits: { concurrencySafe: true },
    execute: ({ n }) => `worked ${n} ${"x".repeat(200)}`,
  });
  let step = 0;
  const script = scriptedModel((request) => {
    if (request.tools.length === 0) {
      const kind = summaries.shift() ?? "ok";
      if (kind === "error") return { error: { kind: "network", message: "summary cut" } };
      return { text: kind === "empty" ? "" : "SUMMARY" };
    }
    step++;
    return step % 2 === 1
      ? {
          toolCalls: Array.from({ length: plan.calls }, (_, i) => ({
            id: `c${step}-${i}`,
            name: "work",
            arguments: JSON.stringify({ n: i }),
          })),
        }
      : { text: `answer ${step}` };
  });
  const model: Model = scheduledModel(script, s);
  const ids = seededIds(10);
  const session = createAgent({ model, tools: [scheduledTool(work, s)], ids }).session("c");
  const prompts = [session.prompt("start")];
  for (let k = 1; k < plan.prompts; k++)
    prompts.push(
      s.schedule(Promise.resolve(), `prompt ${k}`).then(() => session.prompt(`more ${k}`)),
    );
  const summarize = modelSummarizer(model, ids);
  // Each compaction is asked for after a given prompt's turn ended (or at any time): it may
  // still meet the next turn, a queued prompt or another compaction.
  const results = plan.summaries.map(async (_, k) => {
    const j = plan.after[k] % (prompts.length + 1);
    if (j < prompts.length) await prompts[j];
    await s.schedule(Promise.resolve(), `compact ${k}`);
    return compact(session, summarize, plan.keep);
  });
  await s.waitFor(Promise.all([...prompts, ...results]));
  await s.waitIdle();
  await session.awaitIdle();
  const log = session.sessionLog;
  const bad = wellFormedViolation(log.messages()) ?? keptOrphan(log.path(), log.baseline());
  if (bad) return `invariant 10 of docs/architecture.md broken: ${bad}`;
  const done = await Promise.all(results);
  const succeeded = done.filter((r) => r.ok).length;
  const entries = log.entries().filter((e) => e.type === "compaction").length;
  if (entries !== succeeded)
    return `invariant 10 of docs/architecture.md broken: ${entries} compaction entries for ${succeeded} successful compactions (${done
      .map((r) => (r.ok ? "ok" : r.code))
      .join(", ")})`;
  return undefined;
}

const planArb = fc.record({
  prompts: fc.integer({ min: 1, max: 3 }),
  calls: fc.integer({ min: 1, max: 3 }),
  keep: fc.integer({ min: 1, max: 120 }),
  after: fc.array(fc.nat(), { minLength: 3, maxLength: 3 }),
  summaries: fc.array(fc.constantFrom<Summary>("ok", "ok", "empty", "error"), {
    minLength: 1,
    maxLength: 3,
  }),
});

const property = (compact: Compact) =>
  fc.asyncProperty(fc.scheduler(), planArb, async (s, plan) => {
    failWithSchedule(s, await scenario(s, plan, compact));
  });

describe("session.compact() against turns, tool returns and failing summaries (invariant 10 of docs/architecture.md, interleaving search)", () => {
  it("no orphan tool result, no kept result without its call, and a failed compaction keeps the baseline", async () => {
    await fc.assert(property(realCompact), { numRuns: 100, seed: 10 });
  });

  it("the search catches a compactor that appends the summary before validating it", async () => {
    const out = await fc.check(property(mutantCompact(compactAppendsUnvalidated)), {
      numRuns: 200,
      seed: 10,
    });
    expect(out.failed).toBe(true);
    expect(String(out.errorInstance)).toMatch(/compaction entries for/);
  });
});
