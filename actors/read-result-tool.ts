import { z } from "zod";
import type { ToolResult } from "../contracts/tool-result.ts";
import { toolResultText } from "../session/projection.ts";
import type { Tool } from "../tools/define-tool.ts";
import { defineTool } from "../tools/define-tool.ts";
import type { Session } from "./session-runtime.ts";

/** The name of the built-in tool that restores a cleared tool result. */
export const READ_RESULT_TOOL = "read_result";

/** What the model sees in place of a result `session.clearToolResults()` cleared. */
export function clearedResultText(entryId: string, bytes: number): string {
  return `[result cleared from the context to save space: ${bytes} bytes; call ${READ_RESULT_TOOL} with {"id":"${entryId}"} to read it again]`;
}

/**
 * The built-in `read_result` tool (`createAgent({ context: { readResultTool: true } })`): returns
 * the original text of a tool result from the session's log, by the entry id the cleared
 * result names. Read-only and idempotent; an id that is not a tool result of the calling
 * session is an error saying so.
 */
export function readResultTool(sessionOf: (sessionId: string) => Session | undefined): Tool {
  return defineTool({
    name: READ_RESULT_TOOL,
    description:
      "Reads again a tool result that was cleared from the context to save space. Use it only with the id given in a '[result cleared …]' message.",
    parameters: z.object({
      id: z.string().describe("The id named in the cleared result, e.g. e000012ab"),
    }),
    traits: {
      readOnly: true,
      concurrencySafe: true,
      idempotent: true,
      cancellable: true,
      risk: "low",
    },
    execute: ({ id }, ctx): ToolResult => {
      const entry = sessionOf(ctx.sessionId)?.sessionLog.get(id);
      if (entry?.type !== "call_result") {
        return {
          ok: false,
          code: "NOT_FOUND",
          message: `no tool result with id ${JSON.stringify(id)} in this session; pass the id from a "[result cleared …]" message exactly`,
          retryable: false,
        };
      }
      return { ok: true, content: toolResultText(entry.result) };
    },
  });
}
