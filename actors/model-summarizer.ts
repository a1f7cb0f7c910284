import type { IdGenerator } from "../contracts/ids.ts";
import { type Message, type Usage, userText } from "../contracts/messages.ts";
import type { Model } from "../contracts/model.ts";
import { createAssembler } from "../providers/stream-assembler.ts";
import type { Summarize } from "../session/compaction-summary.ts";

const INSTRUCTION =
  "Summarise the conversation above for your own later use: the user's goals and constraints, " +
  "decisions made, files and resources touched (with paths), results of tool calls that still " +
  "matter, open questions and the next steps. Be factual and concise; do not call tools.";

/** A completed summary response, for its charge: what was sent, what came back, its usage. */
export interface SummaryCall {
  request: readonly Message[];
  text: string;
  usage?: Usage;
}

/**
 * A `Summarize` for compaction that asks `model` (no tools) for a summary of the messages.
 * Contract: rejects with the model's `ModelError` (a context overflow makes compaction shrink
 * its input and try again); resolves with the summary text and how its response ended.
 * `onResponse` is told of every response that completed (each is charged: every request counts).
 */
export function modelSummarizer(
  model: Model,
  ids: IdGenerator,
  onResponse?: (call: SummaryCall) => void,
): Summarize {
  return async (messages: Message[], signal: AbortSignal) => {
    const assembler = createAssembler({ ids });
    const request = [...messages, userText(INSTRUCTION)];
    const stream = model.stream({
      messages: request,
      tools: [],
      signal,
      attemptId: ids("compaction"),
    });
    for await (const event of stream) assembler.push(event);
    const message = assembler.finish();
    onResponse?.({ request, text: message.text, usage: message.usage });
    // The finish reason goes with the text: a summary cut by length is rejected as a candidate.
    return { text: message.text, finishReason: message.finishReason };
  };
}
