import type { ToolResult } from "../../contracts/tool-result.ts";

/** How a `tools/call` that threw ended, as the call's error result reads it. */
export type McpCallFailure =
  /** The call's signal aborted: Keel sent `notifications/cancelled`. */
  | { kind: "cancelled" }
  /** The server was lost during the call (its connection closed, its transport failed). */
  | { kind: "lost"; why: string }
  /** No answer within the call's timeout, or progress past its ceiling. */
  | { kind: "timeout"; detail: string }
  /** The server answered with a JSON-RPC error: its message, and the server stays up. */
  | { kind: "refused"; code: number; detail: string };

/**
 * The error result of an MCP call that did not return a result. A tool that may have acted
 * (not read-only, not idempotent) is `OUTCOME_UNKNOWN` when it was cancelled or its server was
 * lost; a JSON-RPC error is the server's own answer, so it is `EXECUTION_FAILED` with the
 * server's message. This is a pure function.
 */
export function mcpCallFailure(
  failure: McpCallFailure,
  server: string,
  tool: string,
  traits: { idempotent: boolean },
): ToolResult {
  switch (failure.kind) {
    case "cancelled":
      return {
        ok: false,
        code: "OUTCOME_UNKNOWN",
        message: `cancelled while running: Keel sent the MCP server "${server}" notifications/cancelled, but MCP does not confirm a stop, so whether ${tool} already made its change is unknown. Check before calling it again.`,
        retryable: false,
      };
    case "lost":
      return traits.idempotent
        ? {
            ok: false,
            code: "EXECUTION_FAILED",
            message: `the MCP server "${server}" was lost during the call (${failure.why}). ${tool} is idempotent, so calling it again is safe; the server is reconnected when the next turn starts.`,
            retryable: true,
          }
        : {
            ok: false,
            code: "OUTCOME_UNKNOWN",
            message: `the MCP server "${server}" was lost during the call (${failure.why}); whether ${tool} ran is unknown. Check its effects before calling it again; the server is reconnected when the next turn starts.`,
            retryable: false,
          };
    case "timeout":
      return {
        ok: false,
        code: "TIMEOUT",
        message: `the MCP server "${server}" did not answer ${tool} in time (${failure.detail}); whether it ran is unknown. Check its effects before retrying.`,
        retryable: false,
      };
    case "refused":
      return {
        ok: false,
        code: "EXECUTION_FAILED",
        message: `the MCP server "${server}" answered ${tool} with an error (JSON-RPC ${failure.code}): ${failure.detail}`,
        retryable: false,
      };
  }
}

/**
 * `text` with the credentials, query string and fragment of every URL in it cut
 * (`https://user:key@host/p?token=x` → `https://host/p?…`): connect errors and the server's
 * description quote URLs, and API keys travel in them. This is a pure function.
 */
export function redactUrls(text: string): string {
  return text.replace(
    /\b([a-z][a-z0-9+.-]*:\/\/)(?:[^\s/@?#]*@)?([^\s?#]*)(\?[^\s#]*)?(#\S*)?/gi,
    (_all, scheme: string, rest: string, query?: string, hash?: string) =>
      `${scheme}${rest}${query || hash ? "?…" : ""}`,
  );
}
