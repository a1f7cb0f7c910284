import OpenAI from "openai";
import type { ChatCompletionChunk } from "openai/resources/chat/completions";
import type { Clock } from "../contracts/clock.ts";
import { checkDuration, systemClock } from "../contracts/clock.ts";
import type { Model, ModelErrorKind, ModelEvent, ModelRequest } from "../contracts/model.ts";
import { ModelError, watchdogError } from "../contracts/model.ts";
import { chunkMapper } from "./openai-chunks.ts";
import { providerFetch } from "./openai-fetch.ts";
import {
  isContinuation,
  type PrefixContinuation,
  resolvePrefixContinuation,
  withPrefixMessage,
} from "./openai-prefix.ts";
import { chatRequestRenderer, REASONING_REPLAYS, type ReasoningReplay } from "./openai-request.ts";
import { knownModelLimits, type ModelLimits, openaiTokenCounter } from "./openai-tokens.ts";
import { hasContent, streamWatchdog } from "./stream-watchdog.ts";

/** `openaiModel` options: the model name and how to reach an OpenAI-compatible server. */
export interface OpenAIModelOptions {
  model: string;
  /** Any OpenAI-compatible server, e.g. `http://127.0.0.1:8080/v1`. Default: `OPENAI_BASE_URL`, else api.openai.com. */
  baseURL?: string;
  /** Default: `OPENAI_API_KEY`; none needed when a base URL is given (local servers). */
  apiKey?: string;
  /**
   * Where `OPENAI_API_KEY` and `OPENAI_BASE_URL` are read when `apiKey` / `baseURL` are not
   * given (default `process.env`), by the rule `keel` uses too: see `openaiEnvironment`.
   */
  env?: Readonly<Record<string, string | undefined>>;
  /** Max ms from sending the request to the first chunk. Default 60 000; Infinity disables. */
  firstChunkTimeoutMs?: number;
  /**
   * Max ms between two chunks that carry content (text, reasoning or argument text, a call,
   * usage, the finish), while the adapter waits, not while the consumer works: empty chunks do
   * not count. Default 60 000.
   */
  idleTimeoutMs?: number;
  /**
   * Max ms the whole request may keep the adapter waiting, however it streams (time the
   * consumer holds the stream does not count). Default 600 000; Infinity disables.
   */
  requestTimeoutMs?: number;
  /** Contract: monotonic ms; drives the two timeouts. Default: `systemClock`. */
  clock?: Clock;
  /** Extra request fields (temperature, reasoning_effort, provider options…). */
  extraBody?: Record<string, unknown>;
  /** A preconfigured client (then `baseURL`/`apiKey` are ignored); its retries are still off per request. */
  client?: OpenAI;
  /** `Model.name`, e.g. as the shared retry budget's provider key. Default `openai:<model>`. */
  name?: string;
  /**
   * Whether the model takes images (Chat `image_url` parts). Default true; false for a
   * text-only OpenAI-compatible server: a prompt with an image is then refused before any request.
   */
  images?: boolean;
  /**
   * Tokens the model accepts in one request. Default: known for OpenAI's model names (gpt-5,
   * gpt-4.1, gpt-4o, o-series, gpt-4, gpt-3.5-turbo); required for any other model.
   */
  contextWindow?: number;
  /** Tokens kept free for the answer (the budget's reserve). Default: known, or 4 096 with `contextWindow`. */
  maxOutputTokens?: number;
  /**
   * Tokens the model takes as input, when the server's limit is below the window less the
   * reserve (`Model.maxInputTokens`; no request is sent over it). Default: known (gpt-5: 272 000),
   * else none. The keel command reads `KEEL_MAX_INPUT_TOKENS`.
   */
  maxInputTokens?: number;
  /**
   * Which assistant messages carry back the reasoning the stream sent in `reasoning_content` /
   * `reasoning` (DeepSeek, Kimi, Qwen thinking modes). Default `"tool-calls"`: those with tool
   * calls, as those providers require; `"all"`; `"off"`.
   */
  reasoningReplay?: ReasoningReplay;
  /**
   * The server continues a partial assistant message, and how it is told to
   * (`PrefixContinuation` in providers/openai-prefix.ts): `"vllm"` (`continue_final_message`),
   * `"deepseek"` (`prefix: true` on the beta endpoint), or the fields your server documents. With it the model has
   * `capabilities.continueFromPartial`, so a stream cut mid-answer is continued from the text
   * received (Continue) instead of sent again (Retry). Default: off (Chat Completions has no
   * standard way).
   */
  continueFromPartial?: PrefixContinuation;
}

/**
 * A `Model` over the official `openai` v6 SDK, Chat Completions streaming. The SDK's own
 * retries are off (`maxRetries: 0`): Keel's retry policy owns the budget (docs/providers.md).
 *
 * Lifecycle of one `stream()`: send → (first chunk within `firstChunkTimeoutMs`) → chunks,
 * each within `idleTimeoutMs` → finish. Every failure is thrown from the iterator as a
 * `ModelError`: HTTP errors as `http` (status, lowercased headers, code, type, body),
 * connection failures as `network`, a body cut mid-way or ending without `finish_reason` as
 * `stream_cut`, unparsable chunks as `protocol`, the two timeouts (which abort the request)
 * as `first_chunk_timeout` / `idle_timeout`, and the caller's abort as `aborted`.
 * Events: `text.delta`; `call.start` on the first sight of an index (with id/name), then
 * `call.delta`s; at the end `call.end` per call, `usage` (with cached and reasoning tokens when
 * the server reports them), `finish`; reasoning (`reasoning_content`, `reasoning`, Mistral's
 * `thinking` parts) as `reasoning.delta`. Stream quirks it accepts: see `chunkMapper`
 * (providers/openai-chunks.ts). Requests render Keel's neutral messages to the Chat shape with
 * `chatRequestRenderer` (providers/openai-request.ts): calls whose arguments never parsed are
 * replayed as `{}`, and reasoning goes back per `reasoningReplay`. With `continueFromPartial`, a
 * request ending with the assistant's partial text (Continue) carries the server's continuation
 * fields (providers/openai-prefix.ts).
 */
export function openaiModel(options: OpenAIModelOptions): Model {
  const { model, clock = systemClock, extraBody = {} } = options;
  const firstChunkTimeoutMs = positive(
    "firstChunkTimeoutMs",
    options.firstChunkTimeoutMs ?? 60_000,
  );
  const idleTimeoutMs = positive("idleTimeoutMs", options.idleTimeoutMs ?? 60_000);
  const requestTimeoutMs = positive("requestTimeoutMs", options.requestTimeoutMs ?? 600_000);
  if (!model)
    throw new TypeError("openaiModel: `model` is required, e.g. { model: 'gpt-4o-mini' }");
  const limits = contextLimits(options);
  const reasoningReplay = options.reasoningReplay ?? "tool-calls";
  if (!REASONING_REPLAYS.includes(reasoningReplay))
    throw new TypeError(
      `openaiModel: reasoningReplay must be one of ${REASONING_REPLAYS.map((r) => `"${r}"`).join(", ")}, got ${JSON.stringify(reasoningReplay)}`,
    );
  const toChatMessages = chatRequestRenderer(reasoningReplay);
  const prefix = resolvePrefixContinuation(options.continueFromPartial, options.baseURL);
  // The SDK reads responses through providerFetch: SSE lines whole (linear, bounded), error
  // bodies without the `error` wrapper, a JSON 200 to a streaming request.
  const client = options.client
    ? options.client.withOptions({
        fetch: providerFetch(
          ((options.client as unknown as { fetch?: typeof fetch }).fetch ?? fetch).bind(globalThis),
        ),
      })
    : createClient(options);

  async function* stream(request: ModelRequest): AsyncGenerator<ModelEvent> {
    const { signal } = request;
    const dog = streamWatchdog(clock, signal);
    const { controller, arm, disarm } = dog;
    const fail = (err: unknown, phase: "connect" | "body") =>
      toModelError(
        err,
        phase,
        dog.timedOut,
        signal.aborted ? signal.reason : undefined,
        client.baseURL,
      );

    if (signal.aborted) throw fail(undefined, "connect");
    dog.attach();
    arm("first_chunk_timeout", firstChunkTimeoutMs);
    dog.deadline(requestTimeoutMs);
    let iterator: AsyncIterator<ChatCompletionChunk> | undefined;
    let completed = false;
    try {
      let sdkStream: AsyncIterable<ChatCompletionChunk>;
      // A continuation (Continue) tells the server to extend the final assistant message.
      const continuing = prefix !== undefined && isContinuation(request.messages);
      const rendered = toChatMessages(request.messages);
      const chat = continuing ? withPrefixMessage(rendered, prefix.message) : rendered;
      try {
        sdkStream = await client.chat.completions.create(
          {
            stream_options: { include_usage: true },
            ...extraBody,
            ...(continuing ? prefix.body : {}),
            model,
            // The instructions lead (stable prefix first, for the provider's prefix cache).
            messages: (request.instructions
              ? [{ role: "system", content: request.instructions }, ...chat]
              : chat) as OpenAI.ChatCompletionMessageParam[],
            ...(request.tools.length > 0 ? { tools: [...request.tools] } : {}),
            stream: true,
          },
          { signal: controller.signal, maxRetries: 0 },
        );
      } catch (err) {
        throw fail(err, "connect");
      }
      iterator = sdkStream[Symbol.asyncIterator]();
      const mapper = chunkMapper();
      for (;;) {
        if (signal.aborted || dog.timedOut) throw fail(undefined, "body");
        let next: IteratorResult<ChatCompletionChunk>;
        try {
          next = await iterator.next();
        } catch (err) {
          disarm();
          // A cut after the finish chunk (before usage or [DONE]) loses nothing of the message.
          if (mapper.finishReason !== undefined && !signal.aborted && !dog.timedOut) break;
          throw fail(err, "body");
        }
        // The SDK ends the stream silently when its request is aborted: ask why it ended.
        if (signal.aborted || dog.timedOut) throw fail(undefined, "body");
        if (next.done) break;
        // Only a chunk with content re-arms the idle timer (an empty one leaves it running).
        const events = [...mapper.push(next.value)];
        if (!events.some(hasContent)) continue;
        disarm();
        dog.pause();
        yield* events;
        dog.resume();
        arm("idle_timeout", idleTimeoutMs);
      }
      if (mapper.finishReason === undefined)
        throw new ModelError("the stream ended without a finish_reason (connection cut)", {
          kind: "stream_cut",
        });
      if (mapper.finishReason === "error")
        throw new ModelError('the provider ended the stream with finish_reason "error"', {
          kind: "protocol",
        });
      completed = true;
      yield* mapper.end();
    } finally {
      dog.release();
      if (!completed) {
        controller.abort();
        await iterator?.return?.().catch(() => {});
      }
    }
  }

  return {
    name: options.name ?? `openai:${model}`,
    input: { images: options.images ?? true },
    ...(prefix ? { capabilities: { continueFromPartial: true } } : {}),
    stream,
    contextWindow: limits.contextWindow,
    maxOutputTokens: limits.maxOutputTokens,
    ...(limits.maxInputTokens === undefined ? {} : { maxInputTokens: limits.maxInputTokens }),
    countTokens: openaiTokenCounter(model),
  };
}

/** The model's window and reserve: given, or known for its name; a clear error otherwise. */
function contextLimits(options: OpenAIModelOptions): ModelLimits {
  const { model, contextWindow, maxOutputTokens, maxInputTokens } = options;
  const count = (name: string, v: number | undefined) => {
    if (v !== undefined && !(Number.isInteger(v) && v > 0))
      throw new RangeError(`openaiModel: ${name} must be a positive integer (tokens), got ${v}`);
  };
  count("contextWindow", contextWindow);
  count("maxOutputTokens", maxOutputTokens);
  count("maxInputTokens", maxInputTokens);
  const known = knownModelLimits(model);
  const window = contextWindow ?? known?.contextWindow;
  if (window === undefined) {
    throw new TypeError(
      `openaiModel: the context window of model "${model}" is not known; pass it in tokens, e.g. openaiModel({ model: "${model}", contextWindow: 32768, maxOutputTokens: 4096 }) (the keel command reads KEEL_CONTEXT_WINDOW)`,
    );
  }
  const reserve =
    maxOutputTokens ?? known?.maxOutputTokens ?? Math.min(4096, Math.floor(window / 4));
  if (reserve >= window) {
    throw new RangeError(
      `openaiModel: maxOutputTokens (${reserve}) must be smaller than contextWindow (${window})`,
    );
  }
  const input = maxInputTokens ?? known?.maxInputTokens;
  return input === undefined
    ? { contextWindow: window, maxOutputTokens: reserve }
    : { contextWindow: window, maxOutputTokens: reserve, maxInputTokens: input };
}

function positive(name: string, value: number): number {
  if (!(value > 0))
    throw new RangeError(
      `openaiModel: ${name} must be > 0 ms (or Infinity to disable), got ${value}`,
    );
  return checkDuration(`openaiModel: ${name}`, value, 1);
}

/** OpenAI's own API, where `openaiModel` connects when no base URL is given or set. */
const OPENAI_API = "https://api.openai.com/v1";

/**
 * The one rule for reaching an OpenAI-compatible server from the environment, shared by
 * `openaiModel` and `keel`: `OPENAI_API_KEY` and `OPENAI_BASE_URL`, an exported but empty
 * variable counting as unset. A base URL without a key is a server without auth (a local one).
 * This is a pure function.
 */
export function openaiEnvironment(env: Readonly<Record<string, string | undefined>>): {
  apiKey?: string;
  baseURL?: string;
} {
  const apiKey = env.OPENAI_API_KEY || undefined;
  const baseURL = env.OPENAI_BASE_URL || undefined;
  return { ...(apiKey ? { apiKey } : {}), ...(baseURL ? { baseURL } : {}) };
}

function createClient(options: OpenAIModelOptions): OpenAI {
  const fromEnv = openaiEnvironment(options.env ?? process.env);
  const baseURL = options.baseURL ?? fromEnv.baseURL;
  const apiKey = options.apiKey ?? fromEnv.apiKey ?? (baseURL ? "not-needed" : undefined);
  if (!apiKey)
    throw new TypeError(
      "openaiModel: no API key. Pass { apiKey } or set OPENAI_API_KEY; for a server without auth, pass { baseURL } or set OPENAI_BASE_URL",
    );
  return new OpenAI({
    apiKey,
    baseURL: baseURL ?? OPENAI_API,
    maxRetries: 0,
    fetch: providerFetch((input, init) => fetch(input, init)),
  });
}

function toModelError(
  err: unknown,
  phase: "connect" | "body",
  timedOut: { kind: ModelErrorKind; ms: number } | undefined,
  abortReason: unknown,
  baseURL: string,
): ModelError {
  if (timedOut) return watchdogError(timedOut, err);
  if (abortReason !== undefined || err instanceof OpenAI.APIUserAbortError)
    return new ModelError("the request was aborted by the caller", {
      kind: "aborted",
      cause: abortReason ?? err,
    });
  if (err instanceof ModelError) return err;
  if (err instanceof OpenAI.APIConnectionTimeoutError)
    return new ModelError(err.message, { kind: "first_chunk_timeout", cause: err });
  if (err instanceof OpenAI.APIConnectionError) {
    const cause = err.cause as
      | { message?: string; cause?: { message?: string; code?: string } }
      | undefined;
    const detail = [cause?.message, cause?.cause?.code ?? cause?.cause?.message]
      .filter(Boolean)
      .join(": ");
    // The host is what the user can check (a stale OPENAI_BASE_URL, a server not started).
    return new ModelError(
      `${err.message.replace(/\.$/, "")} to ${baseURL}${detail ? ` (${detail})` : ""}`,
      { kind: "network", cause: err },
    );
  }
  if (err instanceof OpenAI.APIError) {
    const headers: Record<string, string> = {};
    const raw = err.headers as Headers | undefined;
    raw?.forEach((value: string, key: string) => {
      headers[key.toLowerCase()] = value;
    });
    return new ModelError(err.message, {
      kind: "http",
      status: err.status,
      headers,
      code: err.code == null ? undefined : String(err.code),
      type: err.type ?? undefined,
      body: err.error,
      cause: err,
    });
  }
  if (err instanceof SyntaxError)
    return new ModelError(`unparsable stream chunk: ${err.message}`, {
      kind: "protocol",
      cause: err,
    });
  const message = err instanceof Error ? err.message : String(err);
  const cause = (err as { cause?: { message?: string } } | undefined)?.cause?.message;
  return new ModelError(
    phase === "body"
      ? `the stream was cut: ${message}${cause ? ` (${cause})` : ""}`
      : `request failed: ${message}`,
    { kind: phase === "body" ? "stream_cut" : "network", cause: err },
  );
}
