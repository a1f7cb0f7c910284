/**
 * Shared fixtures for the session tests (not a test file): a counting clock, a seeded log
 * opener and entry builders for a typical step (attempt → assistant message → calls).
 */

import { z } from "zod";
import { seededIds } from "../actors/ids.ts";
import type { ChatToolCall } from "../contracts/chat.ts";
import type { Clock } from "../contracts/clock.ts";
import type { AssistantPart, ToolCallPart } from "../contracts/messages.ts";
import type { EntryInput } from "../session/entries.ts";
import { SessionLog } from "../session/log.ts";
import type { SessionStore } from "../session/store.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { defineTool } from "../tools/define-tool.ts";

/** A low-risk tool that returns its `text` (the sessions' one-step workload). */
export const echo = defineTool({
  name: "echo",
  description: "Echoes.",
  parameters: z.object({ text: z.string() }),
  traits: { concurrencySafe: true, risk: "low" },
  execute: ({ text }) => text,
});

/** A clock whose `now()` advances by 1 ms per call; timers are not used by the log. */
export function countingClock(start = 1_000): Clock {
  let t = start;
  return { now: () => t++, setTimeout: () => 0, clearTimeout: () => {} };
}

export function openLog(
  store: SessionStore = memoryStore(),
  sessionId = "s1",
  seed = 1,
): Promise<SessionLog> {
  return SessionLog.open({ sessionId, store, clock: countingClock(), ids: seededIds(seed) });
}

export function call(id: string, name = "tool", args = "{}"): ToolCallPart {
  return { type: "tool-call", id, name, arguments: args };
}

/** The OpenAI Chat shape of {@link call} (what `messages()` shows). */
export function chatCall(id: string, name = "tool", args = "{}"): ChatToolCall {
  return { id, type: "function", function: { name, arguments: args } };
}

/** An assistant message's neutral parts: the text (when not empty), then the calls. */
export function parts(text: string, calls: readonly ToolCallPart[] = []): AssistantPart[] {
  return text === "" ? [...calls] : [{ type: "text", text }, ...calls];
}

export const user = (text: string): EntryInput => ({ type: "user_message", text });

export function assistant(
  attemptId: string,
  text: string,
  calls: ToolCallPart[] = [],
  turnId = "t1",
): EntryInput {
  return {
    type: "assistant_message",
    turnId,
    attemptId,
    content: parts(text, calls),
    finishReason: calls.length ? "tool_calls" : "stop",
  };
}

export function started(callId: string, idempotent = false, name = "tool"): EntryInput {
  return {
    type: "call_started",
    callId,
    name,
    args: {},
    idempotencyKey: `key-${callId}`,
    idempotent,
  };
}

export function result(callId: string, content: string, name = "tool"): EntryInput {
  return { type: "call_result", callId, name, outcome: "completed", result: { ok: true, content } };
}

/** Appends one completed step: attempt start, assistant message, attempt end. */
export function step(
  log: SessionLog,
  attemptId: string,
  text: string,
  calls: ToolCallPart[] = [],
  turnId = "t1",
) {
  log.append({ type: "attempt_start", turnId, attemptId, step: 0 });
  const message = log.append(assistant(attemptId, text, calls, turnId));
  log.append({ type: "attempt_end", attemptId, status: "completed" });
  return message;
}
