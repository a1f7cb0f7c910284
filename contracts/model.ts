import type { Message, ProviderMetadata, Usage } from "./messages.ts";

/** Why a response ended; `length` means it was cut, and none of its calls runs. */
export type FinishReason = "stop" | "tool_calls" | "length" | "content_filter";

/**
 * The normalised stream every model adapter emits. Tool-call events are keyed by `index`
 * (the provider's position of the call in the message); `id` and `name` may arrive on
 * `call.start` or on any delta, or never (the assembler copes). `providerMetadata` on any event
 * is merged (per provider, later keys win) into the part it belongs to and sent back with it.
 */
export type ModelEvent =
  | { type: "text.delta"; text: string; providerMetadata?: ProviderMetadata }
  /** Reasoning of block `key` (blocks keep their first-seen order); `text` may be "". */
  | { type: "reasoning.delta"; key: string; text: string; providerMetadata?: ProviderMetadata }
  | { type: "reasoning.end"; key: string; providerMetadata?: ProviderMetadata }
  | {
      type: "call.start";
      index: number;
      id?: string;
      name?: string;
      providerMetadata?: ProviderMetadata;
    }
  | { type: "call.delta"; index: number; argumentsDelta: string; id?: string; name?: string }
  | { type: "call.end"; index: number; providerMetadata?: ProviderMetadata }
  | { type: "usage"; usage: Usage }
  | { type: "finish"; reason: FinishReason };

/** One model request: the projection, the tools offered and the attempt it belongs to. */
export interface ModelRequest {
  /**
   * The session's instructions: the stable head of the request, sent before the tools and the
   * messages (as the system message in Chat Completions, the V3 prompt's system message in
   * `aiSdkModel`). Absent: none.
   */
  instructions?: string;
  /** The neutral projection (contracts/messages.ts); adapters render it to their wire. */
  messages: readonly Message[];
  tools: readonly ModelToolSpec[];
  /** Aborted on interrupt or timeout; adapters must stop reading and reject promptly. */
  signal: AbortSignal;
  attemptId: string;
}

/** What a model adapter can do beyond the plain request/stream contract. */
export interface ModelCapabilities {
  /**
   * The provider continues a request whose `messages` end with an assistant message (a
   * "prefill"): the answer's text deltas are the continuation of that message's text, not a new
   * message. The turn then resumes a stream cut mid-answer from the text already received
   * (Continue); without it, such a cut falls back to Retry (the partial text is dropped, and
   * the log and the `retry.scheduled` event say so). Anthropic's Messages API does this;
   * OpenAI Chat Completions does not.
   */
  continueFromPartial?: boolean;
}

/**
 * A model provider.
 * Contract: `stream` yields normalised events and ends after a `finish` event; any failure
 * (HTTP status, network, timeout, abort) is thrown as a `ModelError` from the iterator.
 */
export interface Model {
  /** Names the provider and model, e.g. in logs and as the retry budget's key. */
  readonly name: string;
  /**
   * The provider key that `createAgent({ concurrency })` bounds requests by. Absent: the part
   * of `name` before its first `:` and `.` (`openai:gpt-4o` → `openai`).
   */
  readonly provider?: string;
  /**
   * What the model takes besides text. A user message with an image is refused before any
   * request (by `prompt()` / `steer()`) when `images` is not true.
   */
  readonly input?: {
    images?: boolean;
    /**
     * Whether the model takes an image by this `http(s)` URL (the provider fetches it) or needs
     * its bytes: `undefined` when it takes it, else why not. A user message with an image URL it
     * refuses is refused before any request (by `prompt()` / `steer()`, with the reason and the
     * advice to send the bytes). Absent: every `http(s)` URL is taken.
     * Contract: synchronous, must not throw; `mediaType` is the one the user gave, if any.
     */
    checkImageUrl?: (url: string, mediaType: string | undefined) => string | undefined;
  };
  /** Absent: none (every flag false). */
  readonly capabilities?: ModelCapabilities;
  /** Streams one response to `request` (see the contract above). */
  stream(request: ModelRequest): AsyncIterable<ModelEvent>;
  /**
   * Tokens the model accepts in one request (input and output together). Absent: unknown; the
   * runtime then measures usage but never compacts by itself.
   */
  readonly contextWindow?: number;
  /** Tokens kept free for the model's answer (the output reserve of the context budget). */
  readonly maxOutputTokens?: number;
  /**
   * Tokens the model takes as input in one request, when its provider limits input below
   * `contextWindow − maxOutputTokens` (some serve a long window but refuse long prompts).
   * Absent: the window less the reserve is the limit. No request is sent over it.
   */
  readonly maxInputTokens?: number;
  /**
   * Counts the tokens of `text` with the model's own tokenizer. Absent: the runtime estimates
   * from characters (see `session/context-budget.ts`).
   * Contract: pure, deterministic, synchronous, returns an integer ≥ 0.
   */
  readonly countTokens?: (text: string) => number;
}

/** What kind of failure a `ModelError` is, as far as the transport knows. */
export type ModelErrorKind =
  | "http"
  | "network"
  | "first_chunk_timeout"
  | "idle_timeout"
  /** The whole request ran past its bound (`requestTimeoutMs`), content or not. */
  | "request_timeout"
  | "stream_cut"
  | "aborted"
  | "protocol"
  /**
   * The server answered in a format the model's adapter does not read (a Chat Completions
   * stream to a Responses API client, a proxy's page): another request will not help.
   */
  | "wire_mismatch";

/** A model request failure, as data the retry classifier reads. */
export class ModelError extends Error {
  override readonly name = "ModelError";
  readonly kind: ModelErrorKind;
  readonly status?: number;
  readonly headers: Record<string, string>;
  readonly code?: string;
  readonly type?: string;
  readonly body?: unknown;
  /**
   * What the provider's SDK thought of retrying (the AI SDK's `APICallError.isRetryable`).
   * Informational: Keel's classifier decides from status, code and message.
   */
  readonly providerRetryable?: boolean;

  constructor(
    message: string,
    options: {
      kind: ModelErrorKind;
      status?: number;
      headers?: Record<string, string>;
      code?: string;
      type?: string;
      body?: unknown;
      providerRetryable?: boolean;
      cause?: unknown;
    },
  ) {
    super(message, { cause: options.cause });
    this.kind = options.kind;
    this.status = options.status;
    this.headers = options.headers ?? {};
    this.code = options.code;
    this.type = options.type;
    this.body = options.body;
    if (options.providerRetryable !== undefined) this.providerRetryable = options.providerRetryable;
  }
}

/**
 * The error of a request a provider's chunk watchdog aborted: no first chunk, or no next chunk,
 * within `ms` (`kind` says which). The same words for every provider.
 */
export function watchdogError(
  timedOut: { kind: ModelErrorKind; ms: number },
  cause: unknown,
): ModelError {
  const what = timedOut.kind === "first_chunk_timeout" ? "no first chunk" : "no chunk";
  return new ModelError(`${what} within ${timedOut.ms} ms; the request was aborted`, {
    kind: timedOut.kind,
    cause,
  });
}

/** The model-facing description of a tool (OpenAI Chat Completions `tools[]` item). */
export interface ModelToolSpec {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}
