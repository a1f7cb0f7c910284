import type { FakeReply, FakeStep } from "./fake-openai-server.ts";

/**
 * Replies in the Gemini API's `streamGenerateContent?alt=sse` format, as its public
 * documentation describes it: unnamed SSE events, each a `GenerateContentResponse` with
 * `candidates[0].content.parts` (text parts, thought parts `{ text, thought: true }`,
 * `functionCall: { name, args }` parts, any of them with a `thoughtSignature`), the last with
 * `finishReason` and `usageMetadata` (`promptTokenCount`, `candidatesTokenCount`,
 * `cachedContentTokenCount`, `thoughtsTokenCount`); errors as JSON
 * `{ error: { code, message, status } }`.
 */

export type GeminiPart =
  | { text: string; thought?: boolean; thoughtSignature?: string }
  | { functionCall: { name: string; args: Record<string, unknown> }; thoughtSignature?: string };

export interface GeminiUsage {
  promptTokenCount: number;
  candidatesTokenCount: number;
  cachedContentTokenCount?: number;
  thoughtsTokenCount?: number;
}

const chunk = (
  parts: GeminiPart[],
  candidate: Record<string, unknown> = {},
  top: Record<string, unknown> = {},
): FakeStep => ({
  type: "sse",
  data: {
    candidates: [{ content: { role: "model", parts }, index: 0, ...candidate }],
    ...top,
    modelVersion: "gemini-loopback",
    responseId: "resp-loopback",
  },
});

/** Each part in its own event; the last carries the finish reason and the usage. */
export function geminiEvents(
  parts: GeminiPart[],
  options: { finishReason?: string; usage?: GeminiUsage } = {},
): FakeStep[] {
  const u = options.usage ?? { promptTokenCount: 100, candidatesTokenCount: 20 };
  const usageMetadata = { ...u, totalTokenCount: u.promptTokenCount + u.candidatesTokenCount };
  const all = parts.length > 0 ? parts : [{ text: "" }];
  return all.map((p, i) =>
    i < all.length - 1
      ? chunk([p])
      : chunk([p], { finishReason: options.finishReason ?? "STOP" }, { usageMetadata }),
  );
}

export function geminiReply(
  parts: GeminiPart[],
  options?: { finishReason?: string; usage?: GeminiUsage },
): FakeReply {
  return [...geminiEvents(parts, options), { type: "end" }];
}

/** An HTTP error with Google's error body. */
export function geminiError(
  code: number,
  status: string,
  message: string,
  headers: Record<string, string> = {},
): FakeReply {
  return [{ type: "json", status: code, body: { error: { code, message, status } }, headers }];
}
