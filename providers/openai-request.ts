import { type ChatMessage, toChatMessage } from "../contracts/chat.ts";
import type { Message } from "../contracts/messages.ts";
import { OPENAI_CHAT } from "./openai-chunks.ts";

/**
 * Which assistant messages get their reasoning back as the field it streamed in
 * (`reasoning_content`, `reasoning`):
 * - `"tool-calls"` (default): those with tool calls. DeepSeek's and Kimi's thinking modes refuse
 *   the next request without it ("reasoning_content is missing in assistant tool call
 *   message"); DeepSeek ignores it on other messages, so it is not sent there.
 * - `"all"`: every assistant message that has such reasoning.
 * - `"off"`: never (a server that refuses the field).
 * Only reasoning this adapter received on the Chat wire is sent (parts whose metadata names
 * the field); reasoning from another provider, or Mistral's `thinking` parts, never is.
 */
export type ReasoningReplay = "tool-calls" | "all" | "off";

export const REASONING_REPLAYS: readonly ReasoningReplay[] = ["tool-calls", "all", "off"];

/**
 * Renders neutral messages as the Chat Completions request's `messages`: `toChatMessage`, then,
 * for assistant messages, the two things a strict OpenAI-compatible server needs that the
 * neutral rendering does not give:
 * - every call's `arguments` in a form the provider accepts (see {@link replayArguments});
 * - the reasoning it streamed, back in its field (see {@link ReasoningReplay}).
 * Results are cached per (frozen) message and renderer, so a long history costs O(new messages).
 */
export function chatRequestRenderer(replay: ReasoningReplay) {
  const cache = new WeakMap<Message, ChatMessage>();
  const render = (m: Message): ChatMessage => {
    const cached = cache.get(m);
    if (cached !== undefined) return cached;
    const chat = forRequest(m, replay);
    if (Object.isFrozen(m)) cache.set(m, chat);
    return chat;
  };
  return (messages: readonly Message[]): ChatMessage[] => messages.map(render);
}

function forRequest(m: Message, replay: ReasoningReplay): ChatMessage {
  const chat = toChatMessage(m);
  if (m.role !== "assistant" || chat.role !== "assistant") return chat;
  let out: (ChatMessage & { role: "assistant" }) | undefined;
  if (chat.tool_calls) {
    const calls = chat.tool_calls.map((c) => {
      const args = replayArguments(c.function.arguments);
      return args === c.function.arguments
        ? c
        : { ...c, function: { ...c.function, arguments: args } };
    });
    if (calls.some((c, i) => c !== chat.tool_calls![i])) out = { ...chat, tool_calls: calls };
  }
  if (replay === "all" || (replay === "tool-calls" && chat.tool_calls)) {
    const fields: Record<string, string> = {};
    for (const p of m.content) {
      if (p.type !== "reasoning") continue;
      const field = p.providerMetadata?.[OPENAI_CHAT]?.reasoningField;
      if (typeof field === "string") fields[field] = (fields[field] ?? "") + p.text;
    }
    if (Object.keys(fields).length > 0) out = { ...(out ?? chat), ...fields };
  }
  return out ?? chat;
}

/**
 * The arguments text to send back for a call: as logged when it is a JSON object (byte for
 * byte, for the provider's prefix cache); the inner text when it is a JSON string holding an
 * object (double-encoded, as preparation unwrapped it); `{}` otherwise — empty, malformed
 * (`{'location': 'Oslo'}`), truncated or not an object. Strict providers (DashScope) refuse every
 * later request that replays text which is not a JSON object; the call's error result already
 * told the model what was wrong with what it sent, and the log keeps the raw text.
 * This is a pure function.
 */
export function replayArguments(text: string): string {
  const parsed = parse(text);
  if (isObject(parsed)) return text;
  if (typeof parsed === "string" && isObject(parse(parsed))) return parsed;
  return "{}";
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): boolean {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
