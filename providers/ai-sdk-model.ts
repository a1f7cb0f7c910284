import {
  APICallError,
  JSONParseError,
  type LanguageModelV3,
  type LanguageModelV3CallOptions,
  type LanguageModelV3FunctionTool,
  type LanguageModelV3Message,
  type LanguageModelV3Prompt,
  type LanguageModelV3StreamPart,
  type LanguageModelV3ToolResultPart,
  type LanguageModelV3Usage,
  type SharedV3ProviderOptions,
  TypeValidationError,
} from "@ai-sdk/provider";
import type { Clock } from "../contracts/clock.ts";
import { checkDuration, systemClock } from "../contracts/clock.ts";
import type { Message, ProviderMetadata, Usage } from "../contracts/messages.ts";
import type {
  FinishReason,
  Model,
  ModelErrorKind,
  ModelEvent,
  ModelRequest,
  ModelToolSpec,
} from "../contracts/model.ts";
import { ModelError } from "../contracts/model.ts";
import { estimateTextTokens, type TextCounter } from "../contracts/tokens.ts";
import { hasContent, streamWatchdog } from "./stream-watchdog.ts";

/** `aiSdkModel` options: the window, the output reserve, a token counter, provider options. */
export interface AiSdkModelOptions {
  /** `Model.name` (the shared retry budget's provider key). Default `<provider>:<modelId>`. */
  name?: string;
  /**
   * Tokens the model accepts in one request (`Model.contextWindow`, for the context budget and
   * automatic compaction). Must be a positive integer. Absent: unknown; the session then
   * measures its context but never compacts by itself.
   */
  contextWindow?: number;
  /**
   * Counts the tokens of a text (`Model.countTokens`, for the context budget). Default: the
   * chars-based estimate (`estimateTextTokens`, ⌈chars / 4⌉), which provider usage replaces
   * after every response.
   * Contract: pure, deterministic, synchronous, returns an integer ≥ 0.
   */
  countTokens?: TextCounter;
  /**
   * Sent with every request as the V3 `providerOptions`, e.g. Anthropic's thinking
   * (`{ anthropic: { thinking: { type: "enabled", budgetTokens: 2048 } } }`) or, for the OpenAI
   * Responses API to get its reasoning back byte for byte, `{ openai: { store: false, include:
   * ["reasoning.encrypted_content"] } }`.
   */
  providerOptions?: SharedV3ProviderOptions;
  /**
   * The most tokens an answer may take: sent with every request (V3 `maxOutputTokens`) and
   * kept free by the context budget (`Model.maxOutputTokens`). Absent: the provider package's
   * default is sent, and the budget reserves min(4 096, a quarter of `contextWindow`).
   * Must be a positive integer below `contextWindow`.
   */
  maxOutputTokens?: number;
  temperature?: number;
  /** Extra HTTP headers of every request. */
  headers?: Record<string, string>;
  /**
   * Whether the model takes images (`Model.input.images`). Default true. Image URLs are checked
   * against the model's own `supportedUrls` (see {@link aiSdkModel}).
   */
  images?: boolean;
  /**
   * Whether the provider continues a request that ends with a partial assistant message (a
   * prefill): `Model.capabilities.continueFromPartial`, so that a stream cut mid-answer is
   * continued from the text received instead of retried. Default: true for Anthropic's Messages
   * API (a `provider` named `anthropic.…`, also behind Vertex) unless `providerOptions` enables
   * its extended thinking, which refuses a prefill; false for every other provider (set it for
   * one that takes a prefill, e.g. through an Anthropic-compatible endpoint under another name).
   */
  continueFromPartial?: boolean;
  /** Max ms from the request to the first stream part. Default 60 000; Infinity disables. */
  firstChunkTimeoutMs?: number;
  /**
   * Max ms between two stream parts that carry content (text, reasoning or argument text, a
   * call, the finish): empty deltas and metadata parts do not count. Default 60 000; Infinity
   * disables.
   */
  idleTimeoutMs?: number;
  /**
   * Max ms the whole request may keep the adapter waiting, however it streams (time the
   * consumer holds the stream does not count). Default 600 000; Infinity disables.
   */
  requestTimeoutMs?: number;
  /**
   * Told about each stream part the provider package could not validate (an event type or a
   * shape it does not know, e.g. a new SSE event Anthropic says clients must ignore): the part
   * is skipped, not fatal. Contract: must not throw. Default: a process warning.
   */
  onSkippedPart?: (error: unknown) => void;
  /** Contract: monotonic ms; drives the two timeouts. Default: `systemClock`. */
  clock?: Clock;
}

/**
 * Any AI SDK `LanguageModelV3` (`@ai-sdk/anthropic`, `@ai-sdk/openai`, `@ai-sdk/google`, … of
 * the 3.x line) as a Keel `Model`. Keel's loop and its one retry budget stay in charge: this
 * calls `doStream` only, which makes exactly one HTTP request and never retries (`streamText`,
 * which retries, is not used).
 *
 * Requests: the instructions become the V3 prompt's system message, then the neutral messages
 * follow — text, images as file parts, reasoning with its provider metadata sent back as the
 * part's `providerOptions` (Anthropic's signature, the Responses API's item id and encrypted
 * content, Gemini's thought signatures), tool calls with their JSON input, consecutive tool
 * results as one tool message (`error-text` for a failed call); tools as V3 function tools with
 * their JSON schema. The context budget reads `contextWindow`, `maxOutputTokens` (the reserve)
 * and `countTokens` (the chars estimate unless given).
 *
 * Image URLs: an `http(s)` URL goes to the provider as a URL only when the model's
 * `supportedUrls` (read once; a promise is awaited before the first request) has a pattern for
 * it under its media type (`image/*` when the user gave none); `Model.input.checkImageUrl` says
 * so, so `prompt()` / `steer()` refuse any other before anything is logged, with the advice to
 * send the bytes. A request whose history still holds one (e.g. a session reopened with another
 * model) fails before it is sent, not retried. Nothing is downloaded here.
 *
 * Continue (`continueFromPartial`, see the option): a request whose last message is the
 * assistant's text is a prefill. Its trailing whitespace is not sent (Anthropic refuses a prefill
 * ending with whitespace); the whitespace was received, so it stays in the committed message and
 * the continuation's leading whitespace, which stands for it, is dropped.
 *
 * Stream: text/reasoning/tool-input parts become `text.delta`, `reasoning.delta`/`.end`,
 * `call.start`/`.delta`/`.end` (indexed in first-seen order); `finish` becomes `usage` and
 * `finish`. Failures are thrown as `ModelError`s the retry policy reads unchanged: an
 * `APICallError` as `http` (status, lowercased headers, the parsed error as `body`, its
 * `code`/`type`), `network` when it has no status (no connection), `stream_cut` when its status
 * is 2xx (the body broke while the SDK read it); an `error` part inside the stream as `http`
 * with the provider's code/type; a stream that ends without the provider's completion marker
 * (no `finish`, or a finish with no raw reason the provider could only have guessed) or breaks
 * mid-body as `stream_cut`; the two timeouts and the caller's abort as in `openaiModel`.
 */
export function aiSdkModel(languageModel: LanguageModelV3, options: AiSdkModelOptions = {}): Model {
  if (
    languageModel?.specificationVersion !== "v3" ||
    typeof languageModel.doStream !== "function"
  ) {
    throw new TypeError(
      `aiSdkModel: expected a LanguageModelV3 (specificationVersion "v3"), got ${String((languageModel as { specificationVersion?: unknown })?.specificationVersion)}; use the 3.x line of the @ai-sdk provider packages, e.g. anthropic("claude-sonnet-4-5") from @ai-sdk/anthropic@3`,
    );
  }
  const { clock = systemClock } = options;
  const firstChunkTimeoutMs = positive(
    "firstChunkTimeoutMs",
    options.firstChunkTimeoutMs ?? 60_000,
  );
  const idleTimeoutMs = positive("idleTimeoutMs", options.idleTimeoutMs ?? 60_000);
  const requestTimeoutMs = positive("requestTimeoutMs", options.requestTimeoutMs ?? 600_000);
  const onSkippedPart =
    options.onSkippedPart ??
    ((error: unknown) =>
      process.emitWarning(
        `aiSdkModel: a stream part ${languageModel.provider} could not validate was skipped (${error instanceof Error ? error.message.slice(0, 300) : String(error)})`,
        { code: "KEEL_SKIPPED_PART" },
      ));
  const cw = options.contextWindow;
  const maxOut = options.maxOutputTokens;
  for (const [name, v] of [
    ["contextWindow", cw],
    ["maxOutputTokens", maxOut],
  ] as const) {
    if (v !== undefined && !(Number.isInteger(v) && v > 0)) {
      throw new RangeError(`aiSdkModel: ${name} must be a positive integer (tokens), got ${v}`);
    }
  }
  if (cw !== undefined && maxOut !== undefined && maxOut >= cw) {
    throw new RangeError(
      `aiSdkModel: maxOutputTokens (${maxOut}) must be smaller than contextWindow (${cw})`,
    );
  }
  const countTokens = options.countTokens ?? estimateTextTokens;
  if (typeof countTokens !== "function") {
    throw new TypeError(
      `aiSdkModel: countTokens must be a function (text) => tokens, got ${typeof countTokens}`,
    );
  }
  const reserve = maxOut ?? (cw === undefined ? undefined : Math.min(4096, Math.floor(cw / 4)));
  const urls = urlSupport(languageModel);
  const continueFromPartial =
    options.continueFromPartial ?? takesPrefill(languageModel.provider, options.providerOptions);

  async function* stream(request: ModelRequest): AsyncGenerator<ModelEvent> {
    const { signal } = request;
    const dog = streamWatchdog(clock, signal);
    const { controller, arm, disarm } = dog;
    const fail = (err: unknown, phase: "connect" | "body") =>
      toModelError(err, phase, dog.timedOut, signal.aborted ? signal.reason : undefined);

    if (signal.aborted) throw fail(undefined, "connect");
    dog.attach();
    arm("first_chunk_timeout", firstChunkTimeoutMs);
    dog.deadline(requestTimeoutMs);
    let reader: ReadableStreamDefaultReader<LanguageModelV3StreamPart> | undefined;
    let completed = false;
    try {
      const prompt = toV3Prompt(request.messages, request.instructions);
      await urls.guard(prompt);
      let dropLeadingSpace = trimPrefill(prompt);
      const call: LanguageModelV3CallOptions = { prompt, abortSignal: controller.signal };
      if (request.tools.length > 0) call.tools = request.tools.map(toV3Tool);
      if (options.providerOptions) call.providerOptions = options.providerOptions;
      if (maxOut !== undefined) call.maxOutputTokens = maxOut;
      if (options.temperature !== undefined) call.temperature = options.temperature;
      if (options.headers) call.headers = options.headers;
      try {
        reader = (await languageModel.doStream(call)).stream.getReader();
      } catch (err) {
        throw fail(err, "connect");
      }
      const mapper = partMapper(onSkippedPart);
      for (;;) {
        if (signal.aborted || dog.timedOut) throw fail(undefined, "body");
        let next: ReadableStreamReadResult<LanguageModelV3StreamPart>;
        try {
          next = await reader.read();
        } catch (err) {
          throw fail(err, "body");
        }
        if (signal.aborted || dog.timedOut) throw fail(undefined, "body");
        if (next.done) break;
        const events = [...mapper.push(next.value)];
        for (const event of events) {
          if (dropLeadingSpace && event.type === "text.delta") {
            event.text = event.text.trimStart();
            dropLeadingSpace = event.text === "";
          }
        }
        // Only a part with content re-arms the idle timer (an empty one leaves it running).
        const content = events.some(hasContent) || mapper.finished;
        if (content) disarm();
        dog.pause();
        yield* events;
        dog.resume();
        if (mapper.finished) break;
        if (content) arm("idle_timeout", idleTimeoutMs);
      }
      if (!mapper.finished) {
        throw new ModelError(
          "the stream ended before the provider's end-of-response marker (connection cut)",
          { kind: "stream_cut" },
        );
      }
      completed = true;
      yield* mapper.end();
    } finally {
      dog.release();
      if (!completed) controller.abort();
      await reader?.cancel().catch(() => {});
    }
  }

  return {
    name: options.name ?? `${languageModel.provider}:${languageModel.modelId}`,
    input: { images: options.images ?? true, checkImageUrl: urls.refusal },
    ...(continueFromPartial ? { capabilities: { continueFromPartial } } : {}),
    ...(cw === undefined ? {} : { contextWindow: cw }),
    ...(reserve === undefined ? {} : { maxOutputTokens: reserve }),
    countTokens,
    stream,
  };
}

function positive(name: string, value: number): number {
  if (!(value > 0))
    throw new RangeError(
      `aiSdkModel: ${name} must be > 0 ms (or Infinity to disable), got ${value}`,
    );
  return checkDuration(`aiSdkModel: ${name}`, value, 1);
}

/**
 * Anthropic's Messages API continues a prefill, except with extended thinking on. Matched by the
 * package's `provider` name (`anthropic.messages`, `vertex.anthropic.messages`).
 */
function takesPrefill(provider: string, providerOptions: SharedV3ProviderOptions | undefined) {
  const thinking = (providerOptions?.anthropic?.thinking as { type?: unknown } | undefined)?.type;
  return (
    provider.split(".").includes("anthropic") && thinking !== "enabled" && thinking !== "adaptive"
  );
}

/**
 * A prefill (the prompt's last message is the assistant's text) without its trailing whitespace,
 * in place; the message goes when nothing is left. Returns whether whitespace was removed.
 */
function trimPrefill(prompt: LanguageModelV3Prompt): boolean {
  const last = prompt.at(-1);
  if (last?.role !== "assistant" || !last.content.every((p) => p.type === "text")) return false;
  const part = last.content.at(-1);
  if (part?.type !== "text" || part.text.trimEnd() === part.text) return false;
  part.text = part.text.trimEnd();
  if (part.text === "") last.content.pop();
  if (last.content.length === 0) prompt.pop();
  return true;
}

/**
 * The model's `supportedUrls`, read once: `refusal` is `Model.input.checkImageUrl` (undefined
 * while a promised map is pending: `guard` then checks before the request); `guard` throws a
 * not-retried `ModelError` for a prompt with an image URL the model does not take.
 */
function urlSupport(languageModel: LanguageModelV3) {
  let map: Record<string, RegExp[]> | undefined;
  let failed: string | undefined;
  let pending: Promise<void> | undefined;
  const fail = (err: unknown) => {
    failed = err instanceof Error ? err.message : String(err);
  };
  try {
    const value = languageModel.supportedUrls;
    if (typeof (value as PromiseLike<unknown> | undefined)?.then === "function") {
      pending = Promise.resolve(value).then((m) => {
        map = m ?? {};
      }, fail);
    } else map = (value as Record<string, RegExp[]> | undefined) ?? {};
  } catch (err) {
    fail(err);
  }
  const who = languageModel.provider;

  const refusal = (url: string, mediaType: string | undefined): string | undefined => {
    if (failed !== undefined) return `${who}'s supported URLs could not be read (${failed})`;
    if (map === undefined || /^data:/i.test(url)) return undefined;
    const type = mediaType ?? "image/*";
    const patterns = urlPatterns(map, type);
    if (patterns.some((r) => r.test(url))) return undefined;
    const why =
      patterns.length === 0
        ? `${who} takes no ${type} URL`
        : `${who} takes ${type} URLs matching ${patterns.join(" or ")} only`;
    if (mediaType !== undefined) return why;
    const known = map;
    const typed = IMAGE_TYPES.filter((t) => urlPatterns(known, t).some((r) => r.test(url)));
    return typed.length === 0
      ? why
      : `${why} (with its mediaType given, ${typed.join(" or ")}, it would take this one)`;
  };

  const guard = async (prompt: LanguageModelV3Prompt): Promise<void> => {
    if (pending) await pending;
    for (const m of prompt) {
      if (m.role !== "user") continue;
      for (const p of m.content) {
        if (p.type !== "file" || !(p.data instanceof URL)) continue;
        const url = p.data.href;
        const why = refusal(url, p.mediaType === "image/*" ? undefined : p.mediaType);
        if (why === undefined) continue;
        throw new ModelError(
          `the history holds an image URL the model cannot take (${JSON.stringify(url.slice(0, 120))}: ${why}); nothing was sent. Send the image's bytes instead, or use a model that takes the URL`,
          { kind: "http", code: "unsupported_image_url", type: "invalid_request_error" },
        );
      }
    }
  };
  return { refusal, guard };
}

const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"] as const;

/**
 * The patterns of a `supportedUrls` map (keys are media types, `type/*` or `*`) that apply to
 * `mediaType`. This is a pure function.
 */
function urlPatterns(map: Record<string, RegExp[]>, mediaType: string): RegExp[] {
  const type = mediaType.toLowerCase();
  return Object.entries(map).flatMap(([key, patterns]) => {
    const k = key.toLowerCase();
    const applies =
      k === "*" || k === "*/*" || (k.endsWith("/*") ? type.startsWith(k.slice(0, -1)) : k === type);
    return applies ? patterns : [];
  });
}

const options = (metadata: ProviderMetadata | undefined) =>
  metadata === undefined ? {} : { providerOptions: metadata as SharedV3ProviderOptions };

/**
 * Keel's neutral messages as a V3 prompt, led by `instructions` as its system message when
 * given (the stable head: each provider package puts it where its API wants it, e.g.
 * Anthropic's `system`, Gemini's `systemInstruction`). Consecutive tool messages become one
 * (Anthropic wants every result of a batch in one user turn).
 * This is a pure function.
 */
export function toV3Prompt(
  messages: readonly Message[],
  instructions?: string,
): LanguageModelV3Prompt {
  const prompt: LanguageModelV3Message[] = [];
  if (instructions) prompt.push({ role: "system", content: instructions });
  for (const m of messages) {
    switch (m.role) {
      case "system":
        prompt.push({ role: "system", content: m.content });
        break;
      case "user":
        prompt.push({
          role: "user",
          content: m.content.map((p) => {
            if (p.type === "text") return { type: "text", text: p.text };
            if ("url" in p) {
              return p.url.startsWith("data:")
                ? { type: "file", data: p.url, mediaType: p.mediaType ?? dataUrlType(p.url) }
                : { type: "file", data: new URL(p.url), mediaType: p.mediaType ?? "image/*" };
            }
            return { type: "file", data: p.base64, mediaType: p.mediaType };
          }),
        });
        break;
      case "assistant":
        prompt.push({
          role: "assistant",
          content: m.content.map((p) => {
            switch (p.type) {
              case "text":
                return { type: "text", text: p.text, ...options(p.providerMetadata) };
              case "reasoning":
                return { type: "reasoning", text: p.text, ...options(p.providerMetadata) };
              default:
                return {
                  type: "tool-call",
                  toolCallId: p.id,
                  toolName: p.name,
                  input: parseInput(p.arguments),
                  ...options(p.providerMetadata),
                };
            }
          }),
        });
        break;
      case "tool": {
        const r = m.content[0];
        const part: LanguageModelV3ToolResultPart = {
          type: "tool-result",
          toolCallId: r.callId,
          toolName: r.name,
          output: r.isError
            ? { type: "error-text", value: r.content }
            : { type: "text", value: r.content },
        };
        const last = prompt.at(-1);
        if (last?.role === "tool") last.content.push(part);
        else prompt.push({ role: "tool", content: [part] });
        break;
      }
    }
  }
  return prompt;
}

/** A call's raw argument text as the JSON object providers require (`{}` when it is not one). */
function parseInput(text: string): unknown {
  try {
    const value: unknown = JSON.parse(text === "" ? "{}" : text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}

function dataUrlType(url: string): string {
  return /^data:([^;,]+)/.exec(url)?.[1] ?? "image/*";
}

function toV3Tool(spec: ModelToolSpec): LanguageModelV3FunctionTool {
  return {
    type: "function",
    name: spec.function.name,
    description: spec.function.description,
    inputSchema: spec.function.parameters as LanguageModelV3FunctionTool["inputSchema"],
  };
}

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
function partMapper(skipped: (error: unknown) => void) {
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

/** An `error` stream part: the provider's error object (or an APICallError) as a ModelError. */
function inStreamError(error: unknown): ModelError {
  if (APICallError.isInstance(error)) return fromApiCallError(error);
  const wire = wireMismatch(error);
  if (wire) return wire;
  if (error instanceof ModelError) return error;
  const e = (typeof error === "object" && error !== null ? error : {}) as Record<string, unknown>;
  const inner = (typeof e.error === "object" && e.error !== null ? e.error : e) as Record<
    string,
    unknown
  >;
  const str = (v: unknown) =>
    typeof v === "string" ? v : typeof v === "number" ? String(v) : undefined;
  const message =
    str(inner.message) ?? (error instanceof Error ? error.message : JSON.stringify(error));
  return new ModelError(`the provider sent an error inside the stream: ${message}`, {
    kind: "http",
    code: str(inner.code),
    type: str(inner.type) ?? str(inner.status),
    body: error,
    cause: error,
  });
}

/** An `APICallError` with its status, lowercased headers, parsed body and the provider's code/type. */
function fromApiCallError(err: APICallError): ModelError {
  const wire = wireMismatch(err);
  if (wire) return wire;
  if (err.statusCode === undefined || err.statusCode < 400) {
    // No status: the connection failed. A 2xx: the response began and its body broke.
    const cause = err.cause as { message?: string; cause?: { code?: string } } | undefined;
    const detail = [cause?.message, cause?.cause?.code].filter(Boolean).join(": ");
    const origin = URL.canParse(err.url) ? new URL(err.url).origin : err.url;
    return new ModelError(
      `${err.message.replace(/\.$/, "")} to ${origin}${detail ? ` (${detail})` : ""}`,
      {
        kind: err.statusCode === undefined ? "network" : "stream_cut",
        cause: err,
      },
    );
  }
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(err.responseHeaders ?? {})) headers[k.toLowerCase()] = v;
  let body: unknown = err.data;
  if (body === undefined && err.responseBody !== undefined) {
    try {
      body = JSON.parse(err.responseBody);
    } catch {
      body = err.responseBody;
    }
  }
  const b = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  const inner = (typeof b.error === "object" && b.error !== null ? b.error : b) as Record<
    string,
    unknown
  >;
  const str = (v: unknown) => (typeof v === "string" ? v : undefined);
  return new ModelError(err.message, {
    kind: "http",
    status: err.statusCode,
    headers,
    code: str(inner.code),
    // Gemini puts its code name in `status` (e.g. "RESOURCE_EXHAUSTED").
    type: str(inner.type) ?? str(inner.status),
    body,
    providerRetryable: err.isRetryable,
    cause: err,
  });
}

/**
 * A reply the provider package could not read as its wire format: a `TypeValidationError` of a
 * chunk, or an `APICallError` raised on a response that arrived (no status, a body, not
 * retryable: e.g. a Chat Completions stream to the Responses API). One line saying what was
 * received and what to do, never the validator's issue list; `wire_mismatch`, not retried.
 */
function wireMismatch(error: unknown): ModelError | undefined {
  const api = APICallError.isInstance(error) ? error : undefined;
  const validation = TypeValidationError.isInstance(error)
    ? error
    : TypeValidationError.isInstance(api?.cause)
      ? api.cause
      : undefined;
  const answered =
    api !== undefined &&
    api.statusCode === undefined &&
    api.responseBody !== undefined &&
    !api.isRetryable;
  if (validation === undefined && !answered) return undefined;
  const said = api ? firstSentence(api.message) : undefined;
  const fix = /chat completions/i.test(api?.message ?? "")
    ? "a Chat Completions server takes openaiModel (keel: --provider openai-compatible)"
    : "check that the base URL serves this provider's API";
  const what =
    said ?? `the server's reply is not this provider's wire format (${firstIssue(validation)})`;
  return new ModelError(`${what}: ${fix}`, { kind: "wire_mismatch", cause: error });
}

/** The first sentence of a message, on one line. */
function firstSentence(message: string): string {
  const line = message.split("\n", 1)[0] ?? "";
  const end = line.search(/\.(\s|$)/);
  return (end > 0 ? line.slice(0, end) : line).slice(0, 200);
}

/** The first problem a validation error found: where, and what. */
function firstIssue(error: TypeValidationError | undefined): string {
  const issues = (error?.cause as { issues?: { path?: PropertyKey[]; message?: string }[] })
    ?.issues;
  const first = issues?.[0];
  if (!first) return firstSentence(error?.message ?? "unreadable reply");
  const path = (first.path ?? []).map(String).join(".");
  return `${path ? `${path}: ` : ""}${first.message ?? "invalid"}`.slice(0, 200);
}

function toModelError(
  err: unknown,
  phase: "connect" | "body",
  timedOut: { kind: ModelErrorKind; ms: number } | undefined,
  abortReason: unknown,
): ModelError {
  if (timedOut) {
    const what = timedOut.kind === "first_chunk_timeout" ? "no first chunk" : "no chunk";
    return new ModelError(`${what} within ${timedOut.ms} ms; the request was aborted`, {
      kind: timedOut.kind,
      cause: err,
    });
  }
  if (abortReason !== undefined)
    return new ModelError("the request was aborted by the caller", {
      kind: "aborted",
      cause: abortReason,
    });
  if (err instanceof ModelError) return err;
  if (APICallError.isInstance(err)) return fromApiCallError(err);
  const message = err instanceof Error ? err.message : String(err);
  const cause = (err as { cause?: { message?: string } } | undefined)?.cause?.message;
  return new ModelError(
    phase === "body"
      ? `the stream was cut: ${message}${cause ? ` (${cause})` : ""}`
      : `request failed: ${message}${cause ? ` (${cause})` : ""}`,
    { kind: phase === "body" ? "stream_cut" : "network", cause: err },
  );
}
