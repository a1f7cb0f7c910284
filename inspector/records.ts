import type { InspectionEvent } from "xstate";
import type { AgentEvent } from "../contracts/events.ts";

/**
 * The inspector's wire format: small, flat JSON records, one per observable change. Whole
 * contexts and snapshots are never serialised; a record costs a few hundred bytes at most.
 * `t` is clock ms; `sid` is XState's unique `sessionId` of an actor, `id` its readable id.
 */
export type InspectRecord =
  | {
      k: "actor";
      t: number;
      sid: string;
      id: string;
      parent?: string;
      machine?: string;
    }
  | {
      k: "snap";
      t: number;
      sid: string;
      id: string;
      state: string;
      status: string;
      /** The coordinator's doorbell (`context.pendingWake`), when the snapshot exposes one. */
      wake?: string | null;
      /**
       * The event the transition into `state` was taken on, when no `ev` record says it (a
       * replay reconstructs it from the log); live, the actor's last `ev` record names it.
       */
      ev?: string;
    }
  | { k: "ev"; t: number; sid: string; id: string; type: string; from?: string }
  | { k: "agent"; t: number; e: AgentEvent };

/** Longest string kept in any record field (args, results, text). */
export const MAX_TEXT = 240;

/** Cuts `text` to `max` characters, marking the cut. */
export function clip(text: string, max = MAX_TEXT): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * A compact one-line JSON rendering of any value, at most `max` characters; never throws.
 * It stops writing once `max` is reached, so its cost is bounded by `max`, not by the value:
 * a live argument preview of megabytes costs the same as a small one (a `JSON.stringify` of
 * the whole value per `call.previewed` made a streamed argument quadratic).
 */
export function brief(value: unknown, max = MAX_TEXT): string {
  if (typeof value === "string")
    return value.length > LONG_STRING ? `[${value.length} characters]` : clip(value, max);
  const out = { text: "", max };
  try {
    writeBrief(value, out, 0);
  } catch (err) {
    if (err !== FULL) return "[unserialisable]";
  }
  return clip(out.text, max);
}

const FULL = Symbol("full");

/**
 * Past this length a string is shown by its length only. Reading any character of a string that
 * is still growing (a live argument preview holds the open string as a V8 rope) copies all of
 * it, so a brief of a preview per streamed delta was quadratic in the argument. Its `.length`
 * costs nothing.
 */
export const LONG_STRING = 64 * 1024;

function writeBrief(value: unknown, out: { text: string; max: number }, depth: number): void {
  if (out.text.length > out.max) throw FULL;
  if (typeof value === "string") {
    if (value.length > LONG_STRING) out.text += JSON.stringify(`[${value.length} characters]`);
    else out.text += JSON.stringify(value.length > out.max ? value.slice(0, out.max) : value);
    return;
  }
  if (typeof value === "number") {
    out.text += Number.isFinite(value) ? String(value) : "null";
    return;
  }
  if (typeof value === "boolean" || typeof value === "bigint") {
    out.text += String(value);
    return;
  }
  if (value === null || typeof value !== "object") {
    out.text += "null";
    return;
  }
  if (depth >= 16) {
    out.text += "…";
    return;
  }
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === "function") {
    writeBrief(toJSON.call(value, ""), out, depth);
    return;
  }
  if (Array.isArray(value)) {
    out.text += "[";
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out.text += ",";
      writeBrief(value[i], out, depth + 1);
    }
    out.text += "]";
    return;
  }
  out.text += "{";
  let first = true;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const item = (value as Record<string, unknown>)[key];
    if (item === undefined || typeof item === "function" || typeof item === "symbol") continue;
    out.text += `${first ? "" : ","}${JSON.stringify(key.length > out.max ? key.slice(0, out.max) : key)}:`;
    first = false;
    writeBrief(item, out, depth + 1);
  }
  out.text += "}";
}

/** A state value as one string: `"a"`, `{a:"x"}` → `"a.x"`, parallel regions joined by `, `. */
export function stateString(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === null || typeof value !== "object") return "";
  const parts: string[] = [];
  for (const [key, child] of Object.entries(value as Record<string, unknown>)) {
    const inner = stateString(child);
    parts.push(inner ? `${key}.${inner}` : key);
  }
  return parts.join(", ");
}

interface ActorLike {
  id?: string;
  sessionId?: string;
  _parent?: { sessionId?: string };
  logic?: { id?: unknown };
  options?: { input?: unknown };
}

/**
 * The id the inspector shows. A tool call's actor is named after its slot in the batch
 * (`slot0`, …: bounded child ids, see `freeSlots` in machines/batch.machine.ts); the inspector
 * names it by the call id in its input, which is what the timeline and agent events use. An
 * actor created without an id of its own (XState then uses its session id, `x:0`) is named
 * after its machine: the coordinator is `coordinator`, live as in a replay.
 */
function readableId(ref: ActorLike, sid: string): string {
  const logicId = ref.logic?.id;
  if (typeof logicId === "string" && /toolcall/i.test(logicId)) {
    const input = ref.options?.input as { callId?: unknown } | undefined;
    if (typeof input?.callId === "string") return input.callId;
  }
  if ((ref.id === undefined || ref.id === sid) && typeof logicId === "string" && logicId) {
    return logicId;
  }
  return ref.id ?? sid;
}

function wakeOf(snapshot: { context?: unknown }): string | null | undefined {
  const context = snapshot.context;
  if (context === null || typeof context !== "object" || !("pendingWake" in context)) {
    return undefined;
  }
  const wake = (context as { pendingWake: unknown }).pendingWake;
  if (wake === null || wake === undefined) return null;
  if (typeof wake === "object" && "scope" in wake) return String(wake.scope);
  if (typeof wake === "object" && "seq" in wake) return "rung";
  return brief(wake, 60);
}

/**
 * Converts one XState inspection event into at most one record, or `undefined` when it says
 * nothing new. `last` remembers each actor's last (state, status, wake) so that snapshots
 * which change nothing visible are dropped; entries are removed when the actor stops.
 * Reads only `value`, `status` and `context.pendingWake` of a snapshot.
 */
export function inspectionRecord(
  event: InspectionEvent,
  t: number,
  last: Map<string, string>,
): InspectRecord | undefined {
  const ref = event.actorRef as unknown as ActorLike;
  const sid = ref.sessionId ?? "?";
  const id = readableId(ref, sid);
  switch (event.type) {
    case "@xstate.actor": {
      const logicId = ref.logic?.id;
      const machine = typeof logicId === "string" ? logicId : undefined;
      const parent = ref._parent?.sessionId;
      return {
        k: "actor",
        t,
        sid,
        id,
        ...(parent ? { parent } : {}),
        ...(machine ? { machine } : {}),
      };
    }
    case "@xstate.snapshot": {
      const snapshot = event.snapshot as { value?: unknown; status?: string; context?: unknown };
      const state = stateString(snapshot.value);
      const status = snapshot.status ?? "active";
      const wake = wakeOf(snapshot);
      const key = `${state}|${status}|${wake ?? ""}`;
      if (last.get(sid) === key) return undefined;
      if (status === "active") last.set(sid, key);
      else last.delete(sid);
      return { k: "snap", t, sid, id, state, status, ...(wake !== undefined ? { wake } : {}) };
    }
    case "@xstate.event": {
      const from = (event.sourceRef as unknown as ActorLike | undefined)?.sessionId;
      const type = typeof event.event?.type === "string" ? event.event.type : "?";
      return { k: "ev", t, sid, id, type, ...(from ? { from } : {}) };
    }
    default:
      return undefined;
  }
}

/**
 * An AgentEvent made small for the wire: tool arguments, results and texts are clipped to
 * `MAX_TEXT` characters. The event's shape (type and ids) is kept. Every type has its case
 * (a new one fails `tsc` at the `never` below).
 */
export function agentRecord(event: AgentEvent): InspectRecord {
  let e: AgentEvent = event;
  switch (event.type) {
    case "turn.started":
      e = { ...event, input: clip(event.input) };
      break;
    case "call.started":
      e = { ...event, args: brief(event.args) };
      break;
    case "call.updated":
      e = { ...event, progress: brief(event.progress, 120) };
      break;
    case "call.previewed":
      e = { ...event, preview: brief(event.preview, 120) };
      break;
    case "call.settled":
      e = { ...event, result: smallResult(event.result) };
      break;
    case "batch.committed":
      e = { ...event, calls: event.calls.map((c) => ({ ...c, result: smallResult(c.result) })) };
      break;
    case "message.committed":
      e = {
        ...event,
        text: clip(event.text),
        toolCalls: event.toolCalls.map((c) => ({ ...c, arguments: clip(c.arguments, 120) })),
      };
      break;
    case "text.streamed":
      e = { ...event, text: clip(event.text, 2000) };
      break;
    case "attempt.ended":
      if (event.error !== undefined) e = { ...event, error: clip(event.error) };
      break;
    case "retry.scheduled":
      e = {
        ...event,
        reason: clip(event.reason),
        ...(event.fallback ? { fallback: clip(event.fallback) } : {}),
      };
      break;
    case "turn.cancel-acknowledged":
      e = { ...event, reason: clip(event.reason) };
      break;
    case "turn.ended":
      if (event.reason !== undefined) e = { ...event, reason: clip(event.reason) };
      break;
    case "permission.requested":
      e = { ...event, request: { ...event.request, args: brief(event.request.args) } };
      break;
    case "permission.decided": {
      const d = event.decision;
      const decision =
        d.type === "declined"
          ? { ...d, reason: clip(d.reason) }
          : d.type === "corrected"
            ? { ...d, feedback: clip(d.feedback) }
            : d;
      e = { ...event, decision };
      break;
    }
    case "log.written":
      e = { ...event, message: clip(event.message) };
      break;
    case "context.compacted":
      if (event.reason !== undefined) e = { ...event, reason: clip(event.reason) };
      break;
    case "acceptance.checked":
      e = {
        ...event,
        evidence: {
          ...event.evidence,
          checks: event.evidence.checks.map((c) => ({ ...c, output: clip(c.output, 400) })),
        },
      };
      break;
    case "follow-up.sent":
    case "acceptance.started":
    case "check.started":
    case "check.ended":
    case "context.measured":
    case "attempt.started":
    case "attempt.queued":
    case "attempt.admitted":
    case "loop.detected":
    case "call.queued":
    case "call.stop-requested":
    case "turn.execution-stopped":
    case "inbox.received":
    case "inbox.consumed":
      break; // ids and enums only: small already
    default: {
      const unhandled: never = event;
      void unhandled;
    }
  }
  return { k: "agent", t: event.at, e };
}

function smallResult<R extends { ok: boolean }>(result: R): R {
  if ("content" in result && typeof result.content === "string") {
    return { ...result, content: clip(result.content) };
  }
  if ("message" in result && typeof result.message === "string") {
    return { ...result, message: clip(result.message) };
  }
  return result;
}
