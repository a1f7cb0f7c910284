// The events a session emits: the one union the library's listeners, the inspector and the
// control protocol's clients (keel/client) all read.
import type { AcceptanceStatus, CheckKind, Evidence } from "./acceptance.ts";
import type { BudgetStop } from "./budget.ts";
import type { ToolCallPart, Usage } from "./messages.ts";
import type { FinishReason, ModelErrorKind } from "./model.ts";
import type { DecisionSource, PermissionDecision, PermissionRequest } from "./permission.ts";
import type {
  AttemptStatus,
  CallOutcome,
  InboxLane,
  InboxSource,
  TurnFailureCode,
  TurnStatus,
} from "./status.ts";
import type { ToolResult } from "./tool-result.ts";

/**
 * Everything a session tells its subscribers, one union tagged by `type`. Every event carries
 * `sessionId` and `at` (clock ms), stamped once by the session.
 *
 * Naming rule, one form for every event: `<noun>.<past-participle>`, lower case, words within
 * a part joined by `-`. The noun is what changed (`turn`, `attempt`, `text`, `call`, `message`,
 * `batch`, `retry`, `permission`, `inbox`, `log`, `context`, `acceptance`, `check`), the participle what happened to it:
 * `call.settled`, `turn.cancel-acknowledged`, `call.stop-requested`. Streamed pieces follow it
 * too: `text.streamed` carries one piece of text, `call.previewed` one preview of arguments.
 * (The statecharts' own events in `machines/` and the model's stream events in `contracts/`
 * are commands and inputs, another vocabulary: `call.start`, `text.delta`.)
 *
 * Every type is listed in `AGENT_EVENT_TYPES` (keel). Every consumer switches over `type`
 * exhaustively, with a `default` that assigns the event to `never`, so a new event fails `tsc`
 * until each consumer handles it (test/agent-events.unit.test.ts checks the page's plain JS).
 */
export type AgentEvent = { sessionId: string; at: number } & (
  | { type: "turn.started"; turnId: string; input: string }
  | { type: "attempt.started"; turnId: string; attemptId: string; step: number }
  | { type: "text.streamed"; attemptId: string; text: string }
  /** A best-effort parse of a tool call's arguments so far, for UIs. */
  | { type: "call.previewed"; attemptId: string; index: number; name?: string; preview: unknown }
  /**
   * The attempt's request waits for a slot of its provider (`createAgent({ concurrency })`):
   * `position` in the queue when it joined (1 = next; with shared slots, this process's
   * queue), `limit` the provider's bound. The wait counts against the turn's deadline.
   */
  | {
      type: "attempt.queued";
      turnId: string;
      attemptId: string;
      provider: string;
      position: number;
      limit: number;
    }
  /** A queued attempt holds its slot after `waitedMs`: its request is sent now. */
  | {
      type: "attempt.admitted";
      turnId: string;
      attemptId: string;
      provider: string;
      waitedMs: number;
    }
  | {
      type: "attempt.ended";
      attemptId: string;
      status: AttemptStatus;
      error?: string;
      /** The failure's kind when the model adapter classified it (a `ModelError`'s `kind`). */
      errorKind?: ModelErrorKind;
    }
  | {
      type: "message.committed";
      turnId: string;
      attemptId: string;
      text: string;
      toolCalls: ToolCallPart[];
      usage?: Usage;
      /** Set when `usage` is Keel's estimate (the provider reported none, or none plausible). */
      usageEstimated?: true;
      /** The response's cost from the agent's price table (`prices`); absent without one. */
      cost?: number;
      /** Why the response ended, as the model said. */
      finishReason?: FinishReason;
    }
  | { type: "call.queued"; turnId: string; callId: string; name: string }
  | { type: "call.started"; turnId: string; callId: string; name: string; args: unknown }
  | { type: "call.updated"; callId: string; progress: unknown }
  /** A cancelled call that was running: its tool was asked to stop (aborted if cancellable). */
  | { type: "call.stop-requested"; turnId: string; callId: string; name: string }
  /** In completion order. */
  | {
      type: "call.settled";
      turnId: string;
      callId: string;
      name: string;
      outcome: CallOutcome;
      result: ToolResult;
    }
  /**
   * In call order, once every call of the batch has settled and its result is in the session's
   * log (like `call.settled`, said when written; the next model request, a compaction or the
   * turn's end waits for them to be durable).
   */
  | {
      type: "batch.committed";
      turnId: string;
      calls: { callId: string; name: string; outcome: CallOutcome; result: ToolResult }[];
    }
  | {
      type: "retry.scheduled";
      turnId: string;
      attemptId: string;
      retry: number;
      delayMs: number;
      /** Clock ms at which the next attempt may start. */
      readyAt: number;
      reason: string;
      /** `continue`: the next request ends with the partial text received so far (see `Model.capabilities`). */
      mode: "retry" | "continue";
      /** Set when Continue was due but not possible, so the next attempt retries: why. */
      fallback?: string;
    }
  /**
   * The loop guard saw one call (tool and normalised arguments) fail the same way `repeats`
   * times in a row: `warned` (its result tells the model to change approach) or `stopped` (the
   * turn ends `failed`, reason `loop_detected`).
   */
  | {
      type: "loop.detected";
      turnId: string;
      tool: string;
      repeats: number;
      action: "warned" | "stopped";
      callId?: string;
    }
  | { type: "turn.cancel-acknowledged"; turnId: string; reason: string }
  | { type: "turn.execution-stopped"; turnId: string }
  /**
   * The turn has ended and its end is durable in the log (invariant 15 of docs/architecture.md): `status` is what the
   * log holds. `code` is set on a `failed` turn the runtime failed (`STORE_FAILED`,
   * `LEASE_LOST`).
   */
  | {
      type: "turn.ended";
      turnId: string;
      status: TurnStatus;
      reason?: string;
      code?: TurnFailureCode;
      /** With `budget_exhausted`: which budget ran out. */
      budget?: BudgetStop;
    }
  | { type: "permission.requested"; request: PermissionRequest }
  /** Also written to the log (`permission_decision`); `source` says which reply decided it. */
  | {
      type: "permission.decided";
      requestId: string;
      callId: string;
      tool: string;
      decision: PermissionDecision;
      source: DecisionSource;
    }
  | { type: "inbox.received"; inboxId: string; lane: InboxLane; source: InboxSource }
  | { type: "inbox.consumed"; inboxId: string; lane: InboxLane }
  | { type: "log.written"; level: "warn" | "info"; message: string }
  /**
   * The context budget of the next request changed (measured before each model request):
   * `used` tokens (provider usage + estimate when `trusted`, else estimated whole), the model's
   * `window` (Infinity: unknown) and the output `reserve`.
   */
  | { type: "context.measured"; used: number; window: number; reserve: number; trusted: boolean }
  /**
   * A compaction of the turn ended (`auto`: the budget crossed its threshold; `overflow`: the
   * provider refused the request's size). `ok: false`: the old baseline stays, `reason` says why.
   */
  | {
      type: "context.compacted";
      mode: "auto" | "overflow";
      ok: boolean;
      reason?: string;
      tokensBefore?: number;
      tokensAfter?: number;
      /** How long it took, summary request included (clock ms). */
      durationMs?: number;
    }
  /** A round of acceptance checks started (`round` 0: after the turn; k: after follow-up k). */
  | { type: "acceptance.started"; round: number; checks: string[] }
  /** One check started against `artifactVersion`. */
  | { type: "check.started"; name: string; round: number; artifactVersion: string }
  /** One check ended (an interrupted check does not end: it leaves no evidence). */
  | {
      type: "check.ended";
      name: string;
      kind: CheckKind;
      passed: boolean;
      durationMs: number;
      round: number;
    }
  /** The failing evidence went to the model as follow-up `round` of the acceptance loop. */
  | { type: "follow-up.sent"; round: number; failing: string[] }
  /**
   * A run of checks (and of the loop) ended: the acceptance the evidence supports, separate from
   * the turn's run status.
   */
  | {
      type: "acceptance.checked";
      acceptance: AcceptanceStatus;
      evidence: Evidence;
      rounds: number;
      reason: "turn" | "accept" | "handoff";
      specVersion: number;
    }
);

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/**
 * An event as its producer builds it, without `sessionId` and `at`. The session stamps both,
 * once, when it emits the event (`Session.emit`); its listeners and the inspector receive the
 * same stamped object. Nothing else stamps or re-stamps a live event.
 */
export type AgentEventBody = DistributiveOmit<AgentEvent, "sessionId" | "at">;

/** The `type` of every event a session emits. */
export type AgentEventType = AgentEvent["type"];

/** The event of one type, e.g. `AgentEventOf<"call.settled">`. */
export type AgentEventOf<K extends AgentEventType> = Extract<AgentEvent, { type: K }>;
