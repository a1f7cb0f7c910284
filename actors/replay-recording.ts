// What a stored session's log recorded from outside Keel (the model's answers, the tools'
// results, the inputs), played back to a replay: a Model that answers from the recording and
// tools that return the recorded results. Nothing here decides what the session does.

import { z } from "zod";
import type { AssistantPart, ToolCallPart } from "../contracts/messages.ts";
import { type Model, ModelError, type ModelEvent, type ModelRequest } from "../contracts/model.ts";
import type { PermissionReply, PermissionRequest } from "../contracts/permission.ts";
import type { ToolResult } from "../contracts/tool-result.ts";
import type { EntryOf, LogEntry } from "../session/entries.ts";
import { withoutRepairNote } from "../tools/tool-output.ts";
import type { ToolDefinition } from "../tools/types.ts";

/**
 * The replay's side of a gate: before the recording's next answer is given, the inputs the
 * recording holds before it are posted and the time moves to when the answer came.
 * Contract: resolves once those inputs are in the log; never rejects.
 */
export type ReplayGate = (at: number) => Promise<void>;

/** One model request of the recording, in the order the session made them. */
type Response =
  | {
      kind: "attempt";
      start: EntryOf<"attempt_start">;
      end?: EntryOf<"attempt_end">;
      message?: EntryOf<"assistant_message">;
      /** For an attempt that did not complete: what the recording did next. */
      sequel: "retry" | "overflow" | "abort" | "end";
      /** Before a retry: how long the recording waited (ms). */
      waitMs: number;
    }
  | { kind: "summary"; entry: EntryOf<"compaction"> };

/** What the replay plays back, read from the recorded entries. */
export interface Recording {
  sessionId: string;
  /** The model requests' answers, in order. */
  responses: Response[];
  /** Each executed call's recorded result (with its time), by call id, in log order. */
  results: Map<string, EntryOf<"call_result">[]>;
  /** The inputs, in log order (each is posted again, with its recorded id). */
  inputs: EntryOf<"inbox">[];
  /** The instructions the session first ran with, when its log records some. */
  instructions: string | undefined;
  /** Every tool name the log's turns offered or its calls named. */
  toolNames: Set<string>;
  /** The permission decisions a reply made, by call id, in log order. */
  replies: Map<string, EntryOf<"permission_decision">[]>;
}

/** Reads what a replay needs from a stored session's entries. This is a pure function. */
export function readRecording(sessionId: string, entries: readonly LogEntry[]): Recording {
  const responses: Response[] = [];
  const results = new Map<string, EntryOf<"call_result">[]>();
  const started = new Set<string>();
  const inputs: EntryOf<"inbox">[] = [];
  const attempts = new Map<string, Extract<Response, { kind: "attempt" }>>();
  let instructions: string | undefined;
  const toolNames = new Set<string>();
  const replies = new Map<string, EntryOf<"permission_decision">[]>();
  for (const [index, entry] of entries.entries()) {
    switch (entry.type) {
      case "permission_decision":
        if (entry.source.type === "reply") {
          replies.set(entry.callId, [...(replies.get(entry.callId) ?? []), entry]);
        }
        break;
      case "turn_start":
        for (const name of Object.keys(entry.offered ?? {})) toolNames.add(name);
        for (const name of entry.tools?.tools ?? []) toolNames.add(name);
        break;
      case "attempt_start": {
        const attempt: Extract<Response, { kind: "attempt" }> = {
          kind: "attempt",
          start: entry,
          sequel: "end",
          waitMs: 0,
        };
        attempts.set(entry.attemptId, attempt);
        responses.push(attempt);
        break;
      }
      case "assistant_message": {
        const attempt = attempts.get(entry.attemptId);
        if (attempt) attempt.message = entry;
        break;
      }
      case "attempt_end": {
        const attempt = attempts.get(entry.attemptId);
        if (!attempt) break;
        attempt.end = entry;
        if (entry.status !== "completed") Object.assign(attempt, whatFollowed(entries, index));
        break;
      }
      case "compaction":
        // Its summary was asked for after the attempts logged before it, before the next one.
        responses.push({ kind: "summary", entry });
        break;
      case "call_started":
        started.add(entry.callId);
        toolNames.add(entry.name);
        break;
      case "call_result":
        if (started.delete(entry.callId)) {
          results.set(entry.callId, [...(results.get(entry.callId) ?? []), entry]);
        }
        break;
      case "inbox":
        inputs.push(entry);
        break;
      case "settings":
        if (instructions === undefined && typeof entry.settings.instructions === "string") {
          instructions = entry.settings.instructions;
        }
        break;
    }
  }
  return { sessionId, responses, results, inputs, instructions, toolNames, replies };
}

/** What the recording did after the attempt that ended at `index` without completing. */
function whatFollowed(
  entries: readonly LogEntry[],
  index: number,
): { sequel: "retry" | "overflow" | "abort" | "end"; waitMs: number } {
  const end = entries[index];
  // An interrupt between the attempt's start and its end: the attempt was aborted.
  for (let i = index - 1; i >= 0 && entries[i].type !== "attempt_start"; i--) {
    const e = entries[i];
    if (e.type === "inbox" && e.lane === "interrupt") return { sequel: "abort", waitMs: 0 };
  }
  for (let i = index + 1; i < entries.length; i++) {
    const e = entries[i];
    if (e.type === "attempt_start") return { sequel: "retry", waitMs: Math.max(0, e.at - end.at) };
    if (e.type === "compaction") return { sequel: "overflow", waitMs: 0 };
    if (e.type === "turn_end") return { sequel: "end", waitMs: 0 };
  }
  return { sequel: "end", waitMs: 0 };
}

/**
 * A Model that answers each request with the recording's next one: a completed attempt's
 * message (its reasoning, text and tool calls with their recorded ids, usage and finish reason;
 * a continuation's text without the prefix it continued), a failed attempt's partial output and
 * then an error of the class its sequel implies (retried: a 503 whose `retry-after-ms` is the
 * recorded wait; compacted: a context overflow; the turn ended: a 400), an interrupted attempt's
 * partial output and then nothing until the request is aborted, and a compaction's summary. A
 * request the recording has no answer for fails with a `protocol` ModelError saying so.
 */
export function recordedModel(
  recording: Recording,
  gate: ReplayGate,
  like: RecordedModelTraits = {},
): Model {
  const queue = [...recording.responses];
  const name = like.name ?? "replay";
  return {
    input: { images: true },
    capabilities: { continueFromPartial: true },
    ...like,
    name,
    stream(request: ModelRequest): AsyncIterable<ModelEvent> {
      return play(queue, request, gate, name);
    },
  };
}

/**
 * What the recorded session's model declared that decides what the runtime does with it: its
 * name (prices, provider slots), context window, output reserve and token counter (when to
 * compact), input and capabilities (Continue after a cut answer). The log does not record them.
 */
export type RecordedModelTraits = Partial<
  Pick<
    Model,
    | "name"
    | "provider"
    | "input"
    | "capabilities"
    | "contextWindow"
    | "maxOutputTokens"
    | "countTokens"
  >
>;

async function* play(
  queue: Response[],
  request: ModelRequest,
  gate: ReplayGate,
  name: string,
): AsyncGenerator<ModelEvent> {
  const summary = request.attemptId.startsWith("compaction");
  const next = queue[0];
  if (next === undefined || (next.kind === "summary") !== summary) {
    throw new ModelError(
      `replay model "${name}": the recording holds ${next === undefined ? "no more model answers" : next.kind === "summary" ? "a compaction's summary" : "an attempt"} where this session asked for ${summary ? "a summary" : "an answer"} (${request.attemptId})`,
      { kind: "protocol" },
    );
  }
  queue.shift();
  if (next.kind === "summary") {
    await gate(next.entry.at);
    yield { type: "text.delta", text: next.entry.summary };
    yield { type: "finish", reason: "stop" };
    return;
  }
  await gate(next.message?.at ?? next.end?.at ?? next.start.at);
  if (next.message) {
    yield* answer(next.message);
    return;
  }
  const end = next.end;
  yield* partsOf([
    ...(end?.partialReasoning ?? []),
    ...(end?.partialText ? [{ type: "text" as const, text: end.partialText }] : []),
    ...(end?.partialCalls ?? []),
  ]);
  if (next.sequel === "abort") {
    await aborted(request.signal);
    throw new ModelError(`replay model "${name}": request aborted`, { kind: "aborted" });
  }
  throw recordedError(end, next.sequel, next.waitMs);
}

function* answer(message: EntryOf<"assistant_message">): Generator<ModelEvent> {
  let skip = message.continuation?.prefixChars ?? 0;
  const parts: AssistantPart[] = [];
  for (const part of message.content) {
    if (part.type === "text" && skip > 0) {
      const cut = Math.min(skip, part.text.length);
      skip -= cut;
      if (part.text.length > cut) parts.push({ ...part, text: part.text.slice(cut) });
    } else parts.push(part);
  }
  yield* partsOf(parts);
  // A usage Keel estimated (the provider reported none) is estimated again, not reported.
  if (message.usage && !message.usageEstimated) yield { type: "usage", usage: message.usage };
  yield { type: "finish", reason: message.finishReason };
}

function* partsOf(parts: readonly AssistantPart[]): Generator<ModelEvent> {
  let index = 0;
  for (const [i, part] of parts.entries()) {
    if (part.type === "reasoning") {
      const key = `r${i}`;
      yield { type: "reasoning.delta", key, text: part.text };
      yield part.providerMetadata
        ? { type: "reasoning.end", key, providerMetadata: part.providerMetadata }
        : { type: "reasoning.end", key };
    } else if (part.type === "text") {
      yield part.providerMetadata
        ? { type: "text.delta", text: part.text, providerMetadata: part.providerMetadata }
        : { type: "text.delta", text: part.text };
    } else {
      yield* callOf(part, index++);
    }
  }
}

function* callOf(part: ToolCallPart, index: number): Generator<ModelEvent> {
  yield part.providerMetadata
    ? {
        type: "call.start",
        index,
        id: part.id,
        name: part.name,
        providerMetadata: part.providerMetadata,
      }
    : { type: "call.start", index, id: part.id, name: part.name };
  if (part.arguments !== "") yield { type: "call.delta", index, argumentsDelta: part.arguments };
  yield { type: "call.end", index };
}

/** The error a failed attempt's request ends with, of the class the recording's sequel implies. */
function recordedError(
  end: EntryOf<"attempt_end"> | undefined,
  sequel: "retry" | "overflow" | "abort" | "end",
  waitMs: number,
): ModelError {
  const message = end?.error ?? "the recorded request failed";
  const output = Boolean(end?.partialText) || (end?.partialCalls?.length ?? 0) > 0;
  if (sequel === "overflow") {
    return new ModelError(message, { kind: "http", status: 400, code: "context_length_exceeded" });
  }
  if (sequel === "retry" && output) return new ModelError(message, { kind: "stream_cut" });
  if (sequel === "retry") {
    return new ModelError(message, {
      kind: "http",
      status: 503,
      headers: { "retry-after-ms": String(Math.round(waitMs)) },
    });
  }
  return new ModelError(message, { kind: "http", status: 400, type: "invalid_request_error" });
}

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

/**
 * `tools` with each `execute` replaced by the recording: the call's recorded result is
 * returned as it was logged (less the repair note the runtime adds again), and calls running
 * together return in the order the log recorded their results (completion order); a call the
 * recording cancelled waits for its abort, one whose outcome was unknown never returns until
 * `settled` resolves. A call the recording never ran fails saying so. Names, descriptions,
 * parameters and traits are the given tools' own: they decide what the runtime does.
 */
export function recordedTools(
  tools: readonly ToolDefinition[],
  recording: Recording,
  gate: ReplayGate,
  settled: Promise<void>,
): ToolDefinition[] {
  const results = new Map([...recording.results].map(([id, list]) => [id, [...list]]));
  const inOrder = completionOrder();
  return tools.map((tool) => ({
    ...tool,
    execute: async (_args: unknown, ctx: { callId: string; signal: AbortSignal }) => {
      const recorded = results.get(ctx.callId)?.shift();
      if (recorded === undefined) {
        await gate(0);
        throw new Error(`the recording holds no result for call ${ctx.callId} of ${tool.name}`);
      }
      const done = inOrder.running(recorded.seq);
      try {
        await gate(recorded.at);
        if (recorded.outcome === "unknown") {
          done();
          await settled;
          throw new Error("the recorded outcome was unknown");
        }
        if (recorded.outcome === "cancelled") {
          await aborted(ctx.signal);
          throw new Error("cancelled");
        }
        await inOrder.turnOf(recorded.seq);
        return withoutRepairNote(recorded.result) as ToolResult;
      } finally {
        done();
      }
    },
  }));
}

/**
 * Orders the returns of calls that run at once by the seq of their recorded results: a call
 * returns once every running call whose result the log holds earlier has returned. Calls of
 * one batch all start before any is let through (one macrotask), so a later one cannot pass.
 */
function completionOrder() {
  const running = new Map<number, Promise<void>>();
  return {
    /** Registers a running call; the function it returns marks it returned (idempotent). */
    running(seq: number): () => void {
      let finish = () => {};
      running.set(
        seq,
        new Promise<void>((resolve) => {
          finish = resolve;
        }),
      );
      return () => {
        running.delete(seq);
        finish();
      };
    },
    /** Resolves when no running call's recorded result comes before `seq`. */
    async turnOf(seq: number): Promise<void> {
      await new Promise((resolve) => setImmediate(resolve));
      for (;;) {
        const earlier = [...running].find(([other]) => other < seq);
        if (earlier === undefined) return;
        await earlier[1];
      }
    },
  };
}

/**
 * Tools for a replay without the session's own: one per name the log's turns offered or its
 * calls named, with any arguments accepted and every call safe to run in parallel. What the
 * runtime does with the real tools' traits and schemas cannot be shown with them.
 */
export function standInTools(recording: Recording): ToolDefinition[] {
  return [...recording.toolNames]
    .filter((name) => name !== "read_result")
    .map((name) => ({
      name,
      description: `${name} (a stand-in: the replay was given no tools)`,
      parameters: z.looseObject({}),
      traits: { concurrencySafe: true, risk: "low" as const },
      execute: () => "",
    }));
}

/**
 * The embedder's side of permission requests, from the recording: a request is answered with the
 * reply the log records for its call (`allow_once`, `allow_always`, `deny`, or
 * `deny_with_feedback` with the recorded feedback), once the time and inputs before it are
 * reached; a request the recording has no reply for is answered `deny`, which the comparison
 * then reports.
 */
export function recordedApprover(
  recording: Recording,
  gate: ReplayGate,
): (request: PermissionRequest) => Promise<PermissionReply> {
  const replies = new Map([...recording.replies].map(([id, list]) => [id, [...list]]));
  return async (request) => {
    const recorded = replies.get(request.callId)?.shift();
    await gate(recorded?.at ?? 0);
    if (recorded === undefined || recorded.source.type !== "reply") return { type: "deny" };
    const reply = recorded.source.reply;
    if (reply === "deny_with_feedback") {
      // The broker says who declined before the reply's own feedback (actors/permissions.ts).
      const d = recorded.decision;
      const feedback = d.type === "corrected" ? d.feedback : "";
      return { type: reply, feedback: feedback.replace(/^the user declined this call: /, "") };
    }
    return { type: reply };
  };
}
