// What a tool call ends with: the one result shape every layer reads.

import type { JsonValue } from "./messages.ts";

/** Stable machine-readable codes of failed tool results. */
export type ToolErrorCode =
  | "UNKNOWN_TOOL"
  | "INVALID_ARGS"
  | "TRUNCATED_CALL"
  | "EXECUTION_FAILED"
  | "CANCELLED"
  | "OUTCOME_UNKNOWN"
  | "DENIED"
  | "PATH_OUTSIDE_WORKSPACE"
  | "PARAMETER_MISMATCH"
  | "NOT_FOUND"
  | "TIMEOUT"
  | "NO_RESULT_RECORDED";

/** How the model can fetch the rest of a truncated output: call `tool` with `args`. */
export interface Continuation {
  tool: string;
  args: Record<string, unknown>;
  /** Where the full output was written, when the tool's `outputBudget` says `overflow: "spill"`. */
  path?: string;
  /** SHA-256 (hex) of the spilled output: the file at `path` is the output iff it hashes to this. */
  sha256?: string;
}

/** An image a tool returned (an MCP tool's image content), as base64 with its media type. */
export interface ToolImage {
  mediaType: string;
  base64: string;
}

/**
 * A call that produced output (possibly truncated, with how to fetch the rest). The model reads
 * `content`; `structured` (a tool's JSON result, e.g. an MCP tool's `structuredContent`) and
 * `images` are kept beside it, in the log and on `call.settled`, for the embedder.
 */
export interface ToolSuccess {
  ok: true;
  content: string;
  truncated?: boolean;
  continuation?: Continuation;
  structured?: JsonValue;
  images?: ToolImage[];
}

/** A call that failed: a stable code, a message for the model, and whether a retry may help. */
export interface ToolFailure {
  ok: false;
  code: ToolErrorCode;
  message: string;
  retryable: boolean;
}

/** The one result shape every tool call ends with. */
export type ToolResult = ToolSuccess | ToolFailure;

/** The codes of results for calls whose tool never ran (outcome `not_executed`). */
export type NotExecutedCode =
  | "CANCELLED"
  | "DENIED"
  | "TRUNCATED_CALL"
  | "UNKNOWN_TOOL"
  | "INVALID_ARGS";

/** How every result of a call that never ran begins. */
export const NOT_EXECUTED = "not executed: ";

/**
 * The result of a call whose tool never ran: its message is `not executed: <why>`, the one
 * text form of every such result (cancelled before start, declined, a failed dependency, a
 * truncated or invalid call, a crash before the start record). `why` starts in lower case and
 * says why, then how to fix it. A result that may have run (an unknown outcome, no recorded
 * result) must not use it. This is a pure function.
 */
export function notExecuted(
  code: NotExecutedCode,
  why: string,
  options: { retryable?: boolean } = {},
): ToolFailure {
  return { ok: false, code, message: NOT_EXECUTED + why, retryable: options.retryable ?? false };
}
