import type { ChatCompletionChunk } from "openai/resources/chat/completions";
import type { ProviderMetadata, Usage } from "../contracts/messages.ts";
import type { FinishReason, ModelEvent } from "../contracts/model.ts";

/** Provider finish reasons → Keel's; unknown ones become `tool_calls` if calls arrived, else `stop`. */
export const FINISH_REASONS: Readonly<Record<string, FinishReason>> = {
  stop: "stop",
  end_turn: "stop",
  stop_sequence: "stop",
  eos: "stop",
  tool_calls: "tool_calls",
  function_call: "tool_calls",
  tool_use: "tool_calls",
  length: "length",
  max_tokens: "length",
  model_length: "length",
  content_filter: "content_filter",
  safety: "content_filter",
};

/** The provider-metadata key under which `openaiModel` notes where a reasoning part came from. */
export const OPENAI_CHAT = "openaiChat";

/**
 * The delta fields that carry reasoning as a string, in order of preference (a delta with both
 * carries the same text twice): DeepSeek, Kimi, Qwen and vLLM's `reasoning_content`; OpenRouter's
 * and newer vLLM's `reasoning`. The part's metadata names the field, so it goes back under it.
 */
const REASONING_FIELDS = ["reasoning_content", "reasoning"] as const;

/** One call as the mapper tracks it (Keel's index; the provider's may collide, see below). */
interface Tracked {
  id: string;
  name: string;
  args: string[];
}

/**
 * Maps SDK chunks to `ModelEvent`s; holds the finish reason and usage until the stream ends.
 *
 * What it accepts besides the documented shape, each seen from a real provider:
 * - `delta.content` as an array of parts (Mistral): `text` parts are text, `thinking` parts
 *   (their `thinking` array of text parts, or a string) are reasoning;
 * - reasoning in `reasoning_content` / `reasoning` (see {@link REASONING_FIELDS});
 * - `function.arguments` as a JSON object instead of a string: stringified once;
 * - parallel calls merged on one index: a new non-empty id at a provider index already in use
 *   starts a new call (Gemini proxies send every call at `index: 0` with its own id), as does,
 *   for a chunk with neither (`index: null, id: ""`), a tool name with arguments (or another
 *   tool's name) arriving for a call whose arguments are complete JSON. A new call takes the next free
 *   Keel index, so the calls keep their arrival order. A new id after arguments that are not
 *   yet complete JSON stays with the call (the assembler notes the conflicting id).
 */
export function chunkMapper() {
  const calls = new Map<number, Tracked>();
  const bySlot = new Map<number, number>(); // the provider's index → the Keel index of its current call
  const byId = new Map<string, number>();
  let lastIndex: number | undefined;
  let maxIndex = -1;
  let rawFinish: string | undefined;
  let usage: Usage | undefined;
  const reasoningSeen = new Set<string>();

  const open = (index: number, slot: number | undefined): number => {
    calls.set(index, { id: "", name: "", args: [] });
    if (slot !== undefined) bySlot.set(slot, index);
    if (index > maxIndex) maxIndex = index;
    return index;
  };
  const fresh = (slot: number | undefined): number =>
    open(slot !== undefined && !calls.has(slot) ? slot : maxIndex + 1, slot);

  /** Which Keel call a tool-call delta belongs to (opening one when it starts a new call). */
  const resolve = (
    slot: number | undefined,
    id: string | undefined,
    name: string | undefined,
    args: string | undefined,
  ): number => {
    if (id !== undefined) {
      const known = byId.get(id);
      if (known !== undefined) return known;
    }
    const current = slot !== undefined ? bySlot.get(slot) : lastIndex;
    if (current === undefined) return fresh(slot);
    const c = calls.get(current)!;
    if (id !== undefined) {
      // An unknown id: a new call once the current one looks finished, else its late/odd id.
      const finished =
        c.id === ""
          ? c.name !== "" && name !== undefined && completeJson(c.args)
          : completeJson(c.args) || (c.args.length === 0 && name !== undefined);
      return finished ? fresh(slot) : current;
    }
    // Without an id or an index, only a tool name after complete arguments tells a new call.
    const another =
      slot === undefined &&
      name !== undefined &&
      c.name !== "" &&
      ((args !== undefined && args !== "") || name !== c.name) &&
      completeJson(c.args);
    return another ? fresh(slot) : current;
  };

  function* call(
    slot: number | undefined,
    rawId: unknown,
    rawName: unknown,
    rawArgs: unknown,
  ): Generator<ModelEvent> {
    const id = typeof rawId === "string" && rawId !== "" ? rawId : undefined;
    const name = typeof rawName === "string" && rawName !== "" ? rawName : undefined;
    const args = argumentsText(rawArgs);
    const before = calls.size;
    const index = resolve(slot, id, name, args);
    const c = calls.get(index)!;
    lastIndex = index;
    if (id !== undefined && !byId.has(id)) byId.set(id, index);
    if (id !== undefined && c.id === "") c.id = id;
    if (name !== undefined && c.name === "") c.name = name;
    if (args !== undefined) c.args.push(args);
    if (calls.size > before) {
      yield { type: "call.start", index, ...(id ? { id } : {}), ...(name ? { name } : {}) };
      if (args) yield { type: "call.delta", index, argumentsDelta: args };
    } else if (args || id || name) {
      yield {
        type: "call.delta",
        index,
        argumentsDelta: args ?? "",
        ...(id ? { id } : {}),
        ...(name ? { name } : {}),
      };
    }
  }

  function* reasoning(key: string, text: string, metadata?: ProviderMetadata) {
    if (text === "") return;
    const first = !reasoningSeen.has(key);
    reasoningSeen.add(key);
    yield first && metadata
      ? ({ type: "reasoning.delta", key, text, providerMetadata: metadata } as const)
      : ({ type: "reasoning.delta", key, text } as const);
  }

  function* content(value: unknown): Generator<ModelEvent> {
    if (typeof value === "string") {
      if (value !== "") yield { type: "text.delta", text: value };
      return;
    }
    if (!Array.isArray(value)) return;
    for (const part of value as unknown[]) {
      if (typeof part === "string") {
        if (part !== "") yield { type: "text.delta", text: part };
        continue;
      }
      if (typeof part !== "object" || part === null) continue;
      const p = part as Record<string, unknown>;
      if (p.type === "thinking" || p.type === "reasoning") {
        yield* reasoning("thinking", partsText(p.thinking ?? p.reasoning ?? p.text));
      } else if (typeof p.text === "string" && p.text !== "") {
        yield { type: "text.delta", text: p.text };
      }
    }
  }

  return {
    get finishReason() {
      return rawFinish;
    },
    *push(chunk: ChatCompletionChunk): Generator<ModelEvent> {
      if (chunk.usage) {
        const u = chunk.usage;
        usage = { inputTokens: u.prompt_tokens ?? 0, outputTokens: u.completion_tokens ?? 0 };
        const cached = u.prompt_tokens_details?.cached_tokens;
        const reasoningTokens = u.completion_tokens_details?.reasoning_tokens;
        if (typeof cached === "number") usage.cachedInputTokens = cached;
        if (typeof reasoningTokens === "number") usage.reasoningTokens = reasoningTokens;
      }
      const choice = chunk.choices?.find((c) => c.index === 0) ?? chunk.choices?.[0];
      if (!choice) return;
      const delta = (choice.delta ?? {}) as Record<string, unknown>;
      for (const field of REASONING_FIELDS) {
        if (typeof delta[field] !== "string") continue;
        yield* reasoning(field, delta[field] as string, {
          [OPENAI_CHAT]: { reasoningField: field },
        });
        break;
      }
      yield* content(delta.content);
      if (typeof delta.refusal === "string" && delta.refusal !== "")
        yield { type: "text.delta", text: delta.refusal };
      const toolCalls = Array.isArray(delta.tool_calls) ? delta.tool_calls : [];
      for (const tc of toolCalls as Record<string, unknown>[]) {
        const slot =
          Number.isInteger(tc.index) && (tc.index as number) >= 0
            ? (tc.index as number)
            : undefined;
        const fn = (tc.function ?? {}) as Record<string, unknown>;
        yield* call(slot, tc.id, fn.name, fn.arguments);
      }
      const legacy = delta.function_call as Record<string, unknown> | undefined;
      if (legacy) yield* call(0, undefined, legacy.name, legacy.arguments);
      if (choice.finish_reason) rawFinish = choice.finish_reason;
    },
    *end(): Generator<ModelEvent> {
      for (const index of [...calls.keys()].sort((a, b) => a - b))
        yield { type: "call.end", index };
      if (usage) yield { type: "usage", usage };
      let reason = FINISH_REASONS[rawFinish ?? ""] ?? (calls.size > 0 ? "tool_calls" : "stop");
      if (reason === "stop" && calls.size > 0) reason = "tool_calls";
      yield { type: "finish", reason };
    },
  };
}

/** Arguments as text: a string as is, a JSON object or array stringified once. */
function argumentsText(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (typeof value === "object" && value !== null) return JSON.stringify(value);
  return undefined;
}

/** Whether the argument chunks so far make one complete JSON value (cheap check first). */
function completeJson(chunks: readonly string[]): boolean {
  if (chunks.length === 0) return false;
  const tail = chunks[chunks.length - 1].trimEnd();
  if (!tail.endsWith("}") && !tail.endsWith("]")) return false;
  try {
    JSON.parse(chunks.length === 1 ? chunks[0] : chunks.join(""));
    return true;
  } catch {
    return false;
  }
}

/** The text of a Mistral `thinking` value: a string, or an array of `{ type: "text", text }`. */
function partsText(value: unknown): string {
  if (typeof value === "string") return value;
  if (!Array.isArray(value)) return "";
  let text = "";
  for (const p of value as unknown[]) {
    if (typeof p === "string") text += p;
    else if (
      typeof p === "object" &&
      p !== null &&
      typeof (p as { text?: unknown }).text === "string"
    )
      text += (p as { text: string }).text;
  }
  return text;
}
