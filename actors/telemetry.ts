// OpenTelemetry traces of a Keel agent, built from the session events (contracts/events.ts) as
// the inspector's feed is. `@opentelemetry/api` is an optional peer: imported only by
// `openTelemetry()`, so an agent without telemetry never loads it.

import { createRequire } from "node:module";
import type { AgentEvent, AgentEventOf } from "../contracts/events.ts";
import { loadPeer } from "../contracts/optional-peer.ts";
import type { CallOutcome } from "../contracts/status.ts";
import type { ToolResult } from "../contracts/tool-result.ts";
import type { TraceContext } from "../tools/types.ts";
import { openCallScope } from "./call-scope.ts";
import {
  type AttributeValue,
  clip,
  json,
  MAX_NAME_CHARS,
  type OtelApi,
  type SpanLike,
  type TracerLike,
} from "./telemetry-spans.ts";

const require = createRequire(import.meta.url);

// The API's enums, by value (stable across 1.x): SpanKind and SpanStatusCode.
const INTERNAL = 0;
const CLIENT = 2;
const ERROR = 2;

export interface TelemetryOptions {
  /**
   * The tracer spans go to. Default: `trace.getTracer("keel")` of the global tracer provider,
   * so a provider registered before or after this call (the SDK's `register()`) receives them.
   */
  tracer?: TracerLike;
  /**
   * Record message content, as the GenAI conventions' opt-in attributes: the prompt
   * (`gen_ai.input.messages` on the turn's span), each answer (`gen_ai.output.messages`), tool
   * arguments and results (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`), and the
   * text of errors and reasons (a failed tool's message, a provider's error, an interrupt's
   * reason), each cut to `MAX_CONTENT_ATTRIBUTE_CHARS` (16 KiB). Off, a span holds no content on any
   * path: an error is its code or kind only. Default: off, unless
   * `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
   */
  captureContent?: boolean;
}

/** A call that crash recovery settled when its session was reopened. */
export interface RecoveredCall {
  callId: string;
  name: string;
  outcome: CallOutcome;
  result: ToolResult;
  /** When the result was written (clock ms). */
  at: number;
}

/** What `createAgent({ telemetry })` takes: `openTelemetry()`'s result. */
export interface Telemetry {
  /** Called by `createAgent` once, with its model: the publisher of that agent's sessions. */
  forAgent(model: { name: string }): TelemetryPublisher;
}

/** Receives one agent's session events. Contract: both methods return quickly and never throw. */
export interface TelemetryPublisher {
  publish(event: AgentEvent): void;
  /** A reopened session's crash recovery settled `call` (its span says the outcome, e.g. unknown). */
  recovered(sessionId: string, call: RecoveredCall): void;
}

/**
 * The provider and model of a Keel model name (`openai:gpt-4o`, `anthropic.messages:claude…`):
 * the provider is the part before the first `:` (up to its first `.`), the model the rest.
 * This is a pure function.
 */
export function modelParts(name: string): { provider: string; model: string } {
  const colon = name.indexOf(":");
  if (colon < 0) return { provider: name, model: name };
  const prefix = name.slice(0, colon);
  return { provider: prefix.split(".")[0], model: name.slice(colon + 1) };
}

/**
 * Loads `@opentelemetry/api` and returns the telemetry to pass as `createAgent({ telemetry })`.
 * Spans, following the GenAI semantic conventions:
 * - `invoke_agent keel`, one per turn: `keel.turn.id`, `keel.turn.status`, the turn's token
 *   usage; its end status is an error when the turn failed;
 * - `chat <model>`, one per model request (a step), a child of its turn: provider, model,
 *   usage, finish reason, `error.type` when it failed; each retry (or continue) is an event on
 *   it, not a new span;
 * - `execute_tool <tool>`, one per tool call: tool name, call id, `keel.call.outcome`, and
 *   `error.type` (the result's code) when it did not complete. The tool runs inside it: its
 *   own spans nest under it (`ctx.traceContext`, and the active context). A call that crash
 *   recovery settled gets one too, outcome `unknown`, marked `keel.call.recovered`;
 * - `compaction`, one per compaction of the turn's history.
 * A turn whose span does not record (no tracer provider registered) costs a map lookup per
 * event after its first. Span times are the session clock's (`createAgent({ clock })`).
 * Throws, naming the package, when `@opentelemetry/api` is not installed.
 */
export async function openTelemetry(options: TelemetryOptions = {}): Promise<Telemetry> {
  const api = loadPeer<OtelApi>(
    require,
    "@opentelemetry/api",
    "Keel's telemetry (openTelemetry())",
  );
  const tracer = options.tracer ?? api.trace.getTracer("keel");
  const capture =
    options.captureContent ??
    process.env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT === "true";
  return {
    forAgent: (model) => createPublisher(api, tracer, capture, modelParts(model.name)),
  };
}

interface RequestTrace {
  span: SpanLike;
  step: number;
  /** The last attempt's failure, until a retry continues the request or the turn ends. */
  failure?: { at: number; error: string; type: string };
}

interface TurnTrace {
  span: SpanLike;
  context: TraceContext;
  request?: RequestTrace;
  input: number;
  output: number;
}

interface CallTrace {
  span: SpanLike;
  close: () => void;
}

/** One session's open spans. */
interface SessionTrace {
  turns: Map<string, TurnTrace | null>; // null: a turn whose span does not record
  current?: TurnTrace;
  requests: Map<string, RequestTrace>; // by attempt id
  calls: Map<string, CallTrace>;
}

function createPublisher(
  api: OtelApi,
  tracer: TracerLike,
  capture: boolean,
  model: { provider: string; model: string },
): TelemetryPublisher {
  const sessions = new Map<string, SessionTrace>();
  /** An error's or a reason's text with capture on (bounded); without, only `code`. */
  const said = (text: string | undefined, code: string) => (capture && text ? clip(text) : code);
  const sessionOf = (id: string) => {
    let s = sessions.get(id);
    if (!s) {
      s = { turns: new Map(), requests: new Map(), calls: new Map() };
      sessions.set(id, s);
    }
    return s;
  };

  const endRequest = (s: SessionTrace, turn: TurnTrace, at: number) => {
    const request = turn.request;
    if (!request) return;
    turn.request = undefined;
    const failure = request.failure;
    if (failure) {
      request.span.setAttribute("error.type", failure.type);
      request.span.setStatus({ code: ERROR, message: failure.error });
    }
    request.span.end(failure?.at ?? at);
    for (const [id, r] of s.requests) if (r === request) s.requests.delete(id);
  };

  const startCall = (
    s: SessionTrace,
    turn: TurnTrace | undefined,
    sessionId: string,
    e: { callId: string; name: string; args?: unknown },
    at: number,
    root?: boolean,
  ): CallTrace => {
    const attributes: Record<string, AttributeValue> = {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": clip(e.name, MAX_NAME_CHARS),
      "gen_ai.tool.call.id": clip(e.callId, MAX_NAME_CHARS),
      "gen_ai.tool.type": "function",
    };
    if (capture && e.args !== undefined) attributes["gen_ai.tool.call.arguments"] = json(e.args);
    const parent = root || !turn ? api.context.active() : turn.context;
    const span = tracer.startSpan(
      `execute_tool ${clip(e.name, MAX_NAME_CHARS)}`,
      { kind: INTERNAL, startTime: at, attributes },
      parent,
    );
    const context = api.trace.setSpan(parent, span);
    const close = root
      ? () => {}
      : openCallScope(sessionId, e.callId, {
          context,
          run: (fn) => api.context.with(context, fn),
        });
    const call = { span, close };
    if (!root) s.calls.set(e.callId, call);
    return call;
  };

  const settleCall = (
    call: CallTrace,
    e: { outcome: CallOutcome; result: ToolResult },
    at: number,
  ) => {
    call.close();
    const { span } = call;
    span.setAttribute("keel.call.outcome", e.outcome);
    if (!e.result.ok) {
      span.setAttribute("error.type", e.result.code);
      span.setStatus({ code: ERROR, message: said(e.result.message, e.result.code) });
    }
    if (capture) {
      span.setAttribute(
        "gen_ai.tool.call.result",
        e.result.ok
          ? clip(e.result.content)
          : json({ code: e.result.code, message: clip(e.result.message) }),
      );
    }
    span.end(at);
  };

  const turnStarted = (s: SessionTrace, e: AgentEventOf<"turn.started">) => {
    const attributes: Record<string, AttributeValue> = {
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "keel",
      "gen_ai.conversation.id": e.sessionId,
      "keel.turn.id": e.turnId,
    };
    if (capture) {
      attributes["gen_ai.input.messages"] = json([
        { role: "user", parts: [{ type: "text", content: clip(e.input) }] },
      ]);
    }
    const parent = api.context.active();
    const span = tracer.startSpan(
      "invoke_agent keel",
      { kind: INTERNAL, startTime: e.at, attributes },
      parent,
    );
    if (!span.isRecording()) {
      s.turns.set(e.turnId, null);
      return;
    }
    const turn = { span, context: api.trace.setSpan(parent, span), input: 0, output: 0 };
    s.turns.set(e.turnId, turn);
    s.current = turn;
  };

  const turnEnded = (s: SessionTrace, e: AgentEventOf<"turn.ended">, turn: TurnTrace) => {
    endRequest(s, turn, e.at);
    const { span } = turn;
    span.setAttribute("keel.turn.status", e.status);
    if (e.reason && capture) span.setAttribute("keel.turn.reason", clip(e.reason));
    if (e.code) span.setAttribute("keel.turn.code", e.code);
    span.setAttribute("gen_ai.usage.input_tokens", turn.input);
    span.setAttribute("gen_ai.usage.output_tokens", turn.output);
    if (e.status === "failed")
      span.setStatus({ code: ERROR, message: said(e.reason, e.code ?? "failed") });
    span.end(e.at);
    s.turns.delete(e.turnId);
    if (s.current === turn) s.current = undefined;
  };

  const attemptStarted = (s: SessionTrace, e: AgentEventOf<"attempt.started">, turn: TurnTrace) => {
    const open = turn.request;
    if (open && open.step === e.step && !open.failure) {
      // A retry or continue of the same request: one span, the attempt is an event on it.
      open.span.addEvent("keel.attempt.started", { "keel.attempt.id": e.attemptId }, e.at);
      s.requests.set(e.attemptId, open);
      return;
    }
    endRequest(s, turn, e.at);
    const span = tracer.startSpan(
      `chat ${model.model}`,
      {
        kind: CLIENT,
        startTime: e.at,
        attributes: {
          "gen_ai.operation.name": "chat",
          "gen_ai.provider.name": model.provider,
          "gen_ai.request.model": model.model,
          "keel.step": e.step,
          "keel.attempt.id": e.attemptId,
        },
      },
      turn.context,
    );
    const request = { span, step: e.step };
    turn.request = request;
    s.requests.set(e.attemptId, request);
  };

  const handle = (e: AgentEvent) => {
    const s = sessions.get(e.sessionId);
    if (e.type === "turn.started") {
      turnStarted(sessionOf(e.sessionId), e);
      return;
    }
    if (!s) return;
    switch (e.type) {
      case "attempt.started": {
        const turn = s.turns.get(e.turnId);
        if (turn) attemptStarted(s, e, turn);
        return;
      }
      case "attempt.ended": {
        const request = s.requests.get(e.attemptId);
        if (!request || e.status === "completed") return;
        const type = e.errorKind ?? e.status;
        // A provider's error text can quote the request, a key or a URL: content.
        const error = said(e.error, type);
        request.failure = { at: e.at, error, type };
        request.span.addEvent(
          "keel.attempt.failed",
          {
            "keel.attempt.id": e.attemptId,
            "keel.attempt.status": e.status,
            "error.type": type,
            ...(capture && { "error.message": error }),
          },
          e.at,
        );
        return;
      }
      case "retry.scheduled": {
        const request = s.requests.get(e.attemptId);
        if (!request) return;
        request.failure = undefined;
        request.span.addEvent(
          "keel.retry",
          {
            "keel.retry.number": e.retry,
            "keel.retry.delay_ms": e.delayMs,
            "keel.retry.mode": e.mode,
            ...(capture && { "keel.retry.reason": clip(e.reason) }),
          },
          e.at,
        );
        return;
      }
      case "message.committed": {
        const request = s.requests.get(e.attemptId);
        const turn = s.turns.get(e.turnId);
        if (!request || !turn) return;
        const { span } = request;
        if (e.usage) {
          span.setAttribute("gen_ai.usage.input_tokens", e.usage.inputTokens);
          span.setAttribute("gen_ai.usage.output_tokens", e.usage.outputTokens);
          turn.input += e.usage.inputTokens;
          turn.output += e.usage.outputTokens;
        }
        if (e.finishReason) span.setAttribute("gen_ai.response.finish_reasons", [e.finishReason]);
        if (capture) {
          const parts = [
            ...(e.text ? [{ type: "text", content: clip(e.text) }] : []),
            ...e.toolCalls.map((c) => ({
              type: "tool_call",
              id: c.id,
              name: clip(c.name, MAX_NAME_CHARS),
              arguments: typeof c.arguments === "string" ? clip(c.arguments) : c.arguments,
            })),
          ];
          span.setAttribute(
            "gen_ai.output.messages",
            json([
              {
                role: "assistant",
                parts,
                ...(e.finishReason ? { finish_reason: e.finishReason } : {}),
              },
            ]),
          );
        }
        request.failure = undefined;
        endRequest(s, turn, e.at);
        return;
      }
      case "call.started": {
        const turn = s.turns.get(e.turnId);
        if (turn) startCall(s, turn, e.sessionId, e, e.at);
        return;
      }
      case "call.stop-requested":
        s.calls.get(e.callId)?.span.addEvent("keel.call.stop_requested", {}, e.at);
        return;
      case "call.settled": {
        const turn = s.turns.get(e.turnId);
        if (!turn) return;
        // A call refused before it ran (unknown tool, cut message, cancelled while queued)
        // has no start: its span is a point at its result.
        // An unknown tool's name is the model's text, not a tool's: content.
        const named =
          !capture && !e.result.ok && e.result.code === "UNKNOWN_TOOL"
            ? { ...e, name: "(unknown tool)" }
            : e;
        const call = s.calls.get(e.callId) ?? startCall(s, turn, e.sessionId, named, e.at);
        s.calls.delete(e.callId);
        settleCall(call, e, e.at);
        return;
      }
      case "context.compacted": {
        const turn = s.current;
        if (!turn) return;
        const span = tracer.startSpan(
          "compaction",
          {
            kind: INTERNAL,
            startTime: e.at - (e.durationMs ?? 0),
            attributes: {
              "keel.compaction.mode": e.mode,
              "keel.compaction.ok": e.ok,
              ...(e.tokensBefore !== undefined
                ? { "keel.compaction.tokens_before": e.tokensBefore }
                : {}),
              ...(e.tokensAfter !== undefined
                ? { "keel.compaction.tokens_after": e.tokensAfter }
                : {}),
            },
          },
          turn.context,
        );
        if (!e.ok) span.setStatus({ code: ERROR, message: said(e.reason, "compaction failed") });
        span.end(e.at);
        return;
      }
      case "turn.cancel-acknowledged": {
        const turn = s.turns.get(e.turnId);
        turn?.span.addEvent(
          "keel.turn.cancel_acknowledged",
          capture ? { "keel.reason": clip(e.reason) } : {},
          e.at,
        );
        return;
      }
      case "turn.execution-stopped":
        s.turns.get(e.turnId)?.span.addEvent("keel.turn.execution_stopped", {}, e.at);
        return;
      case "loop.detected":
        s.turns.get(e.turnId)?.span.addEvent(
          "keel.loop_detected",
          {
            "gen_ai.tool.name": clip(e.tool, MAX_NAME_CHARS),
            "keel.loop.repeats": e.repeats,
            "keel.loop.action": e.action,
          },
          e.at,
        );
        return;
      case "turn.ended": {
        const turn = s.turns.get(e.turnId);
        if (turn) turnEnded(s, e, turn);
        else s.turns.delete(e.turnId);
        if (s.turns.size === 0 && s.calls.size === 0) sessions.delete(e.sessionId);
        return;
      }
      default:
        return;
    }
  };

  return {
    publish(event) {
      try {
        handle(event);
      } catch {
        // Contract: telemetry never throws into the runtime.
      }
    },
    recovered(sessionId, call) {
      try {
        const span = startCall(sessionOf(sessionId), undefined, sessionId, call, call.at, true);
        span.span.setAttribute("keel.call.recovered", true);
        span.span.setAttribute("gen_ai.conversation.id", sessionId);
        settleCall(span, call, call.at);
        if (sessions.get(sessionId)?.turns.size === 0) sessions.delete(sessionId);
      } catch {
        // Contract: never throws.
      }
    },
  };
}
