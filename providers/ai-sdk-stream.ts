// The stream side of the AI SDK adapter (`aiSdkModel` in ai-sdk-model.ts): V3 stream parts as
// Keel model events, the finish reason and usage held until the stream ends. Apart from the
// adapter's request loop so the part-by-part translation reads on its own; its errors go through
// ai-sdk-errors.ts.
import {
  JSONParseError,
  type LanguageModelV3StreamPart,
  type LanguageModelV3Usage,
  TypeValidationError,
} from "@ai-sdk/provider";
import type { Usage } from "../contracts/messages.ts";
import type { FinishReason, ModelEvent } from "../contracts/model.ts";
import { ModelError } from "../contracts/model.ts";
import { inStreamError } from "./ai-sdk-errors.ts";

const FINISH: Readonly<Record<string, FinishReason>> = {
  stop: "stop",
  length: "length",
  "content-filter": "content_filter",
  "tool-calls": "tool_calls",
  other: "stop",
};

/**
 * V3 stream parts → Keel model events; holds the finish until the stream ends. An `error` part
 * whose error is the package's own validation failure (a chunk it could not parse against its
 * schema: an event type or shape it does not know) goes to `skipped`, not thrown.
 */
export function partMapper(skipped: (error: unknown) => void) {
  const index = new Map<string, number>();
  const streamed = new Map<number, boolean>();
  let finish: { reason: FinishReason; usage: Usage } | undefined;

  const indexOf = (id: string) => {
    let i = index.get(id);
    if (i === undefined) {
      i = index.size;
      index.set(id, i);
    }
    return i;
  };

  return {
    get finished() {
      return finish !== undefined;
    },
    *push(part: LanguageModelV3StreamPart): Generator<ModelEvent> {
      switch (part.type) {
        case "text-start":
        case "text-end":
          if (part.providerMetadata)
            yield { type: "text.delta", text: "", providerMetadata: part.providerMetadata };
          return;
        case "text-delta":
          yield part.providerMetadata
            ? { type: "text.delta", text: part.delta, providerMetadata: part.providerMetadata }
            : { type: "text.delta", text: part.delta };
          return;
        case "reasoning-start":
        case "reasoning-delta": {
          const text = part.type === "reasoning-delta" ? part.delta : "";
          yield part.providerMetadata
            ? {
                type: "reasoning.delta",
                key: part.id,
                text,
                providerMetadata: part.providerMetadata,
              }
            : { type: "reasoning.delta", key: part.id, text };
          return;
        }
        case "reasoning-end":
          yield part.providerMetadata
            ? { type: "reasoning.end", key: part.id, providerMetadata: part.providerMetadata }
            : { type: "reasoning.end", key: part.id };
          return;
        case "tool-input-start": {
          if (part.providerExecuted) return;
          const i = indexOf(part.id);
          yield part.providerMetadata
            ? {
                type: "call.start",
                index: i,
                id: part.id,
                name: part.toolName,
                providerMetadata: part.providerMetadata,
              }
            : { type: "call.start", index: i, id: part.id, name: part.toolName };
          return;
        }
        case "tool-input-delta": {
          const i = index.get(part.id);
          if (i === undefined || part.delta === "") return;
          streamed.set(i, true);
          yield { type: "call.delta", index: i, argumentsDelta: part.delta };
          return;
        }
        case "tool-call": {
          if (part.providerExecuted) return;
          const known = index.has(part.toolCallId);
          const i = indexOf(part.toolCallId);
          if (!known)
            yield { type: "call.start", index: i, id: part.toolCallId, name: part.toolName };
          // The final input is authoritative when no delta carried it (e.g. a call without arguments).
          if (!streamed.get(i) && part.input !== "") {
            streamed.set(i, true);
            yield { type: "call.delta", index: i, argumentsDelta: part.input };
          }
          yield part.providerMetadata
            ? { type: "call.end", index: i, providerMetadata: part.providerMetadata }
            : { type: "call.end", index: i };
          return;
        }
        case "finish": {
          if (part.finishReason.unified === "error") {
            throw new ModelError(
              `the provider ended the response with an error (${part.finishReason.raw ?? "no reason"})`,
              {
                kind: "protocol",
              },
            );
          }
          // Every provider sets a raw reason (or a definite one) from its end-of-response
          // marker; "other" with none is the default its parser flushes when the body just ended.
          if (part.finishReason.unified === "other" && part.finishReason.raw === undefined) return;
          let reason = FINISH[part.finishReason.unified] ?? "stop";
          if (reason === "stop" && index.size > 0) reason = "tool_calls";
          finish = { reason, usage: toUsage(part.usage) };
          return;
        }
        case "error":
          if (TypeValidationError.isInstance(part.error) || JSONParseError.isInstance(part.error)) {
            skipped(part.error);
            return;
          }
          throw inStreamError(part.error);
        default:
          return; // stream-start, response-metadata, raw, file, source, provider-executed results
      }
    },
    *end(): Generator<ModelEvent> {
      if (!finish) return;
      yield { type: "usage", usage: finish.usage };
      yield { type: "finish", reason: finish.reason };
    },
  };
}

function toUsage(u: LanguageModelV3Usage): Usage {
  const usage: Usage = {
    inputTokens: u.inputTokens.total ?? 0,
    outputTokens: u.outputTokens.total ?? 0,
  };
  if (u.inputTokens.cacheRead !== undefined) usage.cachedInputTokens = u.inputTokens.cacheRead;
  if (u.outputTokens.reasoning !== undefined) usage.reasoningTokens = u.outputTokens.reasoning;
  return usage;
}

/**
 * The default `onSkippedPart`: one process warning (`KEEL_SKIPPED_PART`) of one line per kind of
 * skipped part (the chunk's `type`, e.g. a new SSE event), the first time this model skips one:
 * a validation error's own message runs over many lines and would repeat on every part.
 */
export function skippedPartWarning(provider: string): (error: unknown) => void {
  const said = new Set<string>();
  return (error) => {
    const kind = skippedKind(error);
    if (said.has(kind)) return;
    said.add(kind);
    const detail = (error instanceof Error ? error.message : String(error))
      .replace(/\s+/g, " ")
      .trim();
    process.emitWarning(
      `aiSdkModel: ${provider} sent a stream part of type ${JSON.stringify(kind)} it could not validate; it is skipped, and later parts of that type are skipped without a word (${detail.length > 160 ? `${detail.slice(0, 160)}…` : detail})`,
      { code: "KEEL_SKIPPED_PART" },
    );
  };
}

/** The skipped chunk's `type` (what a new SSE event is named), or the error's name. */
function skippedKind(error: unknown): string {
  const value = TypeValidationError.isInstance(error) ? error.value : undefined;
  const type = (value as { type?: unknown } | undefined)?.type;
  if (typeof type === "string") return type.slice(0, 80);
  const named = /"type"\s*:\s*"([^"]{1,80})"/.exec(
    error instanceof Error ? error.message.slice(0, 2000) : "",
  );
  return named ? named[1] : error instanceof Error ? error.name : "unknown";
}
