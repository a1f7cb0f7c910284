import { type Message, toolCallsOf } from "../contracts/messages.ts";
import { IMAGE_TOKENS } from "../contracts/tokens.ts";
import type { EntryOf, LogEntry } from "./entries.ts";
import { Projection } from "./projection.ts";

/**
 * Where a compaction may cut (docs/long-sessions.md, invariant 10 of docs/architecture.md) and which cut it takes. Pure.
 *
 * A compaction keeps the path from its `firstKeptId` on and replaces everything before it (in
 * the current view) with a summary. A **batch** is a projected assistant message with tool
 * calls (one whose attempt did not fail) and the results that answer its calls (for each call,
 * the first `call_result` with its id after the message). A batch is
 * - **settled** when every call has its result, or when its turn has ended (`turn_end`) and
 *   none of its unanswered calls has a `call_started` record — such a call never ran and no
 *   result can come any more; the projection keeps showing its "no result recorded" patch;
 * - **open** otherwise: a call is running (started, no result: live, or waiting for an
 *   idempotent re-run after recovery, whose result is written after the turn ended) or the turn
 *   may still write results (cancelled / not-executed ones).
 *
 * A cut at path position `p` is legal when
 * 1. the entry opens a message of the view: a user message, a `turn_aborted` note, a `note` for
 *    the model, or an assistant message of an attempt that did not fail — never a
 *    `call_result`, `call_started`, attempt or turn marker, edit, setting or compaction; and
 * 2. no batch straddles it: for every batch at position `a`, `p ≤ a` or `p > ` its last
 *    answering result — so a kept result's call is always kept, and a summarised call's result
 *    is always summarised; an open batch straddles every later position; and
 * 3. at an assistant message, its own batch is settled (a cut never starts inside a batch that
 *    is still running; the step finishes first).
 * The rule is structural: an edit that hides a message does not make a cut legal or illegal.
 */

/**
 * Tokens one message costs the model.
 * Contract: pure and deterministic; returns a finite number ≥ 0; additive over messages
 * (the cost of a list is the sum of its messages' costs).
 */
export type TokenEstimator = (message: Message) => number;

/**
 * Contract: pure; returns ids of entries of `path` where a compaction may start keeping
 * history. A replacement must be at most as permissive as {@link legalCutPoints} (a stricter
 * rule, e.g. only at user messages, is fine) or invariant 10 of docs/architecture.md breaks.
 */
export type CutRule = (path: readonly LogEntry[]) => readonly string[];

/** What the default estimator counts for an image: {@link IMAGE_TOKENS} in characters. */
export const IMAGE_CHARS = IMAGE_TOKENS * 4;

/**
 * The default estimator: ⌈characters / 4⌉ of what the model sees (text, reasoning, call names
 * and arguments, results; {@link IMAGE_CHARS} an image).
 */
export const estimateTokens: TokenEstimator = (m) => {
  if (m.role === "system") return Math.ceil(m.content.length / 4);
  let chars = 0;
  for (const p of m.content) {
    if (p.type === "text" || p.type === "reasoning") chars += p.text.length;
    else if (p.type === "tool-call") chars += p.name.length + p.arguments.length;
    else if (p.type === "tool-result") chars += p.content.length;
    else chars += IMAGE_CHARS;
  }
  return Math.ceil(chars / 4);
};

interface Batch {
  at: number;
  /** Position of the last answering result so far (`at` while none). */
  end: number;
  waiting: Set<string>;
  started: Set<string>;
  turnEnded: boolean;
}

/**
 * The ids of `path` (root → leaf) where a compaction may start keeping history, in path order
 * (rules in this module's comment). O(path). This is a pure function.
 */
export function legalCutPoints(path: readonly LogEntry[]): string[] {
  const failed = new Set<string>();
  for (const e of path) {
    if (e.type === "attempt_end" && e.status !== "completed") failed.add(e.attemptId);
  }
  const batches = new Map<number, Batch>();
  const waitingFor = new Map<string, Batch[]>();
  const byTurn = new Map<string, Batch[]>();
  path.forEach((e, i) => {
    // A message without calls is a batch too: settled at once, spanning only itself.
    if (e.type === "assistant_message" && !failed.has(e.attemptId)) {
      const ids = toolCallsOf(e.content).map((c) => c.id);
      const b: Batch = {
        at: i,
        end: i,
        waiting: new Set(ids),
        started: new Set(),
        turnEnded: false,
      };
      batches.set(i, b);
      for (const id of b.waiting) listOf(waitingFor, id).push(b);
      listOf(byTurn, e.turnId).push(b);
    } else if (e.type === "call_started") {
      waitingFor.get(e.callId)?.[0]?.started.add(e.callId);
    } else if (e.type === "call_result") {
      const b = waitingFor.get(e.callId)?.shift();
      if (b) {
        b.waiting.delete(e.callId);
        b.end = i;
      }
    } else if (e.type === "turn_end") {
      for (const b of byTurn.get(e.turnId) ?? []) b.turnEnded = true;
    }
  });
  const spanEnd = (b: Batch) => (settled(b) ? b.end : Number.POSITIVE_INFINITY);
  const cuts: string[] = [];
  let covered = -1; // every position ≤ covered lies strictly inside some batch
  path.forEach((e, i) => {
    const own = batches.get(i);
    if (i > covered && opensMessage(e, failed) && (!own || settled(own))) cuts.push(e.id);
    if (own) covered = Math.max(covered, spanEnd(own));
  });
  return cuts;
}

/** A chosen cut: the entry to keep from and the first kept message of the current view. */
export interface CutPlan {
  firstKeptId: string;
  /** Index in the view's messages of the first kept message; everything before is summarised. */
  keptFrom: number;
}

export interface ChooseCutOptions {
  /** Keep at least this many tokens of recent context (the newest messages). */
  keepRecentTokens: number;
  /** Default {@link estimateTokens}. */
  estimate?: TokenEstimator;
  /** Default {@link legalCutPoints}. */
  cutPoints?: CutRule;
}

/**
 * The latest legal cut that keeps at least `keepRecentTokens` of the current view and leaves
 * something of the path (not only an earlier summary) to summarise; cuts lie after the current
 * baseline's first kept entry. `undefined`: no such cut (too little history). O(path).
 * This is a pure function.
 */
export function chooseCut(
  path: readonly LogEntry[],
  options: ChooseCutOptions,
): string | undefined {
  const view = Projection.fromPath(path);
  const legal = (options.cutPoints ?? legalCutPoints)(path);
  return planCut(path, view, legal, options)?.firstKeptId;
}

/** The view of a path: the projection's messages, their source entry ids and its baseline. */
export interface PathView {
  readonly messages: readonly Message[];
  readonly sources: readonly string[];
  readonly baseline: EntryOf<"compaction"> | null;
}

/**
 * {@link chooseCut} over a view already projected (the log's live one). Pure.
 * Throws a `TypeError` when `keepRecentTokens` is not a finite number ≥ 0.
 */
export function planCut(
  path: readonly LogEntry[],
  view: PathView,
  legal: readonly string[],
  options: ChooseCutOptions,
): CutPlan | undefined {
  const k = options.keepRecentTokens;
  if (!(Number.isFinite(k) && k >= 0)) {
    throw new TypeError(`keepRecentTokens must be a finite number ≥ 0, got ${String(k)}`);
  }
  const estimate = options.estimate ?? estimateTokens;
  const pos = new Map<string, number>();
  for (let i = 0; i < path.length; i++) pos.set(path[i].id, i);
  const group = groupPositions(view, pos);
  const first = view.baseline ? 1 : 0; // the first message that comes from the path
  const candidates = legal
    .map((id) => pos.get(id))
    .filter((p): p is number => p !== undefined)
    .sort((a, b) => b - a);
  // Latest cut first: messages[j..] are what the cut keeps, `kept` their tokens. A cut at or
  // before the view's start keeps every message of the path, so it ends the search below.
  let j = view.messages.length;
  let kept = 0;
  for (const p of candidates) {
    // group[-1] is undefined (never ≥ p): the walk stops at the first message.
    while (group[j - 1] >= p) {
      j--;
      kept += estimate(view.messages[j]);
    }
    if (j <= first) return undefined; // nothing of the path before this cut or any earlier one
    if (kept >= k) return { firstKeptId: path[p].id, keptFrom: j };
  }
  return undefined;
}

/**
 * Per message, the path position of the entry that opens its group (a tool message belongs to
 * its assistant message); the leading summary of a baseline is at −1. Non-decreasing.
 */
function groupPositions(view: PathView, pos: ReadonlyMap<string, number>): number[] {
  const out: number[] = [];
  let last = -1;
  view.messages.forEach((m, i) => {
    const summary = i === 0 && view.baseline !== null;
    if (!summary && m.role !== "tool") last = Math.max(last, pos.get(view.sources[i]) ?? last);
    out.push(last);
  });
  return out;
}

function settled(b: Batch): boolean {
  if (b.waiting.size === 0) return true;
  return b.turnEnded && ![...b.waiting].some((id) => b.started.has(id));
}

function opensMessage(e: LogEntry, failed: ReadonlySet<string>): boolean {
  switch (e.type) {
    case "user_message":
    case "turn_aborted":
      return true;
    case "note":
      return e.audience === "model";
    case "assistant_message":
      return !failed.has(e.attemptId);
    default:
      return false;
  }
}

function listOf<K, V>(map: Map<K, V[]>, key: K): V[] {
  const list = map.get(key);
  if (list) return list;
  const fresh: V[] = [];
  map.set(key, fresh);
  return fresh;
}
