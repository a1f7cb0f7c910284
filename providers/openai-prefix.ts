import type { ChatMessage } from "../contracts/chat.ts";
import { type Message, toolCallsOf } from "../contracts/messages.ts";

/**
 * How an OpenAI-compatible server continues a partial assistant message (Continue, DeepSeek's
 * "chat prefix completion", vLLM's "continue final message"): the request ends with the
 * assistant's partial text and the server's answer is the rest of it. Chat Completions has no
 * standard field for it, so each server documents its own:
 * - `"vllm"`: the body carries `continue_final_message: true` and `add_generation_prompt:
 *   false` (vLLM refuses the two both true; the second defaults to true), so the chat template
 *   leaves the final message open instead of starting a new one;
 * - `"deepseek"`: the final assistant message carries `prefix: true` (DeepSeek's beta API:
 *   `baseURL: "https://api.deepseek.com/beta"`);
 * - an object: the fields another server wants, in the body and/or on the final message
 *   (e.g. `{ message: { prefix: true } }` for Mistral's prefix messages).
 */
export type PrefixContinuation = "vllm" | "deepseek" | PrefixFields;

/** The fields a continuation request adds (see {@link PrefixContinuation}). */
export interface PrefixFields {
  /** Added to the request body, e.g. `{ continue_final_message: true, add_generation_prompt: false }`. */
  body?: Record<string, unknown>;
  /** Added to the final (assistant) message, e.g. `{ prefix: true }`. */
  message?: Record<string, unknown>;
}

/** The servers Keel knows, by name. */
export const PREFIX_CONTINUATIONS: Readonly<Record<"vllm" | "deepseek", PrefixFields>> = {
  vllm: { body: { continue_final_message: true, add_generation_prompt: false } },
  deepseek: { message: { prefix: true } },
};

/** Body fields a continuation may not set: the adapter owns them. */
const OWNED_BODY = ["model", "messages", "stream", "tools"];
/** Message fields a continuation may not set: they are the message. */
const OWNED_MESSAGE = ["role", "content", "tool_calls"];

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * `openaiModel`'s `continueFromPartial` checked and resolved to the fields it adds (undefined:
 * off). Throws a TypeError naming what is wrong: an unknown name, an object without fields, or a
 * field the adapter sets itself. `baseURL` is checked for DeepSeek's, whose prefix completion
 * exists only on its beta endpoint.
 */
export function resolvePrefixContinuation(
  value: unknown,
  baseURL: string | undefined,
): PrefixFields | undefined {
  if (value === undefined || value === false) return undefined;
  const names = Object.keys(PREFIX_CONTINUATIONS);
  if (typeof value === "string") {
    if (!names.includes(value))
      throw new TypeError(
        `openaiModel: continueFromPartial must be ${names.map((n) => `"${n}"`).join(", ")} or { body?, message? } (the fields your server documents), got ${JSON.stringify(value)}`,
      );
    if (value === "deepseek" && baseURL && /(^|\/\/)api\.deepseek\.com/.test(baseURL)) {
      if (!/\/beta\/?$/.test(baseURL))
        throw new TypeError(
          `openaiModel: continueFromPartial "deepseek" needs DeepSeek's beta endpoint (its prefix completion is a beta feature): use baseURL "https://api.deepseek.com/beta", got ${JSON.stringify(baseURL)}`,
        );
    }
    return PREFIX_CONTINUATIONS[value as "vllm" | "deepseek"];
  }
  if (!isRecord(value))
    throw new TypeError(
      `openaiModel: continueFromPartial must be ${names.map((n) => `"${n}"`).join(", ")} or an object { body?, message? }, got ${typeof value}`,
    );
  const { body, message, ...rest } = value as PrefixFields & Record<string, unknown>;
  const extra = Object.keys(rest);
  if (extra.length > 0)
    throw new TypeError(
      `openaiModel: continueFromPartial takes only "body" and "message", got ${extra.map((k) => JSON.stringify(k)).join(", ")}`,
    );
  for (const [name, fields, owned] of [
    ["body", body, OWNED_BODY],
    ["message", message, OWNED_MESSAGE],
  ] as const) {
    if (fields === undefined) continue;
    if (!isRecord(fields))
      throw new TypeError(
        `openaiModel: continueFromPartial.${name} must be an object of fields, got ${JSON.stringify(fields)}`,
      );
    const taken = Object.keys(fields).filter((k) => owned.includes(k));
    if (taken.length > 0)
      throw new TypeError(
        `openaiModel: continueFromPartial.${name} may not set ${taken.map((k) => JSON.stringify(k)).join(", ")}: the adapter sets ${name === "body" ? "them" : "the message itself"}`,
      );
  }
  if (Object.keys(body ?? {}).length === 0 && Object.keys(message ?? {}).length === 0)
    throw new TypeError(
      "openaiModel: continueFromPartial as an object needs at least one field in body or message (what tells your server to continue the final message)",
    );
  return {
    ...(body ? { body: { ...body } } : {}),
    ...(message ? { message: { ...message } } : {}),
  };
}

/**
 * Whether a request is a continuation: its last message is the assistant's, with text and no
 * tool call (the partial answer the turn asks the model to continue; a finished turn's history
 * ends with a user or tool message). This is a pure function.
 */
export function isContinuation(messages: readonly Message[]): boolean {
  const last = messages.at(-1);
  return last?.role === "assistant" && toolCallsOf(last.content).length === 0;
}

/** `chat` with the continuation's message fields on its last message. This is a pure function. */
export function withPrefixMessage(
  chat: readonly ChatMessage[],
  fields: Record<string, unknown> | undefined,
): ChatMessage[] {
  if (!fields || chat.length === 0) return [...chat];
  const out = chat.slice();
  out[out.length - 1] = { ...out[out.length - 1], ...fields } as ChatMessage;
  return out;
}
