import type { Message } from "./messages.ts";
import type { ModelToolSpec } from "./model.ts";

/**
 * How many tokens a request costs, as small functions over the neutral messages
 * (contracts/messages.ts) that every adapter renders: the context budget, compaction and the
 * scripted model's window all count with these.
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

/**
 * What one image costs in the budget: a mid-sized image (providers charge by pixels, about
 * 1 600 tokens for 1 000 × 1 000 with OpenAI's and Anthropic's published formulas). Images are
 * not text, so no tokenizer counts them.
 */
export const IMAGE_TOKENS = 1600;

/**
 * Tokens one message costs: its text (text parts joined, as the Chat shape sends them), its
 * reasoning (sent back to the providers that round-trip it), its calls' names and arguments,
 * a result's text, {@link IMAGE_TOKENS} an image, and framing. Provider metadata (signatures,
 * encrypted reasoning) is not counted: provider usage covers it after the next response.
 */
export function messageTokens(message: Message, count: TextCounter): number {
  let t = MESSAGE_OVERHEAD;
  if (message.role === "system") return t + count(message.content);
  let text = "";
  for (const p of message.content) {
    switch (p.type) {
      case "text":
        text += p.text;
        break;
      case "reasoning":
        if (p.text) t += count(p.text);
        break;
      case "image":
        t += IMAGE_TOKENS;
        break;
      case "tool-call":
        t += MESSAGE_OVERHEAD + count(p.name) + count(p.arguments);
        break;
      case "tool-result":
        t += count(p.content);
        break;
    }
  }
  if (text) t += count(text);
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
    messages: readonly Message[];
    tools: readonly ModelToolSpec[];
  },
  count: TextCounter,
): number {
  let t = headTokens(request.instructions, request.tools, count);
  for (const m of request.messages) t += messageTokens(m, count);
  return t;
}
