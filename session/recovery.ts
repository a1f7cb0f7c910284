import type { ToolFailure } from "../contracts/tool-result.ts";
import { activePath } from "./active-path.ts";
import type { EntryOf, LogEntry } from "./entries.ts";
import type { SessionLog } from "./log.ts";
import { loggedRequests } from "./permission-log.ts";
import { type OpenWork, Projection } from "./projection.ts";

/** A call with a start record and no result. */
export interface UnknownCall {
  callId: string;
  name: string;
  args: unknown;
  /** The key the call started with; a retry must reuse it. */
  idempotencyKey: string;
  /** As recorded in the start record. */
  idempotent: boolean;
}

/** What a crash left open on the active path. */
export interface RecoveryPlan {
  unknownCalls: UnknownCall[];
  /** Attempts cut before their message was committed: they end `interrupted`. */
  openAttempts: string[];
  /** Attempts whose message was committed but whose end was not logged: they end `completed`. */
  committedAttempts: string[];
  openTurn?: string;
}

/**
 * What a crash left open, read from a whole log (any order of appends; the active path is
 * replayed). Calls started off the active path are not part of the conversation and are not
 * listed. This is a pure function.
 */
export function planRecovery(entries: readonly LogEntry[]): RecoveryPlan {
  return planFromWork(Projection.fromPath(activePath(entries)).openWork());
}

export interface RecoverOptions {
  /**
   * Whether the tool named `name` may be re-executed automatically (its `idempotent` trait).
   * Contract: pure; `undefined` (unknown tool) is read as not idempotent.
   * A call is retried only when both this and its start record say idempotent.
   */
  isIdempotent: (name: string) => boolean | undefined;
  /**
   * Continue an open turn instead of closing it (`recovery: "continue"`, docs/crashes.md): the
   * turn stays open with a `turn_continued` entry, for the runner to continue; once it was
   * continued `maxContinuations` times, the next crash closes it `failed` with code
   * `CRASH_LOOP`. Absent: the turn is closed (`failed`, "process ended during the turn").
   */
  continueTurns?: { maxContinuations: number };
}

export interface RecoveryReport {
  plan: RecoveryPlan;
  /** Idempotent calls to re-execute with their SAME `idempotencyKey`; append their results when done. */
  retry: UnknownCall[];
  /** `call_result` entries written with outcome `unknown` (code OUTCOME_UNKNOWN). */
  unknown: EntryOf<"call_result">[];
  /** The turn ended as failed (with a `turn_aborted` note for the model), if one was open. */
  endedTurn: string | null;
  /** The open turn left open to be continued (with `continueTurns`), if one was open. */
  continuedTurn: string | null;
}

/**
 * Closes what a crash left open, so the log is well-formed again, and makes it durable:
 * open attempts end (`interrupted`, or `completed` if their message was committed); each call
 * with a start and no result is either returned in `retry` (its tool is idempotent: the
 * runtime re-executes it with the same idempotency key) or gets a `call_result` with outcome
 * `unknown` telling the model it may or may not have taken effect and to check before
 * retrying — it is NEVER re-executed (invariant 8 of docs/architecture.md); an open turn is left
 * open for the runner to continue (`continueTurns`, with a `turn_continued` entry), or gets a
 * `turn_end` (failed, "process ended during the turn"; `CRASH_LOOP` past the bound) and a
 * `turn_aborted` note, its unanswered permission requests decided as declined (`turn_ended`).
 * Running it again on a recovered log changes nothing (except listing pending retries again).
 */
export async function recoverSession(
  log: SessionLog,
  options: RecoverOptions,
): Promise<RecoveryReport> {
  const plan = planFromWork(log.openWork());
  for (const attemptId of plan.committedAttempts)
    log.append({ type: "attempt_end", attemptId, status: "completed" });
  for (const attemptId of plan.openAttempts) {
    log.append({
      type: "attempt_end",
      attemptId,
      status: "interrupted",
      error: "the process ended during the attempt",
    });
  }
  const retry: UnknownCall[] = [];
  const unknown: EntryOf<"call_result">[] = [];
  for (const call of plan.unknownCalls) {
    if (call.idempotent && options.isIdempotent(call.name) === true) {
      retry.push(call);
      continue;
    }
    const entry = log.append({
      type: "call_result",
      callId: call.callId,
      name: call.name,
      outcome: "unknown",
      result: outcomeUnknown(call),
    });
    unknown.push(entry as EntryOf<"call_result">);
  }
  let endedTurn: string | null = null;
  let continuedTurn: string | null = null;
  if (plan.openTurn !== undefined) {
    await log.loadHistory(); // the path (continuations, requests) may start before a checkpoint
    const turnId = plan.openTurn;
    const done = continuationsOf(log.path(), turnId);
    const max = options.continueTurns?.maxContinuations;
    if (max !== undefined && done < max) {
      continuedTurn = turnId;
      log.append({ type: "turn_continued", turnId, continuation: done + 1, where: whereCut(plan) });
    } else {
      endedTurn = turnId;
      closeRequests(log, turnId);
      log.append(
        max !== undefined
          ? {
              type: "turn_end",
              turnId,
              status: "failed",
              reason: `process ended during the turn again after ${done} continuation${done === 1 ? "" : "s"} (maxContinuations ${max}): closed as a crash loop`,
              code: "CRASH_LOOP",
            }
          : { type: "turn_end", turnId, status: "failed", reason: "process ended during the turn" },
      );
      log.append({ type: "turn_aborted", turnId, where: whereCut(plan) });
    }
  }
  await log.flush();
  return { plan, retry, unknown, endedTurn, continuedTurn };
}

/** How many times turn `turnId` was continued after a crash (its `turn_continued` entries). */
function continuationsOf(path: readonly LogEntry[], turnId: string): number {
  let n = 0;
  for (const e of path) if (e.type === "turn_continued" && e.turnId === turnId) n++;
  return n;
}

/** A closed turn's requests that no one answered are decided: the turn ended before a reply. */
function closeRequests(log: SessionLog, turnId: string): void {
  for (const { request, decision } of loggedRequests(log.path())) {
    if (decision || request.turnId !== turnId) continue;
    log.append({
      type: "permission_decision",
      turnId,
      requestId: request.requestId,
      callId: request.callId,
      tool: request.tool,
      decision: {
        type: "declined",
        reason: "the process ended before a reply; the turn was closed",
      },
      source: { type: "turn_ended" },
    });
  }
}

/** The failure a call with an unknown outcome reports to the model. */
export function outcomeUnknown(call: Pick<UnknownCall, "callId" | "name">): ToolFailure {
  return {
    ok: false,
    code: "OUTCOME_UNKNOWN",
    message: `The process ended while ${call.name} (call ${call.callId}) was running, so its outcome is unknown: it may or may not have taken effect. It will not be re-run automatically. Check the current state (read the file, list the resource, query the status) before deciding whether to call it again.`,
    retryable: false,
  };
}

function planFromWork(work: OpenWork): RecoveryPlan {
  const plan: RecoveryPlan = {
    unknownCalls: work.calls.map((c) => ({
      callId: c.callId,
      name: c.name,
      args: c.args,
      idempotencyKey: c.idempotencyKey,
      idempotent: c.idempotent === true,
    })),
    openAttempts: work.attempts.filter((a) => !a.committed).map((a) => a.attemptId),
    committedAttempts: work.attempts.filter((a) => a.committed).map((a) => a.attemptId),
  };
  if (work.turnId !== null) plan.openTurn = work.turnId;
  return plan;
}

function whereCut(plan: RecoveryPlan): string {
  if (plan.unknownCalls.length > 0) {
    const calls = plan.unknownCalls.map((c) => `${c.name} (${c.callId})`).join(", ");
    return `the process ended while these tool calls were running: ${calls}`;
  }
  if (plan.openAttempts.length > 0) return "the process ended while the model was responding";
  return "the process ended during the turn";
}
