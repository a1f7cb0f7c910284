import type { Message } from "../contracts/messages.ts";
import type { TokenEstimator } from "./compaction-cuts.ts";
import { NO_RESULT_TEXT } from "./projection.ts";

/**
 * What a compaction falls back on when the model cannot help (docs/long-sessions.md, "One oversized input does not break a session"): a summary
 * built without a model, and the clipping of one oversized message. Pure: nothing here touches
 * the log.
 */

/**
 * A summary of `messages` written without a model, for when the summary request fails, returns
 * nothing usable or overflows even at its smallest. It keeps the work, verbatim, within
 * `maxChars`: the last user request (up to a third of the room), the calls left without a
 * result, then the most recent messages whole, newest first until the room is used (the one
 * that does not fit is clipped to its head and tail); the older ones are counted, not shown.
 * It says that it is mechanical, so the model knows to check details in the workspace.
 * This is a pure function.
 */
export function mechanicalSummary(messages: readonly Message[], maxChars: number): string {
  const lastUser = [...messages].reverse().find((m) => m.role === "user");
  const request = lastUser
    ? clipMiddle(editableText(lastUser) ?? "", Math.floor(maxChars / 3))
    : "(none)";
  const unfinished = messages.flatMap((m) =>
    m.role === "tool" && m.content[0].content === NO_RESULT_TEXT
      ? [`- ${m.content[0].name} (${m.content[0].callId}): no result recorded`]
      : [],
  );
  const head = [
    "Mechanical summary (the summary request failed, so this keeps the last request, the unfinished calls and the most recent messages verbatim; check older details in the workspace or with the user):",
    "Last user request:",
    request,
    "Unfinished calls:",
    clipMiddle(unfinished.length > 0 ? unfinished.join("\n") : "none", Math.floor(maxChars / 6)),
    "Most recent messages:",
  ].join("\n");
  let room = maxChars - head.length;
  const recent: string[] = [];
  let from = messages.length;
  while (from > 0 && room > 0) {
    const line = lineOf(messages[from - 1]);
    if (line.length + 1 > room) {
      if (recent.length === 0) {
        recent.unshift(clipMiddle(line, Math.max(0, room - 1)));
        from--;
      }
      break;
    }
    recent.unshift(line);
    room -= line.length + 1;
    from--;
  }
  if (from > 0) recent.unshift(`- (${from} older messages left out)`);
  return [head, ...recent].join("\n");
}

/** One message as a line of the mechanical summary, whole: who, its text, its calls. */
function lineOf(m: Message): string {
  if (m.role === "system") return `- note: ${m.content}`;
  if (m.role === "tool") {
    const r = m.content[0];
    return `- result of ${r.name}${r.isError ? " (failed)" : ""}: ${r.content}`;
  }
  const text = m.content.map((p) => (p.type === "text" ? p.text : "")).join("");
  const calls = m.content.flatMap((p) =>
    p.type === "tool-call" ? [`${p.name}(${p.arguments})`] : [],
  );
  const images = m.content.filter((p) => p.type === "image").length;
  return `- ${m.role}: ${text}${calls.length ? ` [called ${calls.join(", ")}]` : ""}${images ? ` [${images} image(s)]` : ""}`;
}

/**
 * `text` cut to about `maxChars`: its head and its tail around a note of how much was left out,
 * as the output budget cuts a tool result, so a message too large for the model's window can
 * still be sent. This is a pure function.
 */
export function clipMiddle(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const half = Math.max(0, Math.floor((maxChars - 120) / 2));
  const omitted = text.length - 2 * half;
  return `${text.slice(0, half)}\n[… ${omitted} characters left out here to fit the model's context window …]\n${text.slice(text.length - half)}`;
}

/** The text of a message that an edit may replace, or undefined (none, or images only). */
export function editableText(m: Message): string | undefined {
  if (m.role === "system") return m.content;
  if (m.role === "tool") return m.content[0].content;
  if (m.content.some((p) => p.type === "image")) return undefined;
  return m.content.map((p) => (p.type === "text" ? p.text : "")).join("");
}

/** Indexes of the messages of `messages` that cost more than `limit` tokens. Pure. */
export function oversized(
  messages: readonly Message[],
  limit: number,
  estimate: TokenEstimator,
): number[] {
  const out: number[] = [];
  for (let i = 0; i < messages.length; i++) if (estimate(messages[i]) > limit) out.push(i);
  return out;
}
