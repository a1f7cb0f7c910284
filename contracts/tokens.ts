import type { ChatMessage, ModelToolSpec } from "./model.ts";

/**
 * How many tokens a request costs, as small functions over the messages: the context budget,
 * compaction and the scripted model's window all count with these.
 */

/**
 * Counts the tokens of a text.
 * Contract: pure, deterministic, synchronous; returns an integer ≥ 0.
 */
export type TextCounter = (text: string) => number;

/**
 * The chars-based estimate used when the model has no tokenizer: ⌈UTF-16 code units / 4⌉.
 * English prose and code average 3.5–4.5 characters a token with OpenAI's tokenizers (see
 * bench/extras/tokenizers.ts for a measured transcript); JSON with short keys and non-Latin
 * scripts run denser, so the estimate errs low there — the reserve and the threshold absorb
 * it, and provider usage replaces it after every response.
 */
export const estimateTextTokens: TextCounter = (text) => Math.ceil(text.length / 4);

/** Framing tokens of one message (role, separators), as in OpenAI's published counting recipe. */
export const MESSAGE_OVERHEAD = 3;
/** Framing tokens of a request (the assistant reply's priming). */
export const REQUEST_OVERHEAD = 3;

/** Tokens one message costs: its text, its calls' names and arguments, framing. */
export function messageTokens(message: ChatMessage, count: TextCounter): number {
  let t = MESSAGE_OVERHEAD;
  if (message.content) t += count(message.content);
  if (message.role === "assistant" && message.tool_calls) {
    for (const c of message.tool_calls) {
      t += MESSAGE_OVERHEAD + count(c.function.name) + count(c.function.arguments);
    }
  }
  return t;
}

/** Tokens of the stable head of a request: framing, the instructions and the tool specs. */
export function headTokens(
  instructions: string | undefined,
  tools: readonly ModelToolSpec[],
  count: TextCounter,
): number {
  let t = REQUEST_OVERHEAD;
  if (instructions) t += MESSAGE_OVERHEAD + count(instructions);
  if (tools.length > 0) t += count(JSON.stringify(tools));
  return t;
}

/** Tokens of a whole request (O(messages): for tests, adapters and one-off checks). */
export function requestTokens(
  request: {
    instructions?: string;
    messages: readonly ChatMessage[];
    tools: readonly ModelToolSpec[];
  },
  count: TextCounter,
): number {
  let t = headTokens(request.instructions, request.tools, count);
  for (const m of request.messages) t += messageTokens(m, count);
  return t;
}
