import type { Message } from "../contracts/messages.ts";
import type { TokenEstimator } from "./compaction-cuts.ts";

/**
 * What a compaction falls back on when the model cannot help (docs/long-sessions.md, "One oversized input does not break a session"): a summary
 * built without a model, and the clipping of one oversized message. Pure: nothing here touches
 * the log.
 */

/** The head and tail each line of a mechanical summary keeps (characters). */
const LINE_CHARS = 160;

/**
 * A summary of `messages` written without a model, for when the summary request fails, returns
 * nothing usable or overflows even at its smallest: one line per message, in order, each cut to
 * {@link LINE_CHARS} (who spoke, the text's head, the tools called, each result's head), within
 * `maxChars` (the newest lines kept when it must choose). It says that it is mechanical, so the
 * model knows to check details in the workspace. This is a pure function.
 */
export function mechanicalSummary(messages: readonly Message[], maxChars: number): string {
  const lines: string[] = [];
  for (const m of messages) {
    if (m.role === "system") lines.push(`- note: ${clip(m.content)}`);
    else if (m.role === "tool") {
      const r = m.content[0];
      lines.push(`- result of ${r.name}${r.isError ? " (failed)" : ""}: ${clip(r.content)}`);
    } else {
      const text = m.content.map((p) => (p.type === "text" ? p.text : "")).join("");
      const calls = m.content.flatMap((p) => (p.type === "tool-call" ? [p.name] : []));
      const images = m.content.filter((p) => p.type === "image").length;
      lines.push(
        `- ${m.role}: ${clip(text)}${calls.length ? ` [called ${calls.join(", ")}]` : ""}${images ? ` [${images} image(s)]` : ""}`,
      );
    }
  }
  const head =
    "Mechanical summary (the summary request failed, so this lists the earlier messages, each cut short; check details in the workspace or with the user):";
  let kept = lines;
  let size = head.length + kept.reduce((t, l) => t + l.length + 1, 0);
  let from = 0;
  while (size > maxChars && from < kept.length) size -= kept[from++].length + 1;
  if (from > 0) kept = [`- (${from} older messages left out)`, ...kept.slice(from)];
  return [head, ...kept].join("\n");
}

function clip(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length <= LINE_CHARS ? flat : `${flat.slice(0, LINE_CHARS - 1)}…`;
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
