import type { AssistantPart, ToolCallPart } from "../contracts/messages.ts";
import type { LogEntry } from "./entries.ts";

/** A tool call as log schema 2 stored it (OpenAI Chat shape). */
interface ChatCallV2 {
  id: string;
  type?: "function";
  function: { name: string; arguments: string };
}

const callPart = (c: ChatCallV2): ToolCallPart => ({
  type: "tool-call",
  id: c.id,
  name: c.function.name,
  arguments: c.function.arguments,
});

/**
 * One decoded entry of log schema 2 in schema 3's shape (session/entries.ts), or null when it
 * needs no change. Assistant messages: `text` + Chat `toolCalls` → `content` parts (the text part
 * omitted when empty); attempt ends: `partialCalls` → `ToolCallPart`s. Every other field is kept.
 * This is a pure function; an entry already in schema 3's shape returns null.
 */
export function upgradeEntryV2(entry: Record<string, unknown>): LogEntry | null {
  if (entry.type === "assistant_message" && !("content" in entry)) {
    const { text, toolCalls, ...rest } = entry as {
      text?: string;
      toolCalls?: ChatCallV2[];
    } & Record<string, unknown>;
    const content: AssistantPart[] = [];
    if (text) content.push({ type: "text", text });
    for (const c of toolCalls ?? []) content.push(callPart(c));
    return { ...rest, content } as unknown as LogEntry;
  }
  if (entry.type === "attempt_end" && Array.isArray(entry.partialCalls)) {
    const calls = entry.partialCalls as (ChatCallV2 | ToolCallPart)[];
    if (calls.every((c) => "function" in c)) {
      return {
        ...entry,
        partialCalls: (calls as ChatCallV2[]).map(callPart),
      } as unknown as LogEntry;
    }
  }
  return null;
}
