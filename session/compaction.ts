import type { Message, Usage } from "../contracts/messages.ts";
import type { Refusal } from "../contracts/refusal.ts";
import {
  type CutRule,
  estimateTokens,
  legalCutPoints,
  planCut,
  type TokenEstimator,
} from "./compaction-cuts.ts";
import {
  type CompactionAttempt,
  requestSummary,
  type Summarize,
  type SummaryFailureCode,
  type SummaryInput,
  validateSummary,
} from "./compaction-summary.ts";
import type { EntryOf } from "./entries.ts";
import type { SessionLog } from "./log.ts";

/** How much recent context a compaction keeps by default (tokens, by the estimator). */
export const DEFAULT_KEEP_RECENT_TOKENS = 20_000;

export interface CompactOptions {
  /** The summary request (the runtime passes a closure over the model). */
  summarize: Summarize;
  /** Keep at least this many tokens of the newest context. Default {@link DEFAULT_KEEP_RECENT_TOKENS}. */
  keepRecentTokens?: number;
  /** Default {@link estimateTokens}. */
  estimate?: TokenEstimator;
  /** Aborting it stops the compaction; nothing is appended. */
  signal?: AbortSignal;
  /** Where cuts may fall. Default {@link legalCutPoints}; a replacement may only be stricter. */
  cutPoints?: CutRule;
  /**
   * What the summary requests were charged, read when the entry is appended and recorded on it
   * (`usage`, `cost`, `usageEstimated`). Contract: synchronous, must not throw.
   */
  charge?: () => { usage: Usage; cost?: number; usageEstimated?: true } | undefined;
}

/**
 * Why a compaction did not happen (a {@link Refusal} code). In every case nothing was appended:
 * the old baseline stands.
 */
export type CompactionRefusalCode =
  | SummaryFailureCode
  /** No legal cut keeps `keepRecentTokens` and leaves something to summarise. */
  | "NOTHING_TO_COMPACT"
  /** The summary arrived but failed validation (`validateSummary`: non-empty, smaller). */
  | "INVALID_SUMMARY"
  /** The log changed during the request (another compaction, or the cut is no longer legal on the active path). */
  | "STALE"
  /** A turn is running (only `session.compact()` refuses with it; `compactSession` does not know). */
  | "TURN_OPEN";

/** What `session.compact()` resolves to: the new baseline, or why there is none. */
export type CompactionResult =
  | {
      ok: true;
      /** The appended `compaction` entry: the new baseline. */
      entry: EntryOf<"compaction">;
      firstKeptId: string;
      attempts: CompactionAttempt[];
      /** Estimated tokens of the view before and after. */
      tokensBefore: number;
      tokensAfter: number;
      /** Messages the summary stands for. */
      summarized: number;
      /** Older messages left out of the summary's input by overflow shrinking: gone from the view. */
      omitted: number;
      /** False when the flush failed: the entry is in the log (and the view) but still queued; the next `flush` retries it. */
      durable: boolean;
      flushError?: unknown;
    }
  | (Refusal<CompactionRefusalCode> & {
      /** The summary requests made before the refusal (empty when none was made). */
      attempts: CompactionAttempt[];
      error?: unknown;
    });

/** What a compaction will do, read from the log before the summary request. */
export interface CompactionPlan {
  firstKeptId: string;
  /** The baseline in force when planned (null: none); a different one at commit time is `stale`. */
  baselineId: string | null;
  /** Everything before the cut in the current view, as summary input. */
  input: SummaryInput;
  /** Messages before the cut (all of them leave the view). */
  dropped: number;
  tokensBefore: number;
}

/**
 * Compacts `log` (docs/long-sessions.md, invariant 10 of docs/architecture.md): chooses the latest legal cut keeping
 * `keepRecentTokens` (see {@link chooseCut}), asks `summarize` for a summary of everything
 * before it (the current baseline's summary included), shrinking the input to 0.7, 0.5 and 0.35
 * of the first estimate after each context overflow (see `requestSummary`), and validates the
 * candidate (see {@link validateSummary}). Only a valid summary is appended, as a `compaction`
 * entry `{ summary, firstKeptId }` that replaces the baseline, and flushed. Every failure is
 * a refusal `{ ok: false, code, message, attempts }` with nothing appended: `log.messages()` and `log.baseline()` are as
 * before. Throws a `TypeError` only on invalid options.
 */
export async function compactSession(
  log: SessionLog,
  options: CompactOptions,
): Promise<CompactionResult> {
  checkOptions(options);
  await log.loadHistory();
  const estimate = options.estimate ?? estimateTokens;
  const cutPoints = options.cutPoints ?? legalCutPoints;
  const signal = options.signal ?? new AbortController().signal;
  const keepRecentTokens = options.keepRecentTokens ?? DEFAULT_KEEP_RECENT_TOKENS;
  const plan = planCompaction(log, { keepRecentTokens, estimate, cutPoints });
  if (!plan) {
    return {
      ok: false,
      code: "NOTHING_TO_COMPACT",
      message: `no legal cut keeps ${keepRecentTokens} tokens of recent context and leaves earlier messages to summarise; lower keepRecentTokens or compact later`,
      attempts: [],
    };
  }
  const outcome = await requestSummary(plan.input, {
    summarize: options.summarize,
    estimate,
    signal,
  });
  if (!outcome.ok) return { ...outcome, message: `${outcome.message}; the old baseline stays` };
  const { summary, input, attempts, finishReason } = outcome;
  const invalid = validateSummary(summary, input, estimate, finishReason);
  if (invalid) {
    attempts[attempts.length - 1].outcome = "invalid";
    const message = `${invalid}; the old baseline stays (check the summarize prompt)`;
    return { ok: false, code: "INVALID_SUMMARY", message, attempts };
  }
  const committed = commitCompaction(log, plan, summary, cutPoints, options.charge?.());
  if (!committed.ok) return { ok: false, code: "STALE", message: committed.message, attempts };
  let durable = true;
  let flushError: unknown;
  await log.flush().catch((error: unknown) => {
    durable = false;
    flushError = error;
  });
  const summarized = input.length;
  return {
    ok: true,
    entry: committed.entry,
    firstKeptId: plan.firstKeptId,
    attempts,
    tokensBefore: plan.tokensBefore,
    tokensAfter: sum(log.history(), estimate),
    summarized,
    omitted: plan.dropped - summarized,
    durable,
    ...(durable ? {} : { flushError }),
  };
}

/**
 * Reads the cut and the summary input off the log's current view; null when there is nothing
 * to compact. Appends nothing.
 */
export function planCompaction(
  log: SessionLog,
  options: { keepRecentTokens: number; estimate: TokenEstimator; cutPoints: CutRule },
): CompactionPlan | null {
  const path = log.path();
  const view = {
    messages: log.history().slice(),
    sources: log.messageSources().slice(),
    baseline: log.baseline(),
  };
  const cut = planCut(path, view, options.cutPoints(path), options);
  if (!cut) return null;
  const before = view.messages.slice(0, cut.keptFrom);
  const pinned = view.baseline ? before[0] : null;
  const groups: Message[][] = [];
  for (const m of pinned ? before.slice(1) : before) {
    if (m.role === "tool" && groups.length > 0) groups[groups.length - 1].push(m);
    else groups.push([m]);
  }
  return {
    firstKeptId: cut.firstKeptId,
    baselineId: view.baseline?.id ?? null,
    input: { pinned, groups },
    dropped: before.length,
    tokensBefore: sum(view.messages, options.estimate),
  };
}

/**
 * Appends the `compaction` entry of `plan` with a VALIDATED `summary`, unless the log changed
 * so that the plan no longer holds (another baseline, or the cut is not legal on the active
 * path any more). Does not flush.
 */
export function commitCompaction(
  log: SessionLog,
  plan: CompactionPlan,
  summary: string,
  cutPoints: CutRule = legalCutPoints,
  charge?: { usage: Usage; cost?: number; usageEstimated?: true },
): { ok: true; entry: EntryOf<"compaction"> } | { ok: false; message: string } {
  const baselineId = log.baseline()?.id ?? null;
  if (baselineId !== plan.baselineId) {
    return {
      ok: false,
      message: `the baseline changed during the summary request (${plan.baselineId} → ${baselineId}); the summary was discarded, compact again`,
    };
  }
  if (!cutPoints(log.path()).includes(plan.firstKeptId)) {
    return {
      ok: false,
      message: `the cut ${plan.firstKeptId} is no longer a legal cut on the active path (the leaf moved or the log changed during the summary request); the summary was discarded, compact again`,
    };
  }
  const entry = log.append({
    type: "compaction",
    summary,
    firstKeptId: plan.firstKeptId,
    ...(charge ?? {}),
  });
  return { ok: true, entry };
}

function checkOptions(options: CompactOptions): void {
  if (typeof options?.summarize !== "function") {
    throw new TypeError(
      "compactSession: options.summarize must be a function (messages, signal) => Promise<string>",
    );
  }
  const k = options.keepRecentTokens;
  if (k !== undefined && !(Number.isFinite(k) && k >= 0)) {
    throw new TypeError(
      `compactSession: keepRecentTokens must be a finite number ≥ 0, got ${String(k)}`,
    );
  }
}

function sum(messages: readonly Message[], estimate: TokenEstimator): number {
  let t = 0;
  for (const m of messages) t += estimate(m);
  return t;
}
