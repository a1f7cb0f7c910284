/**
 * Random session logs for property tests (not a test file): an interpreter of random "runtime
 * operations" over a real SessionLog, and an independent, deliberately naive reference
 * projection (docs/stores.md) to compare the incremental one against.
 */
import fc from "fast-check";
import type { ChatMessage } from "../contracts/chat.ts";
import { textOf, toolCallsOf } from "../contracts/messages.ts";
import { cancelledBeforeStart } from "../machines/tool-call.machine.ts";
import { fork, rollback } from "../session/branches.ts";
import type { EntryOf, LogEntry } from "../session/entries.ts";
import type { SessionLog } from "../session/log.ts";
import {
  EDITED_OUT_RESULT_TEXT,
  NO_RESULT_TEXT,
  summaryText,
  toolResultText,
  turnAbortedText,
} from "../session/projection.ts";
import { call, parts } from "./session-fixtures.ts";

export type ResultPlan = "ok" | "missing" | "dup" | "notexec" | "nostart" | "late";
export type Op =
  | { k: "user" }
  | { k: "turn" }
  | { k: "step"; calls: { idem: boolean; toolIdem: boolean; res: ResultPlan }[] }
  | { k: "failAttempt"; committed: boolean; status: "failed" | "interrupted" }
  | { k: "openAttempt"; committed: boolean }
  | { k: "endTurn"; aborted: boolean }
  | { k: "edit"; pick: number; replace: boolean }
  | { k: "compact"; pick: number }
  | { k: "move"; pick: number; fork: boolean }
  | { k: "settings"; v: number }
  | { k: "note" };

const resultPlan = fc.constantFrom<ResultPlan>(
  "ok",
  "ok",
  "ok",
  "missing",
  "dup",
  "notexec",
  "nostart",
  "late",
);

export const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ k: "user" as const }) },
  { weight: 2, arbitrary: fc.constant({ k: "turn" as const }) },
  {
    weight: 5,
    arbitrary: fc.record({
      k: fc.constant("step" as const),
      // `idem` is the flag the start record logs, `toolIdem` the tool's trait at recovery: drawn
      // apart, because the tool may have changed between the crash and the recovery.
      calls: fc.array(fc.record({ idem: fc.boolean(), toolIdem: fc.boolean(), res: resultPlan }), {
        maxLength: 3,
      }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant("failAttempt" as const),
      committed: fc.boolean(),
      status: fc.constantFrom("failed" as const, "interrupted" as const),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant("openAttempt" as const), committed: fc.boolean() }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ k: fc.constant("endTurn" as const), aborted: fc.boolean() }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant("edit" as const),
      pick: fc.nat(),
      replace: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("compact" as const), pick: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant("move" as const), pick: fc.nat(), fork: fc.boolean() }),
  },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("settings" as const), v: fc.nat(9) }) },
  { weight: 1, arbitrary: fc.constant({ k: "note" as const }) },
);

/**
 * Tool names: IDEM_TOOL is idempotent when recovery looks it up, PLAIN_TOOL is not. A call's
 * start record logs its own `idempotent` flag, drawn independently of its tool's name.
 */
export const IDEM_TOOL = "idem_tool";
export const PLAIN_TOOL = "plain_tool";
/**
 * Invariant 9 of docs/architecture.md: no output of an attempt that ended failed/interrupted on `path` (its message
 * text `ANSWER <attemptId>.` or partial text `PARTIAL …`) is in `messages`. Returns the
 * violation or null.
 */
export function failedOutputViolation(
  messages: readonly ChatMessage[],
  path: readonly LogEntry[],
): string | null {
  const text = JSON.stringify(messages);
  if (text.includes("PARTIAL")) return "partial output of a failed attempt is projected";
  for (const e of path) {
    if (
      e.type === "attempt_end" &&
      e.status !== "completed" &&
      text.includes(`ANSWER ${e.attemptId}.`)
    ) {
      return `the message of ${e.status} attempt ${e.attemptId} is projected`;
    }
  }
  return null;
}

/**
 * Plays `ops` on `log` like a runtime would (markers make every text unique). `after` runs
 * after each op (e.g. to compare projections).
 */
export function playOps(log: SessionLog, ops: readonly Op[], after?: () => void): void {
  let n = 0;
  let turn: string | null = null;
  let late: EntryOf<"call_result">[] = [];
  const id = (p: string) => `${p}${++n}`;
  const ensureTurn = () => {
    if (turn) return turn;
    turn = id("t");
    log.append({ type: "turn_start", turnId: turn });
    return turn;
  };
  for (const op of ops) {
    for (const r of late) log.append(r);
    late = [];
    switch (op.k) {
      case "user":
        log.append({ type: "user_message", text: `USER ${id("u")}` });
        break;
      case "turn":
        ensureTurn();
        break;
      case "step": {
        const turnId = ensureTurn();
        const attemptId = id("a");
        const calls = op.calls.map((c) => ({
          ...c,
          call: call(id("c"), c.toolIdem ? IDEM_TOOL : PLAIN_TOOL),
        }));
        log.append({ type: "attempt_start", turnId, attemptId, step: n });
        log.append({
          type: "assistant_message",
          turnId,
          attemptId,
          content: parts(
            `ANSWER ${attemptId}.`,
            calls.map((c) => c.call),
          ),
          finishReason: calls.length ? "tool_calls" : "stop",
        });
        log.append({ type: "attempt_end", attemptId, status: "completed" });
        for (const c of calls) {
          const callId = c.call.id;
          const name = c.call.name;
          const res = {
            type: "call_result" as const,
            callId,
            name,
            outcome: "completed" as const,
            result: { ok: true as const, content: `RESULT ${callId}` },
          };
          if (c.res === "nostart") continue;
          if (c.res === "notexec") {
            log.append({
              ...res,
              outcome: "not_executed",
              result: cancelledBeforeStart,
            });
            continue;
          }
          log.append({
            type: "call_started",
            callId,
            name,
            args: { n },
            idempotencyKey: `key-${callId}`,
            idempotent: c.idem,
          });
          if (c.res === "ok") log.append(res);
          if (c.res === "dup") {
            log.append(res);
            log.append({ ...res, result: { ok: true, content: `DUPLICATE ${callId}` } });
          }
          if (c.res === "late") late.push({ ...res } as EntryOf<"call_result">);
        }
        break;
      }
      case "failAttempt":
      case "openAttempt": {
        const turnId = ensureTurn();
        const attemptId = id("a");
        log.append({ type: "attempt_start", turnId, attemptId, step: n });
        if (op.committed) {
          const text = `ANSWER ${attemptId}.`;
          log.append({
            type: "assistant_message",
            turnId,
            attemptId,
            content: parts(text),
            finishReason: "stop",
          });
        }
        if (op.k === "failAttempt") {
          log.append({
            type: "attempt_end",
            attemptId,
            status: op.status,
            partialText: `PARTIAL ${attemptId}`,
          });
        }
        break;
      }
      case "endTurn":
        if (!turn) break;
        log.append({
          type: "turn_end",
          turnId: turn,
          status: op.aborted ? "cancelled" : "completed",
        });
        if (op.aborted)
          log.append({ type: "turn_aborted", turnId: turn, where: `cut at ${id("w")}` });
        turn = null;
        break;
      case "edit": {
        const targets = log.path().filter((e) => e.type !== "context_edit");
        if (targets.length === 0) break;
        const target = targets[op.pick % targets.length];
        log.append({
          type: "context_edit",
          targetId: target.id,
          replacement: op.replace ? `EDITED ${id("x")}` : null,
        });
        break;
      }
      case "compact": {
        const path = log.path();
        if (path.length === 0) break;
        log.append({
          type: "compaction",
          summary: `SUMMARY ${id("s")}`,
          firstKeptId: path[op.pick % path.length].id,
        });
        break;
      }
      case "move": {
        if (turn) break;
        const targets = log.entries().filter((e) => e.type !== "leaf");
        if (targets.length === 0) break;
        const target = targets[op.pick % targets.length].id;
        (op.fork ? fork : rollback)(log, target);
        break;
      }
      case "settings":
        log.append({ type: "settings", settings: { v: op.v } });
        break;
      case "note":
        log.append({ type: "note", text: `NOTE ${id("n")}`, audience: n % 2 ? "model" : "log" });
        break;
    }
    after?.();
  }
}

/**
 * The projection computed the slow, obvious way from a path: whole-path scans, no slots, no
 * incremental state. Results pair with the first result for the call id after the message.
 */
export function referenceProject(path: readonly LogEntry[]): ChatMessage[] {
  const failed = new Set<string>();
  const edits = new Map<string, string | null>();
  for (const e of path) {
    if (e.type === "attempt_end" && e.status !== "completed") failed.add(e.attemptId);
    if (e.type === "context_edit") edits.set(e.targetId, e.replacement);
  }
  const out: ChatMessage[] = [];
  let body = path;
  const c = path.findLastIndex((e) => e.type === "compaction");
  if (c >= 0) {
    const compaction = path[c] as EntryOf<"compaction">;
    const k = path.findIndex((e) => e.id === compaction.firstKeptId);
    body = path.slice(k >= 0 && k < c ? k : c + 1);
    out.push({ role: "system", content: summaryText(compaction) });
  }
  const text = (e: LogEntry, original: string) => (edits.has(e.id) ? edits.get(e.id) : original);
  body.forEach((e, i) => {
    if (
      e.type === "user_message" ||
      e.type === "turn_aborted" ||
      (e.type === "note" && e.audience === "model")
    ) {
      const original =
        e.type === "user_message"
          ? e.text
          : e.type === "note"
            ? `[Note: ${e.text}]`
            : turnAbortedText(e);
      const content = text(e, original);
      if (content !== null && content !== undefined) out.push({ role: "user", content });
    }
    if (e.type !== "assistant_message" || failed.has(e.attemptId) || edits.get(e.id) === null)
      return;
    const content = text(e, textOf(e.content))!;
    const toolCalls = toolCallsOf(e.content);
    if (toolCalls.length === 0) {
      out.push({ role: "assistant", content });
      return;
    }
    out.push({
      role: "assistant",
      content: content === "" ? null : content,
      tool_calls: toolCalls.map((c) => ({
        id: c.id,
        type: "function",
        function: { name: c.name, arguments: c.arguments },
      })),
    });
    for (const tc of toolCalls) {
      const r = body.slice(i + 1).find((x) => x.type === "call_result" && x.callId === tc.id);
      let content = NO_RESULT_TEXT;
      if (r && r.type === "call_result") {
        const edit = edits.get(r.id);
        content = edit === null ? EDITED_OUT_RESULT_TEXT : (edit ?? toolResultText(r.result));
      }
      out.push({ role: "tool", tool_call_id: tc.id, content });
    }
  });
  return out;
}

/**
 * Invariant 1 of docs/architecture.md: every assistant tool call is followed, in order, by exactly one tool message
 * with its id, and no tool message stands anywhere else. Returns the first violation or null.
 */
export function wellFormedViolation(messages: readonly ChatMessage[]): string | null {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (m.role === "tool")
      return `message ${i}: tool result ${m.tool_call_id} does not follow its call`;
    if (m.role !== "assistant" || !m.tool_calls) continue;
    for (const [j, tc] of m.tool_calls.entries()) {
      const r = messages[i + 1 + j];
      if (r?.role !== "tool" || r.tool_call_id !== tc.id)
        return `message ${i}: call ${tc.id} has no result at ${i + 1 + j}`;
    }
    i += m.tool_calls.length;
  }
  return null;
}

/** Invariant 10 of docs/architecture.md on the log: no kept result whose call was summarised away. */
export function keptOrphan(path: readonly LogEntry[], baseline: LogEntry | null): string | null {
  if (baseline?.type !== "compaction") return null;
  const kept = path.findIndex((e) => e.id === baseline.firstKeptId);
  const failed = new Set(
    path.flatMap((e) =>
      e.type === "attempt_end" && e.status !== "completed" ? [e.attemptId] : [],
    ),
  );
  for (let i = Math.max(kept, 0); i < path.length; i++) {
    const r = path[i];
    if (r.type !== "call_result") continue;
    const a = path.findLastIndex(
      (e, j) =>
        j < i &&
        e.type === "assistant_message" &&
        !failed.has(e.attemptId) &&
        e.content.some((c) => c.type === "tool-call" && c.id === r.callId),
    );
    if (a >= 0 && a < kept) return `result ${r.callId} is kept but its call was summarised`;
  }
  return null;
}
