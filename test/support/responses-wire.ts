import { pieces } from "./anthropic-wire.ts";
import type { FakeReply, FakeStep } from "./fake-openai-server.ts";

/**
 * Replies in the OpenAI Responses API's streaming format, as its public documentation
 * describes it ("Streaming API responses"): named SSE events whose data carry `type` and
 * `sequence_number` — `response.created`, per output item `response.output_item.added` /
 * `.done` (reasoning items with `encrypted_content` and summary text deltas, messages with
 * `response.output_text.delta`, function calls with `response.function_call_arguments.delta`
 * / `.done`), then `response.completed` with the usage (cached and reasoning tokens); errors as
 * JSON `{ error: { message, type, param, code } }`.
 */

export type ResponsesItem =
  | { type: "reasoning"; id: string; summary: string; encrypted: string }
  | { type: "message"; id: string; text: string }
  | { type: "function_call"; id: string; callId: string; name: string; arguments: string };

export interface ResponsesUsage {
  input_tokens: number;
  output_tokens: number;
  cached_tokens?: number;
  reasoning_tokens?: number;
}

function sequencer() {
  let n = 0;
  return (type: string, data: Record<string, unknown>): FakeStep => ({
    type: "sse",
    event: type,
    data: { type, sequence_number: n++, ...data },
  });
}

const response = (status: string, output: unknown[], usage?: ResponsesUsage) => ({
  id: "resp_loopback",
  object: "response",
  created_at: 1_741_290_958,
  status,
  model: "gpt-loopback",
  output,
  incomplete_details: null,
  ...(usage
    ? {
        usage: {
          input_tokens: usage.input_tokens,
          input_tokens_details: { cached_tokens: usage.cached_tokens ?? 0 },
          output_tokens: usage.output_tokens,
          output_tokens_details: { reasoning_tokens: usage.reasoning_tokens ?? 0 },
          total_tokens: usage.input_tokens + usage.output_tokens,
        },
      }
    : {}),
});

function doneItem(item: ResponsesItem) {
  switch (item.type) {
    case "reasoning":
      return {
        id: item.id,
        type: "reasoning",
        summary: [{ type: "summary_text", text: item.summary }],
        encrypted_content: item.encrypted,
      };
    case "message":
      return {
        id: item.id,
        type: "message",
        status: "completed",
        role: "assistant",
        content: [{ type: "output_text", text: item.text, annotations: [] }],
      };
    case "function_call":
      return {
        id: item.id,
        type: "function_call",
        status: "completed",
        call_id: item.callId,
        name: item.name,
        arguments: item.arguments,
      };
  }
}

/** The events of one output item at `index`. */
function itemEvents(
  e: ReturnType<typeof sequencer>,
  index: number,
  item: ResponsesItem,
  size: number,
): FakeStep[] {
  const out: FakeStep[] = [];
  switch (item.type) {
    case "reasoning":
      out.push(
        e("response.output_item.added", {
          output_index: index,
          item: { id: item.id, type: "reasoning", summary: [], encrypted_content: item.encrypted },
        }),
        e("response.reasoning_summary_part.added", {
          item_id: item.id,
          output_index: index,
          summary_index: 0,
          part: { type: "summary_text", text: "" },
        }),
        ...pieces(item.summary, size).map((delta) =>
          e("response.reasoning_summary_text.delta", {
            item_id: item.id,
            output_index: index,
            summary_index: 0,
            delta,
          }),
        ),
        e("response.reasoning_summary_part.done", {
          item_id: item.id,
          output_index: index,
          summary_index: 0,
          part: { type: "summary_text", text: item.summary },
        }),
      );
      break;
    case "message":
      out.push(
        e("response.output_item.added", {
          output_index: index,
          item: {
            id: item.id,
            type: "message",
            status: "in_progress",
            role: "assistant",
            content: [],
          },
        }),
        e("response.content_part.added", {
          item_id: item.id,
          output_index: index,
          content_index: 0,
          part: { type: "output_text", text: "", annotations: [] },
        }),
        ...pieces(item.text, size).map((delta) =>
          e("response.output_text.delta", {
            item_id: item.id,
            output_index: index,
            content_index: 0,
            delta,
            logprobs: [],
          }),
        ),
        e("response.output_text.done", {
          item_id: item.id,
          output_index: index,
          content_index: 0,
          text: item.text,
        }),
      );
      break;
    case "function_call":
      out.push(
        e("response.output_item.added", {
          output_index: index,
          item: {
            id: item.id,
            type: "function_call",
            status: "in_progress",
            call_id: item.callId,
            name: item.name,
            arguments: "",
          },
        }),
        ...pieces(item.arguments, size).map((delta) =>
          e("response.function_call_arguments.delta", {
            item_id: item.id,
            output_index: index,
            delta,
          }),
        ),
        e("response.function_call_arguments.done", {
          item_id: item.id,
          output_index: index,
          arguments: item.arguments,
        }),
      );
      break;
  }
  out.push(e("response.output_item.done", { output_index: index, item: doneItem(item) }));
  return out;
}

/** The opening events and every item, without the completion (to cut a stream after `upTo` steps). */
export function responsesEvents(
  items: ResponsesItem[],
  usage: ResponsesUsage = { input_tokens: 100, output_tokens: 20 },
  size = 7,
): FakeStep[] {
  const e = sequencer();
  return [
    e("response.created", { response: response("in_progress", []) }),
    e("response.in_progress", { response: response("in_progress", []) }),
    ...items.flatMap((item, i) => itemEvents(e, i, item, size)),
    e("response.completed", { response: response("completed", items.map(doneItem), usage) }),
  ];
}

/** A whole streamed response. */
export function responsesReply(
  items: ResponsesItem[],
  usage?: ResponsesUsage,
  size?: number,
): FakeReply {
  return [...responsesEvents(items, usage, size), { type: "end" }];
}

/** An HTTP error with OpenAI's error body. */
export function responsesError(
  status: number,
  error: { message: string; type: string; code: string | null; param?: string | null },
  headers: Record<string, string> = {},
): FakeReply {
  return [{ type: "json", status, body: { error: { param: null, ...error } }, headers }];
}
