// The permission vocabulary shared by the runtime (actors/permissions.ts), the events and the
// control protocol's clients.

/**
 * How much damage a tool can do; read by the permission policy. Missing → "high", or "low" for
 * a `readOnly` tool.
 */
export type Risk = "low" | "medium" | "high";

/** What policy says about a call before anyone is asked. */
export type PermissionAction = "allow" | "deny" | "ask";

/** A rule matches by tool name (`"*"` or omitted: any) and/or risk; the first match wins. */
export interface PermissionRule {
  tool?: string;
  risk?: Risk;
  action: PermissionAction;
}

/** One call waiting for the embedder's decision. */
export interface PermissionRequest {
  requestId: string;
  sessionId: string;
  callId: string;
  tool: string;
  args: unknown;
  risk: Risk;
  /** Clock ms when the request is decided as denied with feedback if no one answered. */
  deadlineAt?: number;
}

/**
 * The embedder's answer to one request. `allow_once` approves that request only. `allow_always`
 * adds an allow rule for the tool for the rest of the session and re-evaluates the other pending
 * requests against it (a configured deny still wins). `deny` declines: the turn stops and the
 * model does not get to try again. `deny_with_feedback`: the feedback becomes the call's result
 * and the turn goes on. Both denials reach every pending request of the session.
 */
export type PermissionReply =
  | { type: "allow_once" }
  | { type: "allow_always" }
  | { type: "deny" }
  | { type: "deny_with_feedback"; feedback: string };

/**
 * Where a request's decision came from: the policy without asking (`policy`), the reply given
 * for this very request (`reply`), a reply given for another pending request of the session
 * that reached this one too (`spread`: a denial, or an `allow_always` whose new rule now allows
 * it; `by` is that request's id), the turn ending before any reply (`turn_ended`), or its
 * deadline passing with no answer (`expired`).
 */
export type DecisionSource =
  | { type: "policy" }
  | { type: "reply"; reply: PermissionReply["type"] }
  | { type: "spread"; reply: PermissionReply["type"]; by: string }
  | { type: "turn_ended" }
  | { type: "expired" };

/**
 * How one request ended. `corrected.feedback` says why the call may not run; it becomes the
 * call's `DENIED` result, `not executed: <feedback>`.
 */
export type PermissionDecision =
  | { type: "allow" }
  | { type: "declined"; reason: string }
  | { type: "corrected"; feedback: string };

/** How a permission reply is written, for the messages of the transports that read one. */
export const PERMISSION_REPLY_SHAPES =
  '{"type":"allow_once"}, {"type":"allow_always"}, {"type":"deny"} or {"type":"deny_with_feedback","feedback":"…"}';

/**
 * A permission reply read from untrusted JSON (the control protocol's `permission.reply`, the
 * HTTP transport's), or undefined when it is not one of {@link PERMISSION_REPLY_SHAPES}.
 * Unknown fields are dropped. This is a pure function.
 */
export function readPermissionReply(value: unknown): PermissionReply | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const r = value as Record<string, unknown>;
  switch (r.type) {
    case "allow_once":
    case "allow_always":
    case "deny":
      return { type: r.type };
    case "deny_with_feedback":
      return typeof r.feedback === "string" && r.feedback.length > 0
        ? { type: r.type, feedback: r.feedback }
        : undefined;
    default:
      return undefined;
  }
}
