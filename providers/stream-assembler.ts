import type { IdGenerator } from "../contracts/ids.ts";
import type {
  AssistantPart,
  ProviderMetadata,
  ReasoningPart,
  Usage,
} from "../contracts/messages.ts";
import type { FinishReason, ModelEvent } from "../contracts/model.ts";
import { type ArgPreview, createArgPreview } from "./arg-preview.ts";

/** One tool call of an assembled message. `name` is "" when the provider never sent one. */
export interface AssembledCall {
  /** The provider's position of the call in the message; output is sorted by it. */
  index: number;
  /** The provider's id, or one from `ids("call")` when it never sent one. */
  id: string;
  name: string;
  /** The raw argument text, exactly as streamed (possibly empty, truncated or malformed). */
  argumentsText: string;
  /** Stream irregularities seen for this call (late deltas, conflicting ids/names). */
  problems?: string[];
  providerMetadata?: ProviderMetadata;
}

/** An assistant message assembled from a model stream. */
export interface AssembledMessage {
  /** Reasoning blocks in first-seen order, text and metadata exactly as streamed; absent when none. */
  reasoning?: ReasoningPart[];
  text: string;
  /** Metadata the provider attached to the text (e.g. Gemini's thought signature). */
  textMetadata?: ProviderMetadata;
  toolCalls: AssembledCall[];
  /** Undefined when the stream never sent `finish` (a cut stream). */
  finishReason: FinishReason | undefined;
  usage?: Usage;
  /** Stream irregularities not tied to one call (events for unknown calls, double finish). */
  problems?: string[];
}

/** What an interrupted attempt had produced so far. */
export interface PartialOutput {
  reasoning?: ReasoningPart[];
  text: string;
  toolCalls: AssembledCall[];
}

export interface AssemblerOptions {
  /** Contract: returns a fresh id for `prefix` ("call"); called once per call without an id. */
  ids: IdGenerator;
  /** Parse each call's arguments incrementally and report previews. Default false. */
  previews?: boolean;
  /**
   * Report a call's preview once at least this many argument chars arrived since its last
   * report (and once more at `call.end` if some are pending). Default 1: after every delta.
   */
  previewEvery?: number;
  /**
   * Contract: must not throw; called synchronously inside `push`, at most once per delta.
   * `value` is the LIVE preview (mutated by later deltas): snapshot it if you keep it.
   */
  onPreview?: (index: number, name: string, value: unknown) => void;
}

/**
 * Folds normalised `ModelEvent`s into one assistant message.
 *
 * Lifecycle: `push` events in stream order, then `finish()` once (idempotent); `push` after
 * `finish()` throws (a caller bug). Never throws on a malformed stream: deltas after a call's
 * `call.end` are ignored and noted; deltas without `call.start` open the call; a missing id is
 * generated, a missing name stays ""; the first non-empty id/name wins (a different later one
 * is noted); duplicate `call.start` / `call.end` are idempotent; text and calls may
 * interleave; indices may be sparse or out of order. Appends are O(delta): chunks are
 * collected and joined once.
 */
export interface StreamAssembler {
  push(event: ModelEvent): void;
  /**
   * True once any text, reasoning (a character of it, or a block the provider sent only as
   * metadata: an encrypted or redacted one) or tool call has started: the retry layer's
   * Retry-vs-Continue, and whether a failed attempt is `interrupted` (it kept output) or `failed`.
   */
  hasOutput(): boolean;
  /** Text and calls so far (for an interrupted attempt's record). O(output). */
  partial(): PartialOutput;
  finish(): AssembledMessage;
}

interface Block {
  index: number;
  id: string;
  name: string;
  chunks: string[];
  ended: boolean;
  lateDeltas: number;
  lateChars: number;
  problems: string[];
  preview: ArgPreview | undefined;
  pending: number;
  metadata?: ProviderMetadata;
}

/** Creates a stream assembler (see {@link StreamAssembler}). */
export function createAssembler(options: AssemblerOptions): StreamAssembler {
  const { ids, onPreview } = options;
  const previews = options.previews === true;
  const every = Math.max(1, options.previewEvery ?? 1);
  const text: string[] = [];
  let textChars = 0;
  /** Whether a reasoning block has a character or provider metadata (output, for `hasOutput`). */
  let reasoned = false;
  let textMetadata: ProviderMetadata | undefined;
  const reasoning = new Map<string, { chunks: string[]; metadata?: ProviderMetadata }>();
  const blocks = new Map<number, Block>();
  const problems: string[] = [];
  let finishReason: FinishReason | undefined;
  let usage: Usage | undefined;
  let result: AssembledMessage | undefined;
  let textAfterFinish = false;

  const mergeIdentity = (b: Block, id: string | undefined, name: string | undefined) => {
    if (id) {
      if (b.id === "") b.id = id;
      else if (id !== b.id)
        b.problems.push(`a later id "${id}" differs from "${b.id}"; kept the first`);
    }
    if (name) {
      if (b.name === "") b.name = name;
      else if (name !== b.name) {
        b.problems.push(`a later name "${name}" differs from "${b.name}"; kept the first`);
      }
    }
  };
  let last: Block | undefined; // the most recent block: consecutive deltas skip the Map
  const block = (index: number): Block => {
    if (last !== undefined && last.index === index) return last;
    let b = blocks.get(index);
    if (b === undefined) {
      b = {
        index,
        id: "",
        name: "",
        chunks: [],
        ended: false,
        lateDeltas: 0,
        lateChars: 0,
        problems: [],
        preview: previews ? createArgPreview() : undefined,
        pending: 0,
      };
      blocks.set(index, b);
    }
    last = b;
    return b;
  };
  const report = (b: Block) => {
    b.pending = 0;
    if (b.preview !== undefined && onPreview !== undefined) {
      onPreview(b.index, b.name, b.preview.value());
    }
  };
  const validIndex = (event: { type: string; index: number }): boolean => {
    if (Number.isInteger(event.index) && event.index >= 0) return true;
    problems.push(`${event.type} with invalid index ${String(event.index)} was ignored`);
    return false;
  };
  const output = (b: Block): AssembledCall => {
    if (b.id === "") b.id = ids("call");
    const call: AssembledCall = {
      index: b.index,
      id: b.id,
      name: b.name,
      argumentsText: b.chunks.join(""),
    };
    const notes = b.lateDeltas
      ? [
          ...b.problems,
          `${b.lateDeltas} argument delta(s) (${b.lateChars} chars) after call.end were ignored`,
        ]
      : b.problems;
    if (notes.length > 0) call.problems = [...notes];
    if (b.metadata !== undefined) call.providerMetadata = b.metadata;
    return call;
  };
  /**
   * The calls in index order, with unique ids: a provider that repeats an id within one message
   * (some OpenAI-compatible servers do) would otherwise give two calls one result slot. A repeat
   * gets a fresh `ids("call")` and says so in its `problems`.
   */
  const calls = () => {
    const out = [...blocks.values()].sort((a, b) => a.index - b.index).map(output);
    const seen = new Set<string>();
    for (const call of out) {
      if (seen.has(call.id)) {
        const fresh = ids("call");
        const note = `the provider repeated the id "${call.id}" of an earlier call in this message; renamed to "${fresh}"`;
        const b = blocks.get(call.index)!;
        b.id = fresh; // kept: partial() and finish() agree
        b.problems.push(note);
        call.id = fresh;
        call.problems = [...(call.problems ?? []), note];
      }
      seen.add(call.id);
    }
    return out;
  };
  const joinedText = () => text.join("");

  const reasoningParts = (): ReasoningPart[] => {
    const out: ReasoningPart[] = [];
    for (const r of reasoning.values()) {
      const part: ReasoningPart = { type: "reasoning", text: r.chunks.join("") };
      if (r.metadata !== undefined) part.providerMetadata = r.metadata;
      out.push(part);
    }
    return out;
  };

  const push = (event: ModelEvent) => {
    if (result !== undefined) throw new Error("stream assembler: push() after finish()");
    switch (event.type) {
      case "reasoning.delta":
      case "reasoning.end": {
        let r = reasoning.get(event.key);
        if (r === undefined) {
          r = { chunks: [] };
          reasoning.set(event.key, r);
        }
        if (event.type === "reasoning.delta") r.chunks.push(event.text);
        if (event.providerMetadata) r.metadata = mergeMetadata(r.metadata, event.providerMetadata);
        if (
          (event.type === "reasoning.delta" && event.text.length > 0) ||
          event.providerMetadata !== undefined
        )
          reasoned = true;
        return;
      }
      case "text.delta":
        if (event.providerMetadata)
          textMetadata = mergeMetadata(textMetadata, event.providerMetadata);
        if (event.text.length === 0) return;
        if (finishReason !== undefined && !textAfterFinish) {
          textAfterFinish = true;
          problems.push("text arrived after finish; it was kept");
        }
        text.push(event.text);
        textChars += event.text.length;
        return;
      case "call.start": {
        if (!validIndex(event)) return;
        const existing = blocks.get(event.index);
        if (existing?.ended) {
          problems.push(`call.start for index ${event.index} after its call.end was ignored`);
          return;
        }
        const b = block(event.index);
        mergeIdentity(b, event.id, event.name);
        if (event.providerMetadata) b.metadata = mergeMetadata(b.metadata, event.providerMetadata);
        return;
      }
      case "call.delta": {
        if (!validIndex(event)) return;
        const b = block(event.index);
        if (b.ended) {
          b.lateDeltas++;
          b.lateChars += event.argumentsDelta.length;
          return;
        }
        mergeIdentity(b, event.id, event.name);
        const delta = event.argumentsDelta;
        b.chunks.push(delta);
        if (b.preview !== undefined) {
          b.preview.push(delta);
          b.pending += delta.length;
          if (b.pending >= every) report(b);
        }
        return;
      }
      case "call.end": {
        if (!validIndex(event)) return;
        const b = blocks.get(event.index);
        if (b === undefined) {
          problems.push(`call.end for index ${event.index}, which never started, was ignored`);
        } else if (!b.ended) {
          b.ended = true;
          if (event.providerMetadata)
            b.metadata = mergeMetadata(b.metadata, event.providerMetadata);
          if (b.pending > 0) report(b);
        }
        return;
      }
      case "usage":
        usage = event.usage;
        return;
      case "finish":
        if (finishReason === undefined) finishReason = event.reason;
        else if (event.reason !== finishReason) {
          problems.push(`a second finish "${event.reason}" was ignored (kept "${finishReason}")`);
        }
        return;
      default:
        problems.push(`unknown event type ${JSON.stringify((event as { type: unknown }).type)}`);
    }
  };

  return {
    push,
    hasOutput: () => textChars > 0 || reasoned || blocks.size > 0,
    partial: () =>
      reasoning.size > 0
        ? { reasoning: reasoningParts(), text: joinedText(), toolCalls: calls() }
        : { text: joinedText(), toolCalls: calls() },
    finish: () => {
      if (result !== undefined) return result;
      const message: AssembledMessage = { text: joinedText(), toolCalls: calls(), finishReason };
      if (reasoning.size > 0) message.reasoning = reasoningParts();
      if (textMetadata !== undefined) message.textMetadata = textMetadata;
      if (usage !== undefined) message.usage = usage;
      if (problems.length > 0) message.problems = [...problems];
      result = message;
      return message;
    },
  };
}

/**
 * Merges `next` into `base` per provider (later keys win); values are kept as sent.
 * This is a pure function: it returns a new object.
 */
export function mergeMetadata(
  base: ProviderMetadata | undefined,
  next: ProviderMetadata,
): ProviderMetadata {
  const out: ProviderMetadata = { ...base };
  for (const [provider, values] of Object.entries(next)) {
    out[provider] = { ...out[provider], ...values };
  }
  return out;
}

/**
 * The assembled message as neutral assistant parts, in the order the log keeps: reasoning
 * blocks, then the text (omitted when empty and it carries no metadata), then the calls by index.
 */
export function toAssistantParts(
  message: Pick<AssembledMessage, "text" | "toolCalls"> &
    Partial<Pick<AssembledMessage, "reasoning" | "textMetadata">>,
): AssistantPart[] {
  const parts: AssistantPart[] = [...(message.reasoning ?? [])];
  if (message.text !== "" || message.textMetadata !== undefined) {
    parts.push(
      message.textMetadata === undefined
        ? { type: "text", text: message.text }
        : { type: "text", text: message.text, providerMetadata: message.textMetadata },
    );
  }
  for (const c of message.toolCalls) {
    parts.push(
      c.providerMetadata === undefined
        ? { type: "tool-call", id: c.id, name: c.name, arguments: c.argumentsText }
        : {
            type: "tool-call",
            id: c.id,
            name: c.name,
            arguments: c.argumentsText,
            providerMetadata: c.providerMetadata,
          },
    );
  }
  return parts;
}
