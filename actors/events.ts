// The event union itself lives in contracts/events.ts (keel/client reads it too).
import type { AgentEvent, AgentEventType } from "../contracts/events.ts";

/** Every event type, in the order a turn usually emits them. */
export const AGENT_EVENT_TYPES = [
  "inbox.received",
  "inbox.consumed",
  "turn.started",
  "attempt.started",
  "attempt.queued",
  "attempt.admitted",
  "text.streamed",
  "call.previewed",
  "attempt.ended",
  "message.committed",
  "permission.requested",
  "permission.decided",
  "call.queued",
  "call.started",
  "call.updated",
  "call.stop-requested",
  "call.settled",
  "batch.committed",
  "retry.scheduled",
  "loop.detected",
  "context.measured",
  "context.compacted",
  "turn.cancel-acknowledged",
  "turn.execution-stopped",
  "turn.ended",
  "acceptance.started",
  "check.started",
  "check.ended",
  "follow-up.sent",
  "acceptance.checked",
  "log.written",
] as const satisfies readonly AgentEventType[];

// Compile-time: the list covers the union exactly (a missing type makes this `false`).
const coversEveryType: AgentEventType extends (typeof AGENT_EVENT_TYPES)[number] ? true : false =
  true;
void coversEveryType;

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
