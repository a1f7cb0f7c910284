import type { FakeReply, FakeStep } from "./fake-openai-server.ts";

/**
 * Replies in the Anthropic Messages API's streaming format, as its public documentation
 * describes it ("Streaming Messages"): named SSE events `message_start`, then per content block
 * `content_block_start` / `content_block_delta` (`text_delta`, `thinking_delta`,
 * `signature_delta`, `input_json_delta`) / `content_block_stop`, then `message_delta` (with
 * `stop_reason` and the output `usage`) and `message_stop`; `ping` anywhere; errors as JSON
 * bodies `{ type: "error", error: { type, message } }` (e.g. 429 `rate_limit_error` with
 * `retry-after`, 529 `overloaded_error`, 400 `invalid_request_error`).
 */

export type AnthropicBlock =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "redacted_thinking"; data: string }
  | { type: "tool_use"; id: string; name: string; input: string };

const ev = (event: string, data: Record<string, unknown>): FakeStep => ({
  type: "sse",
  event,
  data: { type: event, ...data },
});

/** Splits `s` into pieces of at most `n` characters (at least one piece). */
export function pieces(s: string, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < s.length; i += n) out.push(s.slice(i, i + n));
  return out.length ? out : [""];
}

/** The events of one content block at `index` (start, deltas in pieces of `size`, stop). */
export function blockEvents(index: number, block: AnthropicBlock, size = 7): FakeStep[] {
  switch (block.type) {
    case "text":
      return [
        ev("content_block_start", { index, content_block: { type: "text", text: "" } }),
        ...pieces(block.text, size).map((text) =>
          ev("content_block_delta", { index, delta: { type: "text_delta", text } }),
        ),
        ev("content_block_stop", { index }),
      ];
    case "thinking":
      return [
        ev("content_block_start", {
          index,
          content_block: { type: "thinking", thinking: "", signature: "" },
        }),
        ...pieces(block.thinking, size).map((thinking) =>
          ev("content_block_delta", { index, delta: { type: "thinking_delta", thinking } }),
        ),
        ev("content_block_delta", {
          index,
          delta: { type: "signature_delta", signature: block.signature },
        }),
        ev("content_block_stop", { index }),
      ];
    case "redacted_thinking":
      return [
        ev("content_block_start", {
          index,
          content_block: { type: "redacted_thinking", data: block.data },
        }),
        ev("content_block_stop", { index }),
      ];
    case "tool_use":
      return [
        ev("content_block_start", {
          index,
          content_block: { type: "tool_use", id: block.id, name: block.name, input: {} },
        }),
        ...pieces(block.input, size).map((partial_json) =>
          ev("content_block_delta", { index, delta: { type: "input_json_delta", partial_json } }),
        ),
        ev("content_block_stop", { index }),
      ];
  }
}

export interface AnthropicMessageOptions {
  stopReason?: "end_turn" | "tool_use" | "max_tokens";
  usage?: {
    input_tokens: number;
    output_tokens: number;
    cache_read_input_tokens?: number;
  };
  /** Chunk size of the deltas. */
  size?: number;
}

/** The opening event (what message_start carries before any content). */
export function messageStart(usage = { input_tokens: 25, output_tokens: 1 }): FakeStep {
  return ev("message_start", {
    message: {
      id: "msg_loopback",
      type: "message",
      role: "assistant",
      model: "claude-loopback",
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage,
    },
  });
}

/** A whole streamed message: start, a ping, every block, message_delta, message_stop. */
export function anthropicMessage(
  blocks: AnthropicBlock[],
  options: AnthropicMessageOptions = {},
): FakeReply {
  const usage = options.usage ?? { input_tokens: 100, output_tokens: 20 };
  const stopReason =
    options.stopReason ?? (blocks.some((b) => b.type === "tool_use") ? "tool_use" : "end_turn");
  return [
    messageStart({
      input_tokens: usage.input_tokens,
      output_tokens: 1,
      ...(usage.cache_read_input_tokens !== undefined
        ? { cache_read_input_tokens: usage.cache_read_input_tokens }
        : {}),
    }),
    ev("ping", {}),
    ...blocks.flatMap((b, i) => blockEvents(i, b, options.size)),
    ev("message_delta", {
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: usage.output_tokens },
    }),
    ev("message_stop", {}),
    { type: "end" },
  ];
}

/** An HTTP error with Anthropic's error body. */
export function anthropicError(
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
): FakeReply {
  return [{ type: "json", status, body: { type: "error", error: { type, message } }, headers }];
}
