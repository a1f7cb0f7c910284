// The provider-neutral message model: what the log stores, the projection builds and every model
// adapter reads. Each adapter renders it to its wire (OpenAI Chat, the AI SDK's V3 prompt, …);
// `session.messages()` renders it as OpenAI Chat (contracts/chat.ts), `session.history()` returns
// it as is.
//
// Changelog: log schema 3 (issue 16) introduced it; schema 2 stored OpenAI Chat tool calls
// (`{ id, type: "function", function: { name, arguments } }`) and string-only content.

/**
 * What a provider attached to a part, by provider name, as it sent it: Anthropic's thinking
 * `signature` or `redactedData`, the Responses API's `itemId` and `reasoningEncryptedContent`,
 * Gemini's `thoughtSignature`. Opaque to Keel: stored in the log and sent back unchanged (the
 * AI SDK's `SharedV3ProviderMetadata` shape).
 */
export type ProviderMetadata = Record<string, { [key: string]: JsonValue | undefined }>;

/** Any value JSON can carry (provider metadata, tool arguments once parsed). */
export type JsonValue =
  | null
  | string
  | number
  | boolean
  | JsonValue[]
  | { [key: string]: JsonValue | undefined };

/** Text, in a user or an assistant message. */
export interface TextPart {
  type: "text";
  text: string;
  providerMetadata?: ProviderMetadata;
}

/**
 * An image the user sent: by URL (`https:`, or a `data:` URL), or as base64 bytes with their
 * media type. Only user messages carry images.
 */
export type ImagePart =
  | { type: "image"; url: string; mediaType?: string }
  | { type: "image"; base64: string; mediaType: string };

/**
 * A model's reasoning ("thinking"). `text` may be empty (a redacted or encrypted block); what
 * makes it valid to send back is `providerMetadata`, kept byte for byte.
 */
export interface ReasoningPart {
  type: "reasoning";
  text: string;
  providerMetadata?: ProviderMetadata;
}

/** A tool call the model made. `arguments` is the raw text exactly as streamed (may be malformed). */
export interface ToolCallPart {
  type: "tool-call";
  id: string;
  name: string;
  arguments: string;
  providerMetadata?: ProviderMetadata;
}

/** The result of one tool call, paired with its call by `callId`. */
export interface ToolResultPart {
  type: "tool-result";
  callId: string;
  name: string;
  /** The text the model reads (see session/projection.ts `toolResultText`). */
  content: string;
  isError?: boolean;
}

/** What a user message holds: text and images. */
export type UserPart = TextPart | ImagePart;
/** In the order the log keeps: reasoning first, then text, then tool calls by index. */
export type AssistantPart = TextPart | ReasoningPart | ToolCallPart;

/**
 * One message of the neutral model. A tool message carries exactly one result; the projection
 * puts each right after its assistant message, in call order.
 */
export type Message =
  | { role: "system"; content: string }
  | { role: "user"; content: UserPart[] }
  | { role: "assistant"; content: AssistantPart[] }
  | { role: "tool"; content: [ToolResultPart] };

/** Token counts of one response. Optional fields are absent when the provider did not say. */
export interface Usage {
  /** Every input token, cached ones included. */
  inputTokens: number;
  /** Every output token, reasoning ones included. */
  outputTokens: number;
  /** Input tokens read from the provider's prompt cache. */
  cachedInputTokens?: number;
  /** Output tokens spent on reasoning. */
  reasoningTokens?: number;
}

/** The text of `parts` (text parts only, joined). */
export function textOf(parts: readonly (AssistantPart | UserPart)[]): string {
  let text = "";
  for (const p of parts) if (p.type === "text") text += p.text;
  return text;
}

/** The tool calls among `parts`, in order. */
export function toolCallsOf(parts: readonly AssistantPart[]): ToolCallPart[] {
  return parts.filter((p): p is ToolCallPart => p.type === "tool-call");
}

/** A user message of one text part. */
export function userText(text: string): Message {
  return { role: "user", content: [{ type: "text", text }] };
}
