import { z } from "zod";
import type { ToolResult } from "../contracts/tool-result.ts";
import { READ_RESULT_TOOL } from "../session/clear-results.ts";
import type { LogEntry } from "../session/entries.ts";
import { toolResultText } from "../session/projection.ts";
import type { Tool } from "../tools/define-tool.ts";
import { defineTool } from "../tools/define-tool.ts";

/**
 * The built-in `read_result` tool (`createAgent({ context: { readResultTool: true } })`): returns
 * the original text of a tool result from the session's log (`logOf` gives the calling session's), by the entry id the cleared
 * result names. Read-only and idempotent; an id that is not a tool result of the calling
 * session is an error saying so.
 */
export function readResultTool(
  logOf: (sessionId: string) => { get(entryId: string): LogEntry | undefined } | undefined,
): Tool {
  return defineTool({
    name: READ_RESULT_TOOL,
    description:
      "Reads again a tool result that was cleared or offloaded from the context to save space. Use it only with the id given in a '[result cleared …]' or '[result offloaded …]' message.",
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
      const entry = logOf(ctx.sessionId)?.get(id);
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
