import type { IdGenerator } from "../contracts/ids.ts";
import { type Message, userText } from "../contracts/messages.ts";
import type { Model } from "../contracts/model.ts";
import { createAssembler } from "../providers/stream-assembler.ts";
import type { Summarize } from "../session/compaction-summary.ts";

const INSTRUCTION =
  "Summarise the conversation above for your own later use: the user's goals and constraints, " +
  "decisions made, files and resources touched (with paths), results of tool calls that still " +
  "matter, open questions and the next steps. Be factual and concise; do not call tools.";

/**
 * A `Summarize` for compaction that asks `model` (no tools) for a summary of the messages.
 * Contract: rejects with the model's `ModelError` (a context overflow makes compaction shrink
 * its input and try again); resolves with the summary text and how its response ended.
 */
export function modelSummarizer(model: Model, ids: IdGenerator): Summarize {
  return async (messages: Message[], signal: AbortSignal) => {
    const assembler = createAssembler({ ids });
    const stream = model.stream({
      messages: [...messages, userText(INSTRUCTION)],
      tools: [],
      signal,
      attemptId: ids("compaction"),
    });
    for await (const event of stream) assembler.push(event);
    const message = assembler.finish();
    // The finish reason goes with the text: a summary cut by length is rejected as a candidate.
    return { text: message.text, finishReason: message.finishReason };
  };
}
