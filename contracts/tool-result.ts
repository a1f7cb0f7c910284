// What a tool call ends with: the one result shape every layer reads.

/** Stable machine-readable codes of failed tool results. */
export type ToolErrorCode =
  | "UNKNOWN_TOOL"
  | "INVALID_ARGS"
  | "TRUNCATED_CALL"
  | "EXECUTION_FAILED"
  | "CANCELLED"
  | "OUTCOME_UNKNOWN"
  | "DENIED"
  | "DEPENDENCY_FAILED"
  | "PATH_OUTSIDE_WORKSPACE"
  | "PARAMETER_MISMATCH"
  | "NOT_FOUND"
  | "TIMEOUT"
  | "NO_RESULT_RECORDED";

/** How the model can fetch the rest of a truncated output: call `tool` with `args`. */
export interface Continuation {
  tool: string;
  args: Record<string, unknown>;
  /** Where spilled output was written (path under the workspace), when `overflow: "spill"`. */
  path?: string;
}

/** A call that produced output (possibly truncated, with how to fetch the rest). */
export interface ToolSuccess {
  ok: true;
  content: string;
  truncated?: boolean;
  continuation?: Continuation;
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
