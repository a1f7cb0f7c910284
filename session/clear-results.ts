import type { Message } from "../contracts/messages.ts";
import type { LogEntry } from "./entries.ts";

/** The name of the built-in tool that restores a cleared tool result. */
export const READ_RESULT_TOOL = "read_result";

/** What the model sees in place of a result `session.clearToolResults()` cleared. */
export function clearedResultText(entryId: string, bytes: number): string {
  return `[result cleared from the context to save space: ${bytes} bytes; call ${READ_RESULT_TOOL} with {"id":"${entryId}"} to read it again]`;
}

/** One tool result to clear: its entry, the note that replaces it, and the bytes it held. */
export interface ClearedResult {
  entryId: string;
  note: string;
  bytes: number;
}

/**
 * Which tool results `session.clearToolResults()` clears from the model's view (`messages`, with
 * each message's source entry id in `sources`; `get` reads an entry): the results of calls made
 * at least `olderThanSteps` model responses ago, except the newest `keepLast`, results already
 * cleared, patched slots (no recorded result) and results shorter than the note that would
 * replace them. In view order. This is a pure function.
 */
export function resultsToClear(
  messages: readonly Message[],
  sources: readonly string[],
  get: (entryId: string) => LogEntry | undefined,
  options: { olderThanSteps: number; keepLast: number },
): ClearedResult[] {
  let steps = 0;
  const stepOf: number[] = [];
  for (const m of messages) {
    if (m.role === "assistant") steps++;
    stepOf.push(steps);
  }
  const candidates: { index: number; entryId: string }[] = [];
  for (let i = 0; i < messages.length; i++) {
    if (messages[i].role !== "tool" || steps - stepOf[i] < options.olderThanSteps) continue;
    const entry = get(sources[i]);
    if (entry?.type !== "call_result") continue; // a patched slot, not a recorded result
    candidates.push({ index: i, entryId: entry.id });
  }
  const cleared: ClearedResult[] = [];
  const upTo = Math.max(0, candidates.length - options.keepLast);
  for (const { index, entryId } of candidates.slice(0, upTo)) {
    const m = messages[index];
    if (m.role !== "tool") continue;
    const content = m.content[0].content;
    const bytes = Buffer.byteLength(content);
    const note = clearedResultText(entryId, bytes);
    if (content.startsWith("[result cleared") || note.length >= content.length) continue;
    cleared.push({ entryId, note, bytes });
  }
  return cleared;
}
