// Durable permission requests, read from the log: what is pending, how one was decided, which
// tools a reply allowed for the rest of the session. Pure functions over entries.

import type {
  DecisionSource,
  PermissionDecision,
  PermissionReply,
  PermissionRequest,
} from "../contracts/permission.ts";
import type { EntryInput, EntryOf, LogEntry } from "./entries.ts";

/** A request as the log holds it, with its decision if one was written. */
export interface LoggedRequest {
  request: EntryOf<"permission_request">;
  decision: EntryOf<"permission_decision"> | undefined;
}

/**
 * Every permission request of the log, in the order asked, each with its decision (the first
 * `permission_decision` of its id; a decision is written once). This is a pure function.
 */
export function loggedRequests(entries: readonly LogEntry[]): LoggedRequest[] {
  const byId = new Map<string, LoggedRequest>();
  const decisions = new Map<string, EntryOf<"permission_decision">>();
  for (const e of entries) {
    if (e.type === "permission_request" && !byId.has(e.requestId)) {
      byId.set(e.requestId, { request: e, decision: undefined });
    } else if (e.type === "permission_decision" && !decisions.has(e.requestId)) {
      decisions.set(e.requestId, e);
    }
  }
  for (const [id, logged] of byId) logged.decision = decisions.get(id);
  return [...byId.values()];
}

/** The requests of the log with no decision yet, oldest first. This is a pure function. */
export function openRequests(entries: readonly LogEntry[], sessionId: string): PermissionRequest[] {
  return loggedRequests(entries)
    .filter((r) => r.decision === undefined)
    .map((r) => requestOf(r.request, sessionId));
}

/** The public shape of a logged request. This is a pure function. */
export function requestOf(
  entry: EntryOf<"permission_request">,
  sessionId: string,
): PermissionRequest {
  const request: PermissionRequest = {
    requestId: entry.requestId,
    sessionId,
    callId: entry.callId,
    tool: entry.tool,
    args: entry.args,
    risk: entry.risk,
  };
  if (entry.deadlineAt !== undefined) request.deadlineAt = entry.deadlineAt;
  return request;
}

/**
 * The tools an `allow_always` reply allowed for the rest of the session: the tool of every
 * request decided by its own `allow_always` reply (docs/permissions.md). This is a pure function.
 */
export function alwaysAllowedTools(entries: readonly LogEntry[]): string[] {
  const tools = new Set<string>();
  for (const e of entries) {
    if (
      e.type === "permission_decision" &&
      e.source.type === "reply" &&
      e.source.reply === "allow_always"
    ) {
      tools.add(e.tool);
    }
  }
  return [...tools];
}

/**
 * The decisions a reply to `requestId` writes into a log whose requests are `logged`, as the
 * broker decides them (actors/permissions.ts): its own request; with a denial, every other open
 * request too (`spread`); with `allow_always`, the other open requests of the same tool. Used
 * where no broker holds the requests (a process that answers under the lease while no turn
 * waits: `keel approve`, an answer taken before the cut turn is continued). A configured deny
 * still wins when the turn reads an `allow` back (actors/continue-turn.ts). Empty when the
 * request is not open. This is a pure function.
 */
export function decisionsFor(
  logged: readonly LoggedRequest[],
  requestId: string,
  reply: PermissionReply,
  answerId?: string,
): EntryInputOf<"permission_decision">[] {
  const origin = logged.find((r) => r.request.requestId === requestId);
  if (!origin || origin.decision) return [];
  const open = logged.filter((r) => !r.decision && r.request.requestId !== requestId);
  const entry = (
    r: EntryOf<"permission_request">,
    decision: PermissionDecision,
    source: DecisionSource,
    extra: { answerId?: string },
  ): EntryInputOf<"permission_decision"> => ({
    type: "permission_decision",
    turnId: r.turnId,
    requestId: r.requestId,
    callId: r.callId,
    tool: r.tool,
    decision,
    source,
    ...extra,
  });
  const own: DecisionSource = { type: "reply", reply: reply.type };
  const spread: DecisionSource = { type: "spread", reply: reply.type, by: requestId };
  const answered = answerId !== undefined ? { answerId } : {};
  const tool = origin.request.tool;
  if (reply.type === "allow_once" || reply.type === "allow_always") {
    const out = [entry(origin.request, { type: "allow" }, own, answered)];
    if (reply.type === "allow_always") {
      for (const r of open)
        if (r.request.tool === tool) out.push(entry(r.request, { type: "allow" }, spread, {}));
    }
    return out;
  }
  const decision: PermissionDecision =
    reply.type === "deny"
      ? { type: "declined", reason: `permission to run ${tool} was declined` }
      : { type: "corrected", feedback: `the user declined this call: ${reply.feedback}` };
  return [
    entry(origin.request, decision, own, answered),
    ...open.map((r) => entry(r.request, decision, spread, {})),
  ];
}

/** The input shape of one entry type (what `log.append` takes). */
type EntryInputOf<K extends LogEntry["type"]> = Extract<EntryInput, { type: K }>;
