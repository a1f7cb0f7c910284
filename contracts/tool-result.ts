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

export interface ToolSuccess {
  ok: true;
  content: string;
  truncated?: boolean;
  continuation?: Continuation;
}

export interface ToolFailure {
  ok: false;
  code: ToolErrorCode;
  message: string;
  retryable: boolean;
}

/** The one result shape every tool call ends with. */
export type ToolResult = ToolSuccess | ToolFailure;
