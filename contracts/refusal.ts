// The one failure shape of Keel's public methods that can refuse.

/**
 * What every public method that can refuse returns instead of doing it: a stable
 * machine-readable `code` (UPPER_SNAKE_CASE, listed in the method's result type) and a
 * `message` for people that says what was wrong and how to fix it. Nothing changed.
 *
 * A refusal is for a well-formed request that cannot be done now or here (a turn is running,
 * no such entry, the summary did not validate). A malformed request (a wrong type, an empty
 * prompt) is a programming error and throws a `TypeError` instead. A refusal may carry more
 * fields beside these three (`attempts` of a compaction, `line` of a JSONL parse).
 */
export interface Refusal<C extends string = string> {
  ok: false;
  code: C;
  /** What was wrong and how to fix it, in one or two sentences. */
  message: string;
}

/** Every refusal code of Keel's public methods. */
export type RefusalCode =
  /** A turn is running: the method works only between turns. */
  | "TURN_OPEN"
  /** The entry id names no entry of the session. */
  | "UNKNOWN_ENTRY"
  /** The entry is a leaf-move record, not a position in the conversation. */
  | "NOT_A_POSITION"
  /** The entry holds no conversation content to redact, or its input is still queued. */
  | "NOT_REDACTABLE"
  /** No permission request with that id is waiting. */
  | "UNKNOWN_REQUEST"
  /** The request was decided already (an earlier answer, from any process, or its deadline). */
  | "ALREADY_DECIDED"
  /** The answer was recorded, but no process running the session applied it in time. */
  | "ANSWER_PENDING"
  /** No legal cut keeps the recent context and leaves something to summarise. */
  | "NOTHING_TO_COMPACT"
  /** Even the smallest summary request overflowed the model's context. */
  | "CONTEXT_OVERFLOW"
  /** The summary request failed (network, provider error). */
  | "SUMMARY_FAILED"
  /** The summary arrived but did not validate (empty, or not smaller than what it replaces). */
  | "INVALID_SUMMARY"
  /** The log changed while the summary was requested. */
  | "STALE"
  /** The caller's signal aborted the operation. */
  | "ABORTED"
  /** A line of a JSONL export is not a log entry. */
  | "INVALID_LINE"
  /** The session has no acceptance spec (`createAgent({ acceptance })`). */
  | "ACCEPTANCE_OFF"
  /** Acceptance checks are running: wait for them. */
  | "ACCEPTANCE_RUNNING";

/** Builds a refusal. This is a pure function. */
export function refuse<C extends string>(code: C, message: string): Refusal<C> {
  return { ok: false, code, message };
}
