import type { AssistantPart, ToolCallPart } from "../contracts/messages.ts";
import { type Refusal, refuse } from "../contracts/refusal.ts";
import type { EntryOf, EntryType, LogEntry } from "./entries.ts";

/**
 * Redaction (docs/stores.md): an entry's content replaced, in the raw log, by a marker that says
 * why, keeping the entry's shape — its id, seq, parent, type and the turn, attempt, call and
 * inbox ids that pair it with other entries — so the log's branches, the projection's pairing of
 * calls with results and recovery read it as before. Pure functions; the stores and
 * `redactSession` (actors/redact-session.ts) apply them.
 */

/** Why and when entries were redacted; stamped on each redacted entry as `redacted`. */
export interface Redaction {
  reason: string;
  /** Clock ms of the redaction. */
  at: number;
}

/** The entry types that hold conversation content, and so can be redacted. */
export const REDACTABLE_TYPES: readonly EntryType[] = [
  "user_message",
  "inbox",
  "assistant_message",
  "attempt_end",
  "call_started",
  "call_result",
  "note",
  "context_edit",
  "compaction",
  "turn_aborted",
];

/** Longest redaction reason. */
export const MAX_REASON_CHARS = 200;

/** The text that stands for redacted content: `[redacted: <reason>]`. This is a pure function. */
export function redactionText(reason: string): string {
  return `[redacted: ${reason}]`;
}

/**
 * `reason` checked and trimmed: a non-empty line of at most {@link MAX_REASON_CHARS} characters
 * (it is shown to the model in place of the content). Throws a TypeError saying what is wrong.
 */
export function checkReason(reason: unknown): string {
  const text = typeof reason === "string" ? reason.trim() : "";
  if (text === "" || text.length > MAX_REASON_CHARS || /[\u0000-\u001f\u007f]/.test(text)) {
    throw new TypeError(
      `redact: reason must be one line of 1 to ${MAX_REASON_CHARS} characters (it replaces the content, e.g. "a pasted API key"), got ${typeof reason === "string" ? JSON.stringify(reason.slice(0, 80)) : typeof reason}`,
    );
  }
  return text;
}

/** The arguments text a redacted tool call carries: a JSON object, so providers accept it. */
export function redactedArguments(text: string): string {
  return JSON.stringify({ redacted: text });
}

/**
 * The redacted copy of `entry`: every field that can hold content the conversation produced
 * (text, parts, arguments, results, partial output, summaries, reasoning and the providers'
 * metadata of it) replaced by {@link redactionText} or dropped; the fields that give the log its
 * shape kept; `redacted: { reason, at }` added. Fields of the entry it does not know are dropped
 * (they could hold content). A redacted assistant message keeps its tool calls' ids and names,
 * with `{"redacted": "<marker>"}` as their arguments, so each call still pairs with its result.
 * Throws a TypeError for an entry type that holds no content ({@link REDACTABLE_TYPES}).
 * This is a pure function.
 */
export function redactEntry(entry: LogEntry, redaction: Redaction): LogEntry {
  const text = redactionText(redaction.reason);
  const base = {
    id: entry.id,
    parentId: entry.parentId,
    seq: entry.seq,
    at: entry.at,
    redacted: { reason: redaction.reason, at: redaction.at },
    // Which Keel wrote the log from here on is not content: a redacted entry keeps it.
    ...(entry.writer ? { writer: entry.writer } : {}),
  };
  const opt = <K extends string, V>(key: K, value: V | undefined) =>
    (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
  switch (entry.type) {
    case "user_message":
      return {
        ...base,
        type: entry.type,
        text,
        ...opt("turnId", entry.turnId),
        ...opt("inboxId", entry.inboxId),
      };
    case "inbox":
      return {
        ...base,
        type: entry.type,
        inboxId: entry.inboxId,
        source: entry.source,
        lane: entry.lane,
        body: text,
      };
    case "assistant_message":
      return {
        ...base,
        type: entry.type,
        turnId: entry.turnId,
        attemptId: entry.attemptId,
        content: redactParts(entry.content, text),
        finishReason: entry.finishReason,
        ...opt("usage", entry.usage),
        // What the response cost stays: a redaction must not give a budget back.
        ...opt("cost", entry.cost),
        ...opt("continuation", entry.continuation),
      };
    case "attempt_end": {
      const had =
        entry.partialText !== undefined ||
        (entry.partialReasoning?.length ?? 0) > 0 ||
        (entry.partialCalls?.length ?? 0) > 0;
      return {
        ...base,
        type: entry.type,
        attemptId: entry.attemptId,
        status: entry.status,
        ...opt("partialText", had ? text : undefined),
        ...opt(
          "partialCalls",
          entry.partialCalls?.map((c) => redactCall(c, text)),
        ),
        ...opt("error", entry.error),
      };
    }
    case "call_started":
      return {
        ...base,
        type: entry.type,
        callId: entry.callId,
        name: entry.name,
        args: text,
        idempotencyKey: entry.idempotencyKey,
        idempotent: entry.idempotent,
      };
    case "call_result":
      return {
        ...base,
        type: entry.type,
        callId: entry.callId,
        name: entry.name,
        outcome: entry.outcome,
        result: entry.result.ok
          ? { ok: true, content: text }
          : {
              ok: false,
              code: entry.result.code,
              message: text,
              retryable: entry.result.retryable,
            },
      };
    case "note":
      return { ...base, type: entry.type, text, ...opt("audience", entry.audience) };
    case "context_edit":
      return {
        ...base,
        type: entry.type,
        targetId: entry.targetId,
        replacement: entry.replacement === null ? null : text,
      };
    case "compaction":
      return {
        ...base,
        type: entry.type,
        summary: text,
        firstKeptId: entry.firstKeptId,
        ...(entry.usage ? { usage: entry.usage } : {}),
        ...(entry.cost !== undefined ? { cost: entry.cost } : {}),
        ...(entry.usageEstimated ? { usageEstimated: entry.usageEstimated } : {}),
      };
    case "turn_aborted":
      return { ...base, type: entry.type, turnId: entry.turnId, where: text };
    default:
      throw new TypeError(
        `redact: entry ${entry.id} is a ${entry.type} record, which holds no conversation content; entries of these types can be redacted: ${REDACTABLE_TYPES.join(", ")}`,
      );
  }
}

/**
 * An assistant message's parts redacted: reasoning dropped (its text and the provider's
 * signature or encrypted copy of it), the text parts one marker at the first text's place, each
 * call's arguments the marker as JSON; a message left with no part gets the marker as its text.
 */
function redactParts(parts: readonly AssistantPart[], text: string): AssistantPart[] {
  const out: AssistantPart[] = [];
  let placed = false;
  for (const p of parts) {
    if (p.type === "reasoning") continue;
    if (p.type === "text") {
      if (!placed) out.push({ type: "text", text });
      placed = true;
    } else out.push(redactCall(p, text));
  }
  if (out.length === 0) out.push({ type: "text", text });
  return out;
}

function redactCall(call: ToolCallPart, text: string): ToolCallPart {
  return { type: "tool-call", id: call.id, name: call.name, arguments: redactedArguments(text) };
}

/**
 * The entries to redact for a request to redact `ids`: each of them, and the other entries of
 * `entries` that hold a copy of its content, in `seq` order:
 * - a user message and the `inbox` entry of the same input (`inboxId`), either way;
 * - an assistant message and the `call_started` entries of its calls (their arguments), either
 *   way (a call's arguments are a tool-call part of its message: the whole message is
 *   redacted), and the `attempt_end` entries of its turn's failed attempts that kept partial
 *   output (the text it continued, or answers it replaced).
 * Refuses (`UNKNOWN_ENTRY`) an id that is not an entry of `entries` and (`NOT_REDACTABLE`) an
 * entry of a type that holds no content. This is a pure function.
 */
export function redactionTargets(
  entries: readonly LogEntry[],
  ids: readonly string[],
): { ok: true; ids: string[] } | Refusal<"UNKNOWN_ENTRY" | "NOT_REDACTABLE"> {
  const byId = new Map<string, LogEntry>();
  for (const e of entries) byId.set(e.id, e);
  const chosen = new Set<string>();
  for (const id of ids) {
    const e = byId.get(id);
    if (!e)
      return refuse(
        "UNKNOWN_ENTRY",
        `no entry ${JSON.stringify(id)} in this session; pass the ids of its entries (session.entries(), or keel show <session> --json)`,
      );
    if (!REDACTABLE_TYPES.includes(e.type))
      return refuse(
        "NOT_REDACTABLE",
        `entry ${id} is a ${e.type} record, which holds no conversation content; entries of these types can be redacted: ${REDACTABLE_TYPES.join(", ")} (to remove every trace of a session, delete it)`,
      );
    chosen.add(id);
  }
  const inputs = new Set<string>();
  const messages = new Map<string, EntryOf<"assistant_message">>();
  for (const id of [...chosen]) {
    const e = byId.get(id)!;
    if ((e.type === "user_message" || e.type === "inbox") && e.inboxId) inputs.add(e.inboxId);
    if (e.type === "assistant_message") messages.set(e.id, e);
    // A call's arguments are also in the message that asked for it: that message goes too.
    const asker = e.type === "call_started" ? askingMessage(e, byId) : undefined;
    if (asker && e.type === "call_started" && callIdsOf(asker).has(e.callId)) {
      chosen.add(asker.id);
      messages.set(asker.id, asker);
    }
  }
  const turns = new Set([...messages.values()].map((m) => m.turnId));
  const attemptsOfTurns = new Set<string>();
  for (const e of entries) {
    if (e.type === "attempt_start" && turns.has(e.turnId)) attemptsOfTurns.add(e.attemptId);
  }
  for (const e of entries) {
    if ((e.type === "user_message" || e.type === "inbox") && e.inboxId && inputs.has(e.inboxId))
      chosen.add(e.id);
    else if (e.type === "call_started" && messages.size > 0) {
      const asker = askingMessage(e, byId);
      if (asker && messages.has(asker.id) && callIdsOf(asker).has(e.callId)) chosen.add(e.id);
    } else if (
      e.type === "attempt_end" &&
      e.status !== "completed" &&
      attemptsOfTurns.has(e.attemptId) &&
      (e.partialText !== undefined ||
        (e.partialCalls?.length ?? 0) > 0 ||
        (e.partialReasoning?.length ?? 0) > 0)
    )
      chosen.add(e.id);
  }
  return { ok: true, ids: [...chosen].sort((a, b) => byId.get(a)!.seq - byId.get(b)!.seq) };
}

/** The nearest assistant message above `entry` on its branch (the one whose call it started). */
function askingMessage(
  entry: LogEntry,
  byId: ReadonlyMap<string, LogEntry>,
): EntryOf<"assistant_message"> | undefined {
  let at = entry.parentId === null ? undefined : byId.get(entry.parentId);
  while (at && at.type !== "assistant_message") {
    at = at.parentId === null ? undefined : byId.get(at.parentId);
  }
  return at;
}

function callIdsOf(message: EntryOf<"assistant_message">): Set<string> {
  const ids = new Set<string>();
  for (const p of message.content) if (p.type === "tool-call") ids.add(p.id);
  return ids;
}

/**
 * The files a `call_result` entry points to that hold its whole output (a spilled output's
 * `continuation.path`). This is a pure function.
 */
export function spilledFilesOf(entry: LogEntry): string[] {
  if (entry.type !== "call_result" || !entry.result.ok) return [];
  const path = entry.result.continuation?.path;
  return typeof path === "string" && path !== "" ? [path] : [];
}

/**
 * The frozen redacted copies of the entries `ids` of a session's log (`redactEntry`), for the
 * log to swap in. Throws for an id the log does not hold, and for an entry not yet durable: an
 * entry still queued would be written with its old content (flush first).
 */
export function redactDurable(
  ids: readonly string[],
  redaction: Redaction,
  log: { sessionId: string; get: (id: string) => LogEntry | undefined; durableSeq: number },
): LogEntry[] {
  return ids.map((id) => {
    const old = log.get(id);
    if (!old)
      throw new TypeError(`redact: no entry ${JSON.stringify(id)} in session ${log.sessionId}`);
    if (old.seq > log.durableSeq) {
      throw new Error(
        `session ${log.sessionId}: entry ${id} is not yet written; await log.flush() before redacting`,
      );
    }
    return Object.freeze(redactEntry(old, redaction));
  });
}

/**
 * Puts `entry` in place of the entry with its seq and id in `entries` (ascending seq), found by
 * binary search; does nothing when no such entry is there (it was released from memory).
 */
export function replaceBySeq(entries: LogEntry[], entry: LogEntry): void {
  let lo = 0;
  let hi = entries.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (entries[mid].seq < entry.seq) lo = mid + 1;
    else hi = mid;
  }
  if (entries[lo]?.id === entry.id) entries[lo] = entry;
}
