import type { AgentEvent, AgentEventBody } from "../contracts/events.ts";
import { textOf, toolCallsOf } from "../contracts/messages.ts";
import type { EntryOf, LogEntry } from "../session/entries.ts";
import { agentRecord, clip, type InspectRecord } from "./records.ts";

/** Result codes of calls the batch settled without running them (the others never reach it). */
const SETTLED_BY_BATCH = new Set(["CANCELLED"]);

/**
 * Turns a stored session's log into the records a live session would have produced, so the
 * page draws what it draws live:
 * - the actors: the coordinator at the root, each turn with its batch, the calls that went
 *   through the batch under it (queued at their assistant message, started at their
 *   write-ahead record, settled at their result) and the calls refused before it (unknown
 *   tool, truncated message) under the turn; attempts come from the agent events, as live;
 * - the coordinator's doorbell, rebuilt from the inbox: an input that arrives while a turn
 *   runs rings it (input outranks steer), and it is quiet again when that runner hands over;
 * - retry waits: a failed attempt followed by another attempt of its turn is a wait from the
 *   failure to that attempt, retry or continue as that attempt's `recovery` says (in a log
 *   from before it was recorded: continue when the failed attempt had produced output);
 * - each turn's state in its chart (machines/turn.machine.ts), as far as the log shows it:
 *   preparing at its start, sampling at each attempt, waiting before a retry, executing while
 *   its batch runs, ending after an answer without calls, compacting at a compaction, stopping
 *   after an interrupt, then finalizing and done at its end; each snapshot names the event
 *   the chart took there (`ev`), so the page marks the transition. States the log cannot tell
 *   apart (the permission gate, eventless steps) are passed over;
 * - inbox lanes and turn ends. Entries with no live counterpart (context edits, compactions,
 *   settings, leaf moves, notes) become `log.written` records.
 * This is a pure function.
 */
export function replayRecords(entries: readonly LogEntry[], sessionId: string): InspectRecord[] {
  const out: InspectRecord[] = [];
  const ahead = lookAhead(entries);
  // A replayed event is stamped here, once, with its log entry's time.
  const emit = (at: number, body: AgentEventBody) => {
    out.push(agentRecord({ ...body, sessionId, at } as AgentEvent));
  };
  const actor = (t: number, sid: string, id: string, machine: string, parent?: string) =>
    out.push({ k: "actor", t, sid, id, machine, ...(parent ? { parent } : {}) });
  const snap = (t: number, sid: string, id: string, state: string, status = "active") =>
    out.push({ k: "snap", t, sid, id, state, status });
  // Each turn's chart state, and the move into the next one on the event that takes it there.
  const turnState = new Map<string, string>();
  const move = (t: number, id: string, state: string, ev: string, status = "active") => {
    if (turnState.get(id) === state) return;
    turnState.set(id, state);
    out.push({ k: "snap", t, sid: turnSid(id), id, state, status, ev });
  };

  // The coordinator and its doorbell.
  const coordinator = `replay:${sessionId}:coordinator`;
  let running = false;
  let doorbell: "input" | "steer" | null = null;
  const unconsumed = new Set<string>();
  const ring = (t: number) => {
    out.push({
      k: "snap",
      t,
      sid: coordinator,
      id: "coordinator",
      state: running ? "running" : "idle",
      status: "active",
      wake: doorbell,
    });
  };
  if (entries.length > 0) {
    actor(entries[0].at, coordinator, "coordinator", "coordinator");
    ring(entries[0].at);
  }

  let turnId = "";
  const turnSid = (id: string) => `replay:${id}`;
  const batchSid = (id: string) => `replay:${id}:batch`;
  const batchRunning = new Map<string, Set<string>>(); // turnId → batched calls not settled
  const callSid = new Map<string, string>(); // callId → its actor, for batched calls
  const lanes = new Map<string, Extract<LogEntry, { type: "inbox" }>["lane"]>();
  const failedAt = new Map<number, number>(); // step → consecutive failed attempts
  for (const [index, entry] of entries.entries()) {
    const at = entry.at;
    switch (entry.type) {
      case "user_message":
        emit(at, { type: "log.written", level: "info", message: `user: ${clip(entry.text, 200)}` });
        break;
      case "turn_start":
        turnId = entry.turnId;
        failedAt.clear();
        actor(at, turnSid(turnId), turnId, "turn");
        move(at, turnId, "running.sampling.preparing", "xstate.init");
        // One batch actor for the whole turn, as the turn chart invokes it.
        actor(at, batchSid(turnId), "batch", "batch", turnSid(turnId));
        snap(at, batchSid(turnId), "batch", "idle");
        batchRunning.set(turnId, new Set());
        emit(at, { type: "turn.started", turnId, input: ahead.inputs.get(turnId) ?? "" });
        break;
      case "attempt_start": {
        turnId = entry.turnId;
        const before = turnState.get(turnId) ?? "";
        move(
          at,
          turnId,
          "running.sampling.streaming",
          before === "running.waiting"
            ? "xstate.after.retryDelay.turn.running.waiting"
            : before.startsWith("running.compacting")
              ? "compaction.done"
              : "attempt.recorded",
        );
        emit(at, {
          type: "attempt.started",
          turnId,
          attemptId: entry.attemptId,
          step: entry.step,
        });
        break;
      }
      case "attempt_end": {
        emit(at, {
          type: "attempt.ended",
          attemptId: entry.attemptId,
          status: entry.status,
          ...(entry.error ? { error: entry.error } : {}),
        });
        const next = entry.status === "failed" ? ahead.nextAttempt.get(index) : undefined;
        if (next) {
          move(at, next.turnId, "running.waiting", "attempt.failed");
          const retry = (failedAt.get(next.step) ?? 0) + 1;
          failedAt.set(next.step, retry);
          // The next attempt's log entry says how it recovered; an older log does not.
          const output = Boolean(entry.partialText) || (entry.partialCalls?.length ?? 0) > 0;
          const mode = next.recovery?.mode ?? (output ? "continue" : "retry");
          const fallback = next.recovery?.fallback;
          emit(at, {
            type: "retry.scheduled",
            turnId: next.turnId,
            attemptId: entry.attemptId,
            retry,
            delayMs: Math.max(0, Math.round(next.at - at)),
            readyAt: next.at,
            reason: entry.error ?? "the attempt failed",
            mode,
            ...(fallback ? { fallback } : {}),
          });
        }
        break;
      }
      case "assistant_message": {
        turnId = entry.turnId;
        emit(at, {
          type: "message.committed",
          turnId,
          attemptId: entry.attemptId,
          text: textOf(entry.content),
          toolCalls: toolCallsOf(entry.content),
          ...(entry.usage ? { usage: entry.usage } : {}),
        });
        const pending = batchRunning.get(turnId);
        const calls = toolCallsOf(entry.content);
        // Calls that reach the batch make it execute; refused ones are committed at once.
        move(
          at,
          turnId,
          calls.length === 0
            ? "running.ending"
            : calls.some((c) => ahead.batched.has(c.id))
              ? "running.executing.running"
              : "running.sampling.preparing",
          "attempt.done",
        );
        for (const call of calls) {
          if (pending && ahead.batched.has(call.id)) {
            if (pending.size === 0) snap(at, batchSid(turnId), "batch", "running");
            pending.add(call.id);
            const sid = `replay:${turnId}:${call.id}:${index}`;
            callSid.set(call.id, sid);
            actor(at, sid, call.id, "toolCall", batchSid(turnId));
            snap(at, sid, call.id, "queued");
          }
          emit(at, { type: "call.queued", turnId, callId: call.id, name: call.name });
        }
        break;
      }
      case "call_started": {
        const sid = callSid.get(entry.callId);
        if (sid) snap(at, sid, entry.callId, "started");
        emit(at, {
          type: "call.started",
          turnId,
          callId: entry.callId,
          name: entry.name,
          args: entry.args,
        });
        break;
      }
      case "call_result": {
        const sid = callSid.get(entry.callId);
        if (sid) {
          snap(at, sid, entry.callId, entry.outcome === "unknown" ? "unknown" : "settled", "done");
          callSid.delete(entry.callId);
        }
        emit(at, {
          type: "call.settled",
          turnId,
          callId: entry.callId,
          name: entry.name,
          outcome: entry.outcome,
          result: entry.result,
        });
        const pending = batchRunning.get(turnId);
        if (pending?.delete(entry.callId) && pending.size === 0) {
          snap(at, batchSid(turnId), "batch", "idle");
          // The batch of the turn's last attempt, in a turn that a spent budget or a loop
          // ended: the chart went from executing to finalizing on it, which turn_end replays.
          const endedHere =
            (ahead.lastAttempt.get(turnId) ?? -1) < index && ahead.endedOnCommit.has(turnId);
          if (!endedHere && turnState.get(turnId)?.startsWith("running.executing")) {
            move(at, turnId, "running.sampling.preparing", "batch.done");
          }
        }
        break;
      }
      case "permission_request":
        emit(at, {
          type: "permission.requested",
          request: {
            requestId: entry.requestId,
            sessionId,
            callId: entry.callId,
            tool: entry.tool,
            args: entry.args,
            risk: entry.risk,
            ...(entry.deadlineAt !== undefined ? { deadlineAt: entry.deadlineAt } : {}),
          },
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
        if (entry.lane === "interrupt" && turnId && turnState.get(turnId)?.endsWith("running")) {
          move(at, turnId, "running.executing.stopping", "turn.interrupt");
        } else if (entry.lane === "interrupt" && turnState.get(turnId)?.endsWith("streaming")) {
          move(at, turnId, "running.sampling.stopping", "turn.interrupt");
        }
        if (entry.lane !== "interrupt") {
          unconsumed.add(entry.inboxId);
          // A wake starts a runner when none runs; otherwise it rings the doorbell.
          if (!running) running = true;
          else doorbell = doorbell === "input" || entry.lane === "next-turn" ? "input" : "steer";
          ring(at);
        }
        break;
      case "inbox_consumed":
        unconsumed.delete(entry.inboxId);
        emit(at, {
          type: "inbox.consumed",
          inboxId: entry.inboxId,
          lane: lanes.get(entry.inboxId) ?? "next-step",
        });
        break;
      case "turn_end": {
        emit(at, {
          type: "turn.ended",
          turnId: entry.turnId,
          status: entry.status,
          ...(entry.reason ? { reason: entry.reason } : {}),
        });
        snap(at, batchSid(entry.turnId), "batch", "idle", "stopped");
        const last = turnState.get(entry.turnId) ?? "";
        move(
          at,
          entry.turnId,
          "finalizing",
          last === "running.ending"
            ? "end.none"
            : last.startsWith("running.executing")
              ? "batch.done"
              : last.startsWith("running.sampling")
                ? "attempt.failed"
                : "turn.interrupt",
        );
        move(at, entry.turnId, "done", "finalize.done", "done");
        batchRunning.delete(entry.turnId);
        // The runner hands over (the doorbell is answered) or goes idle.
        doorbell = null;
        running = unconsumed.size > 0;
        ring(at);
        break;
      }
      case "turn_aborted":
        emit(at, { type: "log.written", level: "warn", message: `turn aborted at ${entry.where}` });
        break;
      case "acceptance":
        emit(at, {
          type: "acceptance.checked",
          acceptance: entry.acceptance,
          evidence: entry.evidence,
          rounds: entry.rounds,
          reason: entry.reason,
          specVersion: entry.specVersion,
        });
        break;
      case "compaction":
        if (turnState.get(turnId)?.startsWith("running")) {
          move(at, turnId, "running.compacting.summarizing", "compact.due");
        }
        emit(at, {
          type: "log.written",
          level: "info",
          message: `${entry.type}: ${describe(entry)}`,
        });
        break;
      case "context_edit":
      case "settings":
      case "leaf":
      case "note":
      case "turn_continued":
      case "acceptance_spec":
      case "handoff":
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

type NextAttempt = Pick<EntryOf<"attempt_start">, "turnId" | "step" | "at" | "recovery">;

interface Ahead {
  /** The prompt each turn answers (logged after its turn_start). */
  inputs: Map<string, string>;
  /** For a failed attempt's end (by index): the next attempt of its turn, if one started. */
  nextAttempt: Map<number, NextAttempt>;
  /** Calls that went through a batch: started, or settled by the batch without running. */
  batched: Set<string>;
  /** Each turn's last `attempt_start` (its index). */
  lastAttempt: Map<string, number>;
  /** Turns that ended on a spent budget or a detected loop (decided when a step's batch commits). */
  endedOnCommit: Set<string>;
}

/** What the replay needs to know before it reaches the entries that tell it. */
function lookAhead(entries: readonly LogEntry[]): Ahead {
  const inputs = new Map<string, string>();
  const nextAttempt = new Map<number, NextAttempt>();
  const batched = new Set<string>();
  const lastAttempt = new Map<string, number>();
  const endedOnCommit = new Set<string>();
  let pendingTurn: string | undefined;
  let failed: number[] = []; // failed attempt ends waiting for the next attempt start
  for (const [index, entry] of entries.entries()) {
    if (entry.type === "turn_start") {
      pendingTurn = entry.turnId;
      failed = [];
    } else if (entry.type === "user_message") {
      const owner = entry.turnId ?? pendingTurn;
      if (owner && !inputs.has(owner)) inputs.set(owner, entry.text);
      pendingTurn = undefined;
    } else if (entry.type === "attempt_end" && entry.status === "failed") {
      failed.push(index);
    } else if (entry.type === "attempt_start") {
      lastAttempt.set(entry.turnId, index);
      for (const i of failed) {
        nextAttempt.set(i, {
          turnId: entry.turnId,
          step: entry.step,
          at: entry.at,
          ...(entry.recovery ? { recovery: entry.recovery } : {}),
        });
      }
      failed = [];
    } else if (entry.type === "turn_end") {
      failed = [];
      const onCommit =
        entry.status === "budget_exhausted" || entry.reason?.startsWith("loop_detected");
      if (onCommit) endedOnCommit.add(entry.turnId);
      else endedOnCommit.delete(entry.turnId);
    } else if (entry.type === "call_started") {
      batched.add(entry.callId);
    } else if (
      entry.type === "call_result" &&
      !entry.result.ok &&
      SETTLED_BY_BATCH.has(entry.result.code)
    ) {
      batched.add(entry.callId);
    }
  }
  return { inputs, nextAttempt, batched, lastAttempt, endedOnCommit };
}

type NoLiveCounterpart = Extract<
  LogEntry,
  {
    type:
      | "context_edit"
      | "compaction"
      | "settings"
      | "leaf"
      | "note"
      | "turn_continued"
      | "acceptance_spec"
      | "handoff";
  }
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
    case "turn_continued":
      return `${entry.turnId}, continuation ${entry.continuation}: ${clip(entry.where, 200)}`;
    case "acceptance_spec":
      return `v${entry.version}: ${entry.checks.map((c) => c.name).join(", ")}`;
    case "handoff":
      return `${entry.record.verified.length} verified fact(s), ${entry.record.nextSteps.length} next step(s)`;
  }
}
