import {
  type CompactionResult,
  type CompactOptions,
  commitCompaction,
  DEFAULT_KEEP_RECENT_TOKENS,
  planCompaction,
} from "../../../session/compaction.ts";
import { estimateTokens, legalCutPoints } from "../../../session/compaction-cuts.ts";
import { requestSummary, validateSummary } from "../../../session/compaction-summary.ts";
import type { SessionLog } from "../../../session/log.ts";

/**
 * MUTANT — a compactor that appends the `compaction` entry as soon as the summary request
 * returns and validates the candidate only afterwards: an empty or oversized summary is
 * reported as a failure but has already replaced the baseline (invariant 10 of docs/architecture.md: a failed
 * compaction must keep the old baseline). Tests assert the compaction property FAILS with it.
 */
export async function compactAppendsUnvalidated(
  log: SessionLog,
  options: CompactOptions,
): Promise<CompactionResult> {
  const estimate = options.estimate ?? estimateTokens;
  const cutPoints = options.cutPoints ?? legalCutPoints;
  const keepRecentTokens = options.keepRecentTokens ?? DEFAULT_KEEP_RECENT_TOKENS;
  const plan = planCompaction(log, { keepRecentTokens, estimate, cutPoints });
  if (!plan) return { ok: false, code: "NOTHING_TO_COMPACT", message: "", attempts: [] };
  const signal = options.signal ?? new AbortController().signal;
  const outcome = await requestSummary(plan.input, {
    summarize: options.summarize,
    estimate,
    signal,
  });
  if (!outcome.ok) return outcome;
  const committed = commitCompaction(log, plan, outcome.summary, cutPoints); // BUG: before validation
  if (!committed.ok)
    return { ok: false, code: "STALE", message: committed.message, attempts: outcome.attempts };
  const invalid = validateSummary(outcome.summary, outcome.input, estimate);
  if (invalid)
    return { ok: false, code: "INVALID_SUMMARY", message: invalid, attempts: outcome.attempts };
  await log.flush();
  const summarized = outcome.input.length;
  return {
    ok: true,
    entry: committed.entry,
    firstKeptId: plan.firstKeptId,
    attempts: outcome.attempts,
    tokensBefore: plan.tokensBefore,
    tokensAfter: log.history().reduce((t, m) => t + estimate(m), 0),
    summarized,
    omitted: plan.dropped - summarized,
    durable: true,
  };
}
