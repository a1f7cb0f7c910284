// The AI SDK adapter's entry point: `aiSdkModel` and its options, the request loop over one
// `doStream` call with its watchdog, and the translation of Keel's messages and tools into the V3
// prompt (`toV3Prompt` is public, and only the package's barrels may re-export, so it stays
// here). The image-URL and prefill checks are in ai-sdk-request.ts, the part mapping in
// ai-sdk-stream.ts, the error mapping in ai-sdk-errors.ts.
import type {
  LanguageModelV3,
  LanguageModelV3CallOptions,
  LanguageModelV3FunctionTool,
  LanguageModelV3Message,
  LanguageModelV3Prompt,
  LanguageModelV3StreamPart,
  LanguageModelV3ToolResultPart,
  SharedV3ProviderOptions,
} from "@ai-sdk/provider";
import type { Clock } from "../contracts/clock.ts";
import { checkDuration, systemClock } from "../contracts/clock.ts";
import type { Message, ProviderMetadata } from "../contracts/messages.ts";
import type { Model, ModelEvent, ModelRequest, ModelToolSpec } from "../contracts/model.ts";
import { ModelError } from "../contracts/model.ts";
import { estimateTextTokens, type TextCounter } from "../contracts/tokens.ts";
import { toModelError } from "./ai-sdk-errors.ts";
import { takesPrefill, trimPrefill, urlSupport } from "./ai-sdk-request.ts";
import { partMapper, skippedPartWarning } from "./ai-sdk-stream.ts";
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
  /**
   * Tokens the model takes as input, when below `contextWindow` less the reserve
   * (`Model.maxInputTokens`: no request is sent over it). A positive integer; absent: none.
   */
  maxInputTokens?: number;
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
   * is skipped, not fatal. Contract: must not throw. Default: a one-line process warning
   * (`KEEL_SKIPPED_PART`), once per kind of part for this model.
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
  const onSkippedPart = options.onSkippedPart ?? skippedPartWarning(languageModel.provider);
  const cw = options.contextWindow;
  const maxOut = options.maxOutputTokens;
  const maxIn = options.maxInputTokens;
  for (const [name, v] of [
    ["contextWindow", cw],
    ["maxOutputTokens", maxOut],
    ["maxInputTokens", maxIn],
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
    ...(maxIn === undefined ? {} : { maxInputTokens: maxIn }),
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
