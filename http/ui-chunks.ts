/**
 * Keel's events as the AI SDK's UI message stream (its `UIMessageChunk`s, the shapes of the
 * `ai@6` line that runs on Node 20), one assistant message per turn: the turn's id is the
 * message's id, each model attempt a step. The table of what maps to what is in
 * docs/web-apps.md; events without a UI part go as `data-keel-<event>` parts. This is a pure
 * mapping: {@link UiTurnMapper} holds one turn's open parts and returns the chunks of each event.
 */
import type { AgentEvent, AgentEventOf } from "../contracts/events.ts";
import type { ReasoningPart } from "../contracts/messages.ts";
import type { ToolResult } from "../contracts/tool-result.ts";

/** The UI message chunks Keel writes (a subset of the AI SDK's `UIMessageChunk`). */
export type UiChunk =
  | { type: "start"; messageId: string }
  | { type: "start-step" }
  | { type: "finish-step" }
  | { type: "text-start" | "text-end" | "reasoning-start" | "reasoning-end"; id: string }
  | { type: "text-delta" | "reasoning-delta"; id: string; delta: string }
  | {
      type: "tool-input-available";
      toolCallId: string;
      toolName: string;
      input: unknown;
      dynamic: true;
    }
  | { type: "tool-approval-request"; approvalId: string; toolCallId: string }
  | { type: "tool-output-available"; toolCallId: string; output: unknown; dynamic: true }
  | { type: "tool-output-error"; toolCallId: string; errorText: string; dynamic: true }
  | { type: "tool-output-denied"; toolCallId: string }
  | { type: "finish"; finishReason?: "stop" | "length" | "error" | "other" }
  | { type: "abort"; reason: string }
  | { type: "error"; errorText: string }
  | { type: `data-keel-${string}`; id: string; data: unknown };

/** Events whose only UI form is a `data-keel-*` part (docs/web-apps.md). */
const DATA_EVENTS = new Set<AgentEvent["type"]>([
  "retry.scheduled",
  "loop.detected",
  "context.compacted",
  "acceptance.started",
  "check.ended",
  "follow-up.sent",
  "acceptance.checked",
  "turn.cancel-acknowledged",
]);

/** The reasoning of a committed message, read from the session (events do not stream it). */
export type ReasoningOf = (event: AgentEventOf<"message.committed">) => readonly ReasoningPart[];

/**
 * One turn's mapping from events to chunks. Feed it the session's events in order with
 * `map(event)`; it returns the chunks each adds (often none). `ended` turns true at the turn's
 * `turn.ended`, whose chunks close the message.
 */
export class UiTurnMapper {
  private stepOpen = false;
  private textId: string | undefined;
  private readonly calls = new Set<string>();
  private dataCount = 0;
  ended = false;

  constructor(
    readonly turnId: string,
    private readonly reasoningOf: ReasoningOf,
  ) {}

  /** The chunks that open the turn's message. */
  start(): UiChunk[] {
    return [{ type: "start", messageId: this.turnId }];
  }

  /** The chunks `event` adds to this turn's message. */
  map(event: AgentEvent): UiChunk[] {
    if (this.ended) return [];
    switch (event.type) {
      case "attempt.started":
        return event.turnId === this.turnId ? [...this.closeStep(), { type: "start-step" }] : [];
      case "text.streamed":
        return this.stepOpen ? this.text(event.attemptId, event.text) : [];
      case "attempt.ended":
        return event.status === "completed" || !this.stepOpen ? [] : this.failedAttempt(event);
      case "message.committed":
        return event.turnId === this.turnId ? this.committed(event) : [];
      case "permission.requested":
        return this.calls.has(event.request.callId)
          ? [
              {
                type: "tool-approval-request",
                approvalId: event.request.requestId,
                toolCallId: event.request.callId,
              },
            ]
          : [];
      case "call.settled":
        return this.calls.has(event.callId) ? [settledChunk(event.callId, event.result)] : [];
      case "turn.ended":
        return event.turnId === this.turnId ? this.end(event) : [];
      default:
        return DATA_EVENTS.has(event.type) ? [this.data(event)] : [];
    }
  }

  private text(attemptId: string, delta: string): UiChunk[] {
    if (delta.length === 0) return [];
    if (this.textId === attemptId) return [{ type: "text-delta", id: attemptId, delta }];
    this.textId = attemptId;
    return [
      { type: "text-start", id: attemptId },
      { type: "text-delta", id: attemptId, delta },
    ];
  }

  private closeText(): UiChunk[] {
    if (this.textId === undefined) return [];
    const id = this.textId;
    this.textId = undefined;
    return [{ type: "text-end", id }];
  }

  private closeStep(): UiChunk[] {
    if (!this.stepOpen) {
      this.stepOpen = true;
      return [];
    }
    return [...this.closeText(), { type: "finish-step" }];
  }

  private failedAttempt(event: AgentEventOf<"attempt.ended">): UiChunk[] {
    return [...this.closeText(), this.data(event)];
  }

  private committed(event: AgentEventOf<"message.committed">): UiChunk[] {
    const out: UiChunk[] = [];
    // Text that was not streamed (a model that answers whole) arrives with the message.
    if (this.textId === undefined && event.text.length > 0)
      out.push(...this.text(event.attemptId, event.text));
    out.push(...this.closeText());
    this.reasoningOf(event).forEach((part, i) => {
      const id = `${event.attemptId}.r${i}`;
      out.push({ type: "reasoning-start", id });
      if (part.text.length > 0) out.push({ type: "reasoning-delta", id, delta: part.text });
      out.push({ type: "reasoning-end", id });
    });
    for (const call of event.toolCalls) {
      this.calls.add(call.id);
      out.push({
        type: "tool-input-available",
        toolCallId: call.id,
        toolName: call.name,
        input: parsedArguments(call.arguments),
        dynamic: true,
      });
    }
    return out;
  }

  private end(event: AgentEventOf<"turn.ended">): UiChunk[] {
    this.ended = true;
    const out: UiChunk[] = [...this.closeText()];
    if (this.stepOpen) out.push({ type: "finish-step" });
    this.stepOpen = false;
    out.push(this.data(event));
    if (event.status === "cancelled")
      out.push({ type: "abort", reason: event.reason ?? "cancelled" });
    else if (event.status === "failed")
      out.push({ type: "error", errorText: event.reason ?? "the turn failed" });
    else
      out.push({ type: "finish", finishReason: event.status === "completed" ? "stop" : "length" });
    return out;
  }

  private data(event: AgentEvent): UiChunk {
    const { sessionId: _s, at: _a, type, ...data } = event;
    return {
      type: `data-keel-${type.replace(/\./g, "-")}`,
      id: `${this.turnId}.d${++this.dataCount}`,
      data,
    };
  }
}

/** A call's result as its UI chunk: output, error, or denied (a `DENIED` result). */
function settledChunk(toolCallId: string, result: ToolResult): UiChunk {
  if (result.ok)
    return { type: "tool-output-available", toolCallId, output: result.content, dynamic: true };
  if (result.code === "DENIED") return { type: "tool-output-denied", toolCallId };
  return { type: "tool-output-error", toolCallId, errorText: result.message, dynamic: true };
}

/** A call's raw argument text as the UI's `input`: parsed JSON, or the text when it is not JSON. */
export function parsedArguments(text: string): unknown {
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
