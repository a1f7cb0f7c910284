import type { AssistantPart, Message } from "../contracts/messages.ts";
import { READ_RESULT_TOOL } from "./clear-results.ts";
import type { TokenEstimator } from "./compaction-cuts.ts";
import { clipMiddle, editableText } from "./compaction-fallback.ts";

/**
 * What makes a request fit what the model takes (docs/long-sessions.md, "Every request fits";
 * invariant 21 of docs/architecture.md): a plan of in-place edits of the model's view (each a
 * `context_edit`, so the log keeps the whole text) that takes off at least the tokens a
 * request is over. Pure: nothing here touches the log.
 *
 * Results share the room: the largest tool results are offloaded first — replaced by a preview
 * (their head) and a note saying where the rest is and which results of their step were cut —
 * until the request fits. Only when every result is offloaded and it still does not fit are
 * the largest other messages clipped to their head and tail.
 */

/** How an offloaded result starts in the model's view (an offloaded result is not offloaded twice). */
export const OFFLOADED_MARK = "[result offloaded";

/** What the view of a request is, and how much it must lose. */
export interface FitInput {
  readonly messages: readonly Message[];
  /** Per message, the id of the log entry an edit of it targets. */
  readonly sources: readonly string[];
  /** Tokens the request is over what the model takes (> 0 to plan anything). */
  readonly over: number;
  readonly estimate: TokenEstimator;
  /** Characters of an offloaded result's head kept as its preview. */
  readonly previewChars: number;
  /** Whether the model can read an offloaded result back (`read_result` is offered). */
  readonly readBack: boolean;
  /** Whether `entryId` is a recorded tool result (`call_result`): only those are offloaded. */
  readonly isResult: (entryId: string) => boolean;
}

/** One edit of the plan: `targetId`'s message becomes `replacement`, saving `saves` tokens. */
export interface FitEdit {
  index: number;
  targetId: string;
  replacement: string;
  saves: number;
  kind: "offload" | "clip";
}

/** The plan: its edits, in view order, and the tokens still over after them (≤ 0: it fits). */
export interface FitPlan {
  edits: FitEdit[];
  remaining: number;
}

/**
 * The edits that bring a request `over` tokens down to fit (see this module's comment): tool
 * results largest first (ties: the newest first), then other text messages largest first,
 * each clipped no further than it must be. `remaining > 0` when even that is not enough (the
 * caller compacts, or the instructions alone are over). This is a pure function.
 */
export function planFit(input: FitInput): FitPlan {
  if (input.over <= 0) return { edits: [], remaining: input.over };
  // Results share the room: when offloading every result with its preview is not enough, the
  // previews shrink (a quarter, then none) before any other message is clipped.
  let pass = offloadPass(input, input.previewChars);
  for (const chars of [Math.floor(input.previewChars / 4), 0]) {
    if (pass.remaining <= 0) break;
    pass = offloadPass(input, chars);
  }
  const { edits, offloaded } = pass;
  let remaining = pass.remaining;
  if (remaining > 0) remaining = clipLargest(input, offloaded, remaining, edits);
  edits.sort((a, b) => a.index - b.index);
  return { edits, remaining };
}

/** Offloads results, largest first, each to `previewChars` of its head, until it fits. */
function offloadPass(input: FitInput, previewChars: number) {
  const options = { previewChars, readBack: input.readBack };
  let remaining = input.over;
  const offloaded = new Set<number>();
  for (const c of offloadCandidates(input, options)) {
    if (remaining <= 0) break;
    offloaded.add(c.index);
    remaining -= c.saves;
  }
  const edits: FitEdit[] = [];
  for (const i of offloaded) {
    const m = input.messages[i] as Extract<Message, { role: "tool" }>;
    const step = stepCount(input.messages, i, offloaded);
    const replacement = offloadedText(m.content[0].content, input.sources[i], step, options);
    const saves = input.estimate(m) - input.estimate(withText(m, replacement));
    edits.push({ index: i, targetId: input.sources[i], replacement, saves, kind: "offload" });
  }
  // The notes count their step's cuts, a little longer than the estimate the choice used.
  remaining = input.over - edits.reduce((t, e) => t + e.saves, 0);
  return { edits, offloaded, remaining };
}

/** Tool results that can be offloaded, with what each saves: largest first, newest on ties. */
function offloadCandidates(
  input: FitInput,
  options: { previewChars: number; readBack: boolean },
): { index: number; saves: number }[] {
  const out: { index: number; saves: number; cost: number }[] = [];
  input.messages.forEach((m, index) => {
    if (m.role !== "tool" || !input.isResult(input.sources[index])) return;
    const content = m.content[0].content;
    if (content.startsWith(OFFLOADED_MARK) || content.startsWith("[result cleared")) return;
    const cost = input.estimate(m);
    const note = offloadedText(content, input.sources[index], { cut: 1, of: 1 }, options);
    const saves = cost - input.estimate(withText(m, note));
    if (saves > 0) out.push({ index, saves, cost });
  });
  return out.sort((a, b) => b.cost - a.cost || b.index - a.index);
}

/** How many results the step (the run of tool messages) of message `i` has, and how many are cut. */
function stepCount(messages: readonly Message[], i: number, offloaded: ReadonlySet<number>) {
  let from = i;
  while (from > 0 && messages[from - 1].role === "tool") from--;
  let of = 0;
  let cut = 0;
  for (let j = from; j < messages.length && messages[j].role === "tool"; j++) {
    of++;
    if (offloaded.has(j)) cut++;
  }
  return { cut, of };
}

/**
 * What the model sees of an offloaded result: a note with its size, where the whole is and how
 * many results of its step were offloaded, then its head. This is a pure function.
 */
export function offloadedText(
  content: string,
  entryId: string,
  step: { cut: number; of: number },
  options: { previewChars: number; readBack: boolean },
): string {
  const bytes = Buffer.byteLength(content);
  const head = content.slice(0, Math.max(0, options.previewChars));
  const where = options.readBack
    ? `${READ_RESULT_TOOL} {"id":"${entryId}"} reads the whole`
    : `the whole is in the session log (${entryId}), not readable here; call again more narrowly for more`;
  const shown = head.length > 0 ? `, first ${head.length} chars below` : "";
  return `${OFFLOADED_MARK} to fit the context (${step.cut} of ${step.of} results of this step): ${bytes} bytes${shown}; ${where}]${head.length > 0 ? `\n${head}` : ""}`;
}

/** Clips the largest text messages (not offloaded results) until `remaining` ≤ 0. */
function clipLargest(
  input: FitInput,
  offloaded: ReadonlySet<number>,
  remaining: number,
  edits: FitEdit[],
): number {
  const order = input.messages
    .map((m, index) => ({ index, cost: input.estimate(m) }))
    .filter(({ index }) => !offloaded.has(index) && input.sources[index] !== undefined)
    .sort((a, b) => b.cost - a.cost || b.index - a.index);
  for (const { index, cost } of order) {
    if (remaining <= 0) break;
    const m = input.messages[index];
    const text = editableText(m);
    if (text === undefined) continue;
    // Keep what the message may keep: its cost less what is still over, at least a preview.
    const keepTokens = Math.max(Math.ceil(input.previewChars / 4), cost - remaining);
    const replacement = clipMiddle(text, Math.max(240, keepTokens * 4 - 240));
    if (replacement === text) continue;
    const saves = cost - input.estimate(withText(m, replacement));
    if (saves <= 0) continue;
    edits.push({ index, targetId: input.sources[index], replacement, saves, kind: "clip" });
    remaining -= saves;
  }
  return remaining;
}

/** `m` with its text replaced as a `context_edit` replaces it in the projection. */
function withText(m: Message, text: string): Message {
  if (m.role === "system") return { role: "system", content: text };
  if (m.role === "tool") return { role: "tool", content: [{ ...m.content[0], content: text }] };
  if (m.role === "user") return { role: "user", content: [{ type: "text", text }] };
  const kept: AssistantPart[] = m.content.filter((p) => p.type !== "text");
  return { role: "assistant", content: [{ type: "text", text }, ...kept] };
}
