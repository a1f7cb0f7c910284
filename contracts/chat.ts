import type { Message, UserPart } from "./messages.ts";

/**
 * A message in OpenAI Chat Completions shape: what `session.messages()` returns and what
 * `openaiModel` sends. A user message with an image has array content (Chat's `image_url`
 * parts); reasoning has no place in this shape and is left out.
 */
export type ChatMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string | ChatUserContent[] }
  | {
      role: "assistant";
      content: string | null;
      tool_calls?: ChatToolCall[];
    }
  | { role: "tool"; tool_call_id: string; content: string };

/** A user message's content in Chat Completions shape: text, or text and image parts. */
export type ChatUserContent =
  | { type: "text"; text: string }
  | { type: "image_url"; image_url: { url: string } };

/** A tool call of an assistant message, in Chat Completions shape. */
export interface ChatToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

// Neutral messages are frozen and never change once projected: each is rendered once.
const rendered = new WeakMap<Message, ChatMessage>();

/**
 * The OpenAI Chat rendering of one neutral message: an assistant message's text parts joined
 * (`null` when it has calls and no text), its calls as `tool_calls` (omitted when none), its
 * reasoning dropped; a user message of text only as a string.
 * This is a pure function; results are cached per (frozen) message object.
 */
export function toChatMessage(message: Message): ChatMessage {
  const cached = rendered.get(message);
  if (cached !== undefined) return cached;
  const chat = render(message);
  if (Object.isFrozen(message)) rendered.set(message, Object.freeze(chat));
  return chat;
}

/** {@link toChatMessage} of each message. O(messages), O(1) each after the first time. */
export function toChatMessages(messages: readonly Message[]): ChatMessage[] {
  const out = new Array<ChatMessage>(messages.length);
  for (let i = 0; i < messages.length; i++) out[i] = toChatMessage(messages[i]);
  return out;
}

function render(m: Message): ChatMessage {
  switch (m.role) {
    case "system":
      return { role: "system", content: m.content };
    case "user":
      return { role: "user", content: userContent(m.content) };
    case "tool":
      return { role: "tool", tool_call_id: m.content[0].callId, content: m.content[0].content };
    case "assistant": {
      let text = "";
      const calls: ChatToolCall[] = [];
      for (const p of m.content) {
        if (p.type === "text") text += p.text;
        else if (p.type === "tool-call")
          calls.push({
            id: p.id,
            type: "function",
            function: { name: p.name, arguments: p.arguments },
          });
      }
      if (calls.length === 0) return { role: "assistant", content: text };
      return { role: "assistant", content: text === "" ? null : text, tool_calls: calls };
    }
  }
}

function userContent(parts: readonly UserPart[]): string | ChatUserContent[] {
  if (parts.every((p) => p.type === "text")) return parts.map((p) => p.text).join("");
  return parts.map((p) =>
    p.type === "text"
      ? { type: "text", text: p.text }
      : {
          type: "image_url",
          image_url: { url: "url" in p ? p.url : `data:${p.mediaType};base64,${p.base64}` },
        },
  );
}
