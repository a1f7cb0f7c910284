/**
 * A session's history (`session.history()`) as the AI SDK's `UIMessage`s, for a chat page that
 * loads a conversation before it resumes the stream of the turn that runs: each user message one
 * UI message, everything the model and the tools said until the next user message one assistant
 * message (a `step-start` part before each model response, tool calls as `dynamic-tool` parts
 * with their results). This is a pure function.
 */
import type { Message } from "../contracts/messages.ts";
import { parsedArguments } from "./ui-chunks.ts";

/** The UI message parts Keel writes (a subset of the AI SDK's `UIMessagePart`). */
export type UiPart =
  | { type: "text"; text: string; state?: "done" }
  | { type: "reasoning"; text: string; state?: "done" }
  | { type: "step-start" }
  | {
      type: "dynamic-tool";
      toolName: string;
      toolCallId: string;
      state: "input-available" | "output-available" | "output-error";
      input: unknown;
      output?: unknown;
      errorText?: string;
    };

/** A UI message (the AI SDK's `UIMessage` without metadata). */
export interface UiMessage {
  id: string;
  role: "user" | "assistant";
  parts: UiPart[];
}

/** See the file's comment. `history` is the session's, in order; system messages are left out. */
export function uiMessagesOf(history: readonly Message[]): UiMessage[] {
  const out: UiMessage[] = [];
  let assistant: UiMessage | undefined;
  const tools = new Map<string, Extract<UiPart, { type: "dynamic-tool" }>>();
  history.forEach((message, i) => {
    if (message.role === "user") {
      assistant = undefined;
      const parts: UiPart[] = [];
      for (const p of message.content)
        if (p.type === "text") parts.push({ type: "text", text: p.text });
      out.push({ id: `m${i}`, role: "user", parts });
      return;
    }
    if (message.role === "system") return;
    if (!assistant) {
      assistant = { id: `m${i}`, role: "assistant", parts: [] };
      out.push(assistant);
    }
    if (message.role === "tool") {
      const [result] = message.content;
      const part = tools.get(result.callId);
      if (!part) return;
      if (result.isError) Object.assign(part, { state: "output-error", errorText: result.content });
      else Object.assign(part, { state: "output-available", output: result.content });
      return;
    }
    assistant.parts.push({ type: "step-start" });
    for (const p of message.content) {
      if (p.type === "text") assistant.parts.push({ type: "text", text: p.text, state: "done" });
      else if (p.type === "reasoning")
        assistant.parts.push({ type: "reasoning", text: p.text, state: "done" });
      else {
        const part = {
          type: "dynamic-tool" as const,
          toolName: p.name,
          toolCallId: p.id,
          state: "input-available" as const,
          input: parsedArguments(p.arguments),
        };
        tools.set(p.id, part);
        assistant.parts.push(part);
      }
    }
  });
  return out;
}
