import type { AgentEvent, AgentEventBody, LogEntry } from "../index.ts";
import { agentRecord, clip, type InspectRecord } from "./records.ts";

/**
 * Turns a stored session's log into the records a live session would have produced, so the
 * page draws the same timeline: turns, attempts, calls (queued at their assistant message,
 * started at their write-ahead record, settled at their result), inbox lanes and turn ends.
 * Entries with no live counterpart (context edits, compactions, settings, leaf moves, notes)
 * become `log.written` records. This is a pure function.
 */
export function replayRecords(entries: readonly LogEntry[], sessionId: string): InspectRecord[] {
  const out: InspectRecord[] = [];
  let turnId = "";
  const lanes = new Map<string, AgentEventOfLane>();
  // The prompt a turn answers is logged after its turn_start; read it ahead.
  const inputs = new Map<string, string>();
  let pendingTurn: string | undefined;
  for (const entry of entries) {
    if (entry.type === "turn_start") pendingTurn = entry.turnId;
    else if (entry.type === "user_message") {
      const owner = entry.turnId ?? pendingTurn;
      if (owner && !inputs.has(owner)) inputs.set(owner, entry.text);
      pendingTurn = undefined;
    }
  }
  // A replayed event is stamped here, once, with its log entry's time.
  const emit = (at: number, body: AgentEventBody) => {
    out.push(agentRecord({ ...body, sessionId, at } as AgentEvent));
  };
  for (const entry of entries) {
    const at = entry.at;
    switch (entry.type) {
      case "user_message":
        emit(at, { type: "log.written", level: "info", message: `user: ${clip(entry.text, 200)}` });
        break;
      case "turn_start":
        turnId = entry.turnId;
        emit(at, { type: "turn.started", turnId, input: inputs.get(turnId) ?? "" });
        break;
      case "attempt_start":
        turnId = entry.turnId;
        emit(at, {
          type: "attempt.started",
          turnId,
          attemptId: entry.attemptId,
          step: entry.step,
        });
        break;
      case "attempt_end":
        emit(at, {
          type: "attempt.ended",
          attemptId: entry.attemptId,
          status: entry.status,
          ...(entry.error ? { error: entry.error } : {}),
        });
        break;
      case "assistant_message":
        turnId = entry.turnId;
        emit(at, {
          type: "message.committed",
          turnId,
          attemptId: entry.attemptId,
          text: entry.text,
          toolCalls: entry.toolCalls,
          ...(entry.usage ? { usage: entry.usage } : {}),
        });
        for (const call of entry.toolCalls) {
          emit(at, { type: "call.queued", turnId, callId: call.id, name: call.function.name });
        }
        break;
      case "call_started":
        emit(at, {
          type: "call.started",
          turnId,
          callId: entry.callId,
          name: entry.name,
          args: entry.args,
        });
        break;
      case "call_result":
        emit(at, {
          type: "call.settled",
          turnId,
          callId: entry.callId,
          name: entry.name,
          outcome: entry.outcome,
          result: entry.result,
        });
        break;
      case "permission_decision":
        emit(at, {
          type: "permission.decided",
          requestId: entry.requestId,
          callId: entry.callId,
          tool: entry.tool,
          decision: entry.decision,
          source: entry.source,
        });
        break;
      case "inbox":
        lanes.set(entry.inboxId, entry.lane);
        emit(at, {
          type: "inbox.received",
          inboxId: entry.inboxId,
          lane: entry.lane,
          source: entry.source,
        });
        break;
      case "inbox_consumed":
        emit(at, {
          type: "inbox.consumed",
          inboxId: entry.inboxId,
          lane: lanes.get(entry.inboxId) ?? "next-step",
        });
        break;
      case "turn_end":
        emit(at, {
          type: "turn.ended",
          turnId: entry.turnId,
          status: entry.status,
          ...(entry.reason ? { reason: entry.reason } : {}),
        });
        break;
      case "turn_aborted":
        emit(at, { type: "log.written", level: "warn", message: `turn aborted at ${entry.where}` });
        break;
      case "context_edit":
      case "compaction":
      case "settings":
      case "leaf":
      case "note":
        emit(at, {
          type: "log.written",
          level: "info",
          message: `${entry.type}: ${describe(entry)}`,
        });
        break;
      default: {
        // Exhaustive: a new log entry type fails tsc here until replay shows it.
        const unhandled: never = entry;
        void unhandled;
      }
    }
  }
  return out;
}

type AgentEventOfLane = Extract<LogEntry, { type: "inbox" }>["lane"];

type NoLiveCounterpart = Extract<
  LogEntry,
  { type: "context_edit" | "compaction" | "settings" | "leaf" | "note" }
>;

function describe(entry: NoLiveCounterpart): string {
  switch (entry.type) {
    case "context_edit":
      return `${entry.targetId} ${entry.replacement === null ? "removed" : "replaced"}`;
    case "compaction":
      return `summary of ${entry.summary.length} chars, first kept ${entry.firstKeptId}`;
    case "settings":
      return clip(JSON.stringify(entry.settings), 200);
    case "leaf":
      return `→ ${entry.leafId ?? "root"} (${entry.reason})`;
    case "note":
      return clip(entry.text, 200);
  }
}
