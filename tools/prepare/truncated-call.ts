import { notExecuted, type ToolFailure } from "../../contracts/tool-result.ts";
import type { RawToolCall } from "../types.ts";
import { receivedSnippet } from "./messages.ts";

/** The OpenAI Chat Completions shape of a call (`contracts/chat.ts` `ChatToolCall`). */
export interface ChatStyleToolCall {
  id: string;
  function: { name: string; arguments: string };
}

/**
 * The result every call of a length-truncated assistant message gets (`finish_reason:
 * "length"`): nothing was executed, even if the arguments happen to parse. A call cut so early
 * that it lacks its name or arguments (or holds a non-string there) is quoted as empty. Pure.
 */
export function truncatedCallResult(call: RawToolCall | ChatStyleToolCall): ToolFailure {
  const raw = call as Partial<RawToolCall> & Partial<ChatStyleToolCall>;
  const args = raw.argumentsText ?? raw.function?.arguments;
  const text = typeof args === "string" ? args : "";
  const name = String(raw.name ?? raw.function?.name ?? "");
  return notExecuted(
    "TRUNCATED_CALL",
    [
      `your output was cut off at the length limit, so the arguments of tool call "${name}" may be incomplete.`,
      'Where: the end of the arguments text (the response ended with finish_reason "length").',
      `Received: ${receivedSnippet(text)}`,
      "How to fix: re-issue the complete call in a new message. If the arguments are large (e.g. a whole file), make the call smaller: split the content across several calls or edit only the changed part.",
    ].join("\n"),
  );
}
