import type { Message } from "../contracts/messages.ts";
import type { FinishReason } from "../contracts/model.ts";
import type { Refusal } from "../contracts/refusal.ts";
import { classifyModelError } from "../machines/policies/retry-classify.ts";
import type { TokenEstimator } from "./compaction-cuts.ts";
import type { EntryOf } from "./entries.ts";
import { summaryMessage } from "./projection.ts";

/**
 * The summary request of a compaction (docs/long-sessions.md): the request, its shrinking on context
 * overflow, and the validation a candidate summary must pass before it may replace anything.
 * Nothing here touches the log.
 */

/**
 * Asks for a summary of `messages` (neutral messages, contracts/messages.ts).
 * Contract: resolves with the summary text once the whole response has arrived; rejects on any
 * failure (a context-overflow failure as a `ModelError` the retry classifier reads as
 * `context_overflow`, e.g. code `context_length_exceeded` or status 413); stops promptly and
 * rejects when `signal` aborts. It must not write to the session log.
 */
export type Summarize = (
  messages: Message[],
  signal: AbortSignal,
) => Promise<string | SummaryResponse>;

/** A summary response with how it ended (a response cut by `length` is no summary). */
export interface SummaryResponse {
  text: string;
  finishReason?: FinishReason;
}

/** Fractions of the first input's estimate the input shrinks to after each overflow. */
export const SHRINK_STEPS: readonly number[] = [0.7, 0.5, 0.35];

/** What a compaction would summarise, split where it may be shortened. */
export interface SummaryInput {
  /** The current baseline's summary, kept at the head of every attempt that has room for it. */
  pinned: Message | null;
  /** The rest, oldest first, in groups that are never split (an assistant message with its tool messages). */
  groups: Message[][];
}

/** One summary request. `invalid`: it completed but the summary failed validation. */
export interface CompactionAttempt {
  inputMessages: number;
  inputTokens: number;
  outcome: "ok" | "overflow" | "error" | "invalid" | "aborted";
}

/** Why a summary request produced no candidate (a {@link Refusal} code). */
export type SummaryFailureCode = "CONTEXT_OVERFLOW" | "SUMMARY_FAILED" | "ABORTED";

export type SummaryOutcome =
  | {
      ok: true;
      /** The candidate: not yet validated. */
      summary: string;
      /** How its response ended, when the summarizer said. */
      finishReason?: FinishReason;
      /** The messages it summarises (the last attempt's input). */
      input: Message[];
      attempts: CompactionAttempt[];
    }
  | (Refusal<SummaryFailureCode> & { attempts: CompactionAttempt[]; error?: unknown });

export interface RequestSummaryOptions {
  summarize: Summarize;
  estimate: TokenEstimator;
  signal: AbortSignal;
}

/**
 * Requests a summary of `input`: first of all of it; after a context overflow, of the newest
 * groups (with the pinned summary when it fits) within 0.7, 0.5 and 0.35 of the first input's
 * estimate — a step whose input would cost no less than the previous attempt's, or has room
 * for no group, is skipped. After the last step it fails with `context_overflow`. It fails at
 * once on any other error, and on an abort (also when `summarize` ignores its signal).
 * The summary it returns is a CANDIDATE: pass it through {@link validateSummary}.
 */
export async function requestSummary(
  input: SummaryInput,
  options: RequestSummaryOptions,
): Promise<SummaryOutcome> {
  const { summarize, estimate, signal } = options;
  const cost = (ms: readonly Message[]) => ms.reduce((t, m) => t + estimate(m), 0);
  const full = [...(input.pinned ? [input.pinned] : []), ...input.groups.flat()];
  const first = cost(full);
  const attempts: CompactionAttempt[] = [];
  const fail = (code: SummaryFailureCode, message: string, error?: unknown) =>
    ({ ok: false, code, message, attempts, error }) as const;
  let messages = full;
  let level = 0; // the next entry of SHRINK_STEPS
  for (;;) {
    if (signal.aborted) return fail("ABORTED", "compaction aborted before the summary request");
    const attempt: CompactionAttempt = {
      inputMessages: messages.length,
      inputTokens: cost(messages),
      outcome: "ok",
    };
    attempts.push(attempt);
    try {
      const request = messages.slice();
      const response = await untilAborted(
        new Promise<string | SummaryResponse>((resolve) => resolve(summarize(request, signal))),
        signal,
      );
      if (signal.aborted) {
        attempt.outcome = "aborted";
        return fail("ABORTED", "compaction aborted while the summary arrived; it was discarded");
      }
      if (typeof response === "object" && response !== null) {
        const { text: summary, finishReason } = response;
        return { ok: true, summary, finishReason, input: messages, attempts };
      }
      return { ok: true, summary: response, input: messages, attempts };
    } catch (error) {
      const category = signal.aborted ? "aborted" : classifyModelError(error).category;
      if (category === "aborted") {
        attempt.outcome = "aborted";
        return fail("ABORTED", "compaction aborted during the summary request", error);
      }
      if (category !== "context_overflow") {
        attempt.outcome = "error";
        return fail("SUMMARY_FAILED", `summary request failed: ${describe(error)}`, error);
      }
      attempt.outcome = "overflow";
      let smaller: Message[] | null = null;
      while (!smaller && level < SHRINK_STEPS.length) {
        const next = shrink(input, SHRINK_STEPS[level++] * first, estimate);
        // null: no group fits; not smaller: the same request again. Both skip to the next step.
        if (next && cost(next) < attempt.inputTokens) smaller = next;
      }
      if (!smaller) {
        return fail(
          "CONTEXT_OVERFLOW",
          `the summary request overflowed the model's context ${attempts.length} time(s) (input ${attempts.map((a) => a.inputTokens).join(" → ")} tokens; it shrinks to ${SHRINK_STEPS.join(", ")} of the first ${first} at message-group boundaries); compact with a larger keepRecentTokens or summarise with a model that has a larger context window`,
          error,
        );
      }
      messages = smaller;
    }
  }
}

/**
 * The newest groups within `budget` tokens, after the pinned summary when it fits within the
 * budget too; null when no group fits.
 */
function shrink(input: SummaryInput, budget: number, estimate: TokenEstimator): Message[] | null {
  const pinnedCost = input.pinned ? estimate(input.pinned) : 0;
  const pin = input.pinned !== null && pinnedCost <= budget;
  let room = pin ? budget - pinnedCost : budget;
  let from = input.groups.length;
  while (from > 0) {
    const c = input.groups[from - 1].reduce((t, m) => t + estimate(m), 0);
    if (c > room) break;
    room -= c;
    from--;
  }
  if (from === input.groups.length) return null;
  const kept = input.groups.slice(from).flat();
  return pin && input.pinned ? [input.pinned, ...kept] : kept;
}

/**
 * Why a candidate summary may not replace the baseline, or null when it may: its response must
 * have ended normally (not by `length` or a content filter), it must be a non-empty string, and the message it becomes (see `summaryMessage`) must cost no more tokens
 * than the messages it summarises — so a compaction never makes the context larger.
 * This is a pure function.
 */
export function validateSummary(
  summary: unknown,
  input: readonly Message[],
  estimate: TokenEstimator,
  finishReason?: FinishReason,
): string | null {
  if (finishReason === "length") {
    return 'the summary response ended by length (finish_reason "length"): it is cut off';
  }
  if (finishReason === "content_filter") {
    return "the summary response was stopped by the provider's content filter";
  }
  if (typeof summary !== "string") {
    return `the summary is ${typeof summary}, not a string; summarize must resolve with the summary text`;
  }
  if (summary.trim() === "") return "the summary is empty";
  const message = summaryMessage({ summary } as EntryOf<"compaction">);
  const cost = estimate(message);
  const inputCost = input.reduce((t, m) => t + estimate(m), 0);
  if (cost > inputCost) {
    return `the summary (${cost} tokens as a message) is longer than the ${inputCost} tokens it summarises`;
  }
  return null;
}

/** `p`, or a rejection as soon as `signal` aborts (for a summarizer that ignores its signal). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
