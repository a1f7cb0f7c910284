import type { ChatToolCall, Usage } from "../contracts/model.ts";
import type {
  AttemptStatus,
  CallOutcome,
  InboxLane,
  InboxSource,
  TurnStatus,
} from "../contracts/status.ts";
import type { ToolResult } from "../contracts/tool-result.ts";
import type { PermissionDecision, PermissionRequest } from "./permissions.ts";

/**
 * Everything a session tells its subscribers, one union tagged by dotted `type`.
 * Every event carries `sessionId` and `at` (clock ms).
 */
export type AgentEvent = { sessionId: string; at: number } & (
  | { type: "turn.started"; turnId: string; input: string }
  | { type: "attempt.started"; turnId: string; attemptId: string; step: number }
  | { type: "text.delta"; attemptId: string; text: string }
  /** A best-effort parse of a tool call's arguments so far, for UIs. */
  | { type: "call.preview"; attemptId: string; index: number; name?: string; preview: unknown }
  | { type: "attempt.ended"; attemptId: string; status: AttemptStatus; error?: string }
  | {
      type: "message.committed";
      turnId: string;
      attemptId: string;
      text: string;
      toolCalls: ChatToolCall[];
      usage?: Usage;
    }
  | { type: "call.queued"; turnId: string; callId: string; name: string }
  | { type: "call.started"; turnId: string; callId: string; name: string; args: unknown }
  | { type: "call.update"; callId: string; progress: unknown }
  /** A cancelled call that was running: its tool was asked to stop (aborted if cancellable). */
  | { type: "call.stopping"; turnId: string; callId: string; name: string }
  /** In completion order. */
  | {
      type: "call.settled";
      turnId: string;
      callId: string;
      name: string;
      outcome: CallOutcome;
      result: ToolResult;
    }
  /** In call order, once every call of the batch has settled and been written. */
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
      mode: "retry" | "continue";
    }
  | { type: "turn.cancel_acknowledged"; turnId: string; reason: string }
  | { type: "turn.execution_stopped"; turnId: string }
  | { type: "turn.ended"; turnId: string; status: TurnStatus; reason?: string }
  | { type: "permission.requested"; request: PermissionRequest }
  | { type: "permission.decided"; requestId: string; callId: string; decision: PermissionDecision }
  | { type: "inbox.received"; inboxId: string; lane: InboxLane; source: InboxSource }
  | { type: "inbox.consumed"; inboxId: string; lane: InboxLane }
  | { type: "log"; level: "warn" | "info"; message: string }
);

/** The `type` of every event a session emits. */
export type AgentEventType = AgentEvent["type"];
/** The event of one type, e.g. `AgentEventOf<"call.settled">`. */
export type AgentEventOf<K extends AgentEventType> = Extract<AgentEvent, { type: K }>;

/**
 * A consumer of everything observable: XState's inspection events from every actor of a
 * session (`createActor(root, { inspect })`) and Keel's own events. The inspector in
 * `inspector/` implements it; nothing in `actors/` or `machines/` imports the inspector.
 * Contract: both methods must return quickly and must not throw.
 */
export interface InspectSink {
  /** One XState inspection event of any actor of a session (the coordinator's included). */
  observe(event: import("xstate").InspectionEvent): void;
  /** One of Keel's own events, as `session.subscribe` listeners get them. */
  publish(event: AgentEvent): void;
}
