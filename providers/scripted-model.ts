import { type ChatMessage, toChatMessages } from "../contracts/chat.ts";
import { type Clock, sleep, systemClock } from "../contracts/clock.ts";
import type { Message, Usage } from "../contracts/messages.ts";
import type { ModelCapabilities, ModelToolSpec } from "../contracts/model.ts";
import {
  type FinishReason,
  type Model,
  ModelError,
  type ModelErrorKind,
  type ModelEvent,
  type ModelRequest,
} from "../contracts/model.ts";
import { estimateTextTokens, requestTokens, type TextCounter } from "../contracts/tokens.ts";

/** A tool call the scripted model emits; `arguments` is sent verbatim (may be malformed). */
export interface ScriptedToolCall {
  /** Omitted → no id is streamed (the assembler generates one). */
  id?: string;
  name: string;
  arguments: string;
}

/** A failure the step throws as a `ModelError` before any chunk (after `delayMs`). */
export interface ScriptedError {
  /** Default: "http" when `status` is set, else "network". */
  kind?: ModelErrorKind;
  status?: number;
  headers?: Record<string, string>;
  body?: unknown;
  code?: string;
  type?: string;
  message?: string;
}

/** One model response. Chunks are the emitted `ModelEvent`s, in the order listed below. */
export interface ScriptStep {
  /** Streamed first, as `text.delta` chunks. */
  text?: string;
  /** Streamed next, each as `call.start`, `call.delta` chunks, `call.end`, index = position. */
  toolCalls?: ScriptedToolCall[];
  /** Then `usage` (if given) and `finish`. Default "tool_calls" if there are calls, else
   * "stop"; `null` sends no finish (a stream that just ends). */
  finish?: FinishReason | null;
  usage?: Usage;
  /** Split text and each argument string into pieces of this many chars. Default: one. */
  chunkSize?: number;
  /** Wait before the first chunk (or the error), on the model's clock. */
  delayMs?: number;
  /** Wait between consecutive chunks, on the model's clock. */
  chunkDelayMs?: number;
  error?: ScriptedError;
  /** Throw a `stream_cut` ModelError after this many chunks (after the last if fewer). */
  cutAfter?: number;
  /** Produce no chunk until the request is aborted. */
  hang?: boolean;
  /** Produce this many chunks, then nothing until the request is aborted (an idle stream). */
  hangAfter?: number;
  /** Emit exactly these events instead of `text`/`toolCalls`/`usage`/`finish`. */
  events?: ModelEvent[];
}

/** A dynamic step. Contract: may read the request; must not mutate it; may throw (the throw
 * surfaces as a `protocol` ModelError). Return undefined to end the script. */
export type ScriptStepFn = (request: ModelRequest, index: number) => ScriptStep | undefined;

/** The script: a list of steps (each possibly a function), or one function for every request. */
export type Script = ScriptStepFn | ReadonlyArray<ScriptStep | ScriptStepFn>;

/**
 * A request the scripted model received (see `record`): `history` is a copy of the neutral
 * messages it was sent, `messages` their OpenAI Chat rendering (what `openaiModel` would send).
 */
export interface RecordedRequest extends Omit<ModelRequest, "messages"> {
  messages: ChatMessage[];
  history: Message[];
  /** 0-based position among the requests since creation or `reset()`. */
  index: number;
}

/** `scriptedModel` options. */
export interface ScriptedModelOptions {
  /** The clock all waits use. Default `systemClock`; pass XState's `SimulatedClock` in tests. */
  clock?: Clock;
  /** `Model.name` (default `scripted`). */
  name?: string;
  /** Whether the model says it takes images (`Model.input.images`). Default true. */
  images?: boolean;
  /**
   * How `requests[i].messages` is copied: "shallow" (default) copies the array but shares the
   * message objects (the runtime never mutates a message once sent; O(messages) pointers);
   * "deep" uses `structuredClone`; "none" keeps no requests.
   */
  record?: "shallow" | "deep" | "none";
  /**
   * What the model claims it can do (e.g. `{ continueFromPartial: true }`: the turn continues
   * a cut answer with a request ending in the partial assistant message, and this model's next
   * step is taken as the continuation of that text).
   */
  capabilities?: ModelCapabilities;
  /**
   * The model's context window in tokens. When set, a request over it is refused as a provider
   * would refuse it: HTTP 400, code `context_length_exceeded` (the request is still recorded).
   * Default: none (no limit, and the runtime never compacts by itself).
   */
  contextWindow?: number;
  /** The output reserve the runtime keeps free. Default: 1/8 of `contextWindow`. */
  maxOutputTokens?: number;
  /**
   * The model's input limit in tokens (`Model.maxInputTokens`). When set, a request whose input
   * is over it is refused as a provider refuses it: HTTP 400, code `context_length_exceeded`.
   */
  maxInputTokens?: number;
  /**
   * How the model counts tokens (the window check; exposed as `countTokens`). Default: the
   * chars-based estimate (`estimateTextTokens`).
   */
  countTokens?: TextCounter;
}

/** A `Model` that plays a script, and what it was asked. */
export interface ScriptedModel extends Model {
  readonly requests: RecordedRequest[];
  /** Forgets the recorded requests and starts the script again from step 1. */
  reset(): void;
}

const isCount = (v: unknown, min: number) =>
  typeof v === "number" && Number.isInteger(v) && v >= min;
const isDelay = (v: unknown) => typeof v === "number" && Number.isFinite(v) && v >= 0;

/** Why `step` is unusable, or undefined when it is fine. */
function checkStep(step: unknown): string | undefined {
  if (typeof step !== "object" || step === null) return `must be an object, got ${String(step)}`;
  const s = step as ScriptStep;
  if (s.chunkSize !== undefined && !isCount(s.chunkSize, 1)) {
    return `chunkSize must be a positive integer, got ${String(s.chunkSize)}`;
  }
  for (const k of ["delayMs", "chunkDelayMs"] as const) {
    if (s[k] !== undefined && !isDelay(s[k]))
      return `${k} must be a finite number ≥ 0, got ${String(s[k])}`;
  }
  for (const k of ["cutAfter", "hangAfter"] as const) {
    if (s[k] !== undefined && !isCount(s[k], 0))
      return `${k} must be an integer ≥ 0, got ${String(s[k])}`;
  }
  if (s.text !== undefined && typeof s.text !== "string") return "text must be a string";
  if (s.toolCalls !== undefined) {
    if (!Array.isArray(s.toolCalls)) return "toolCalls must be an array";
    for (const [i, c] of s.toolCalls.entries()) {
      if (typeof c?.name !== "string" || typeof c.arguments !== "string") {
        return `toolCalls[${i}] needs a string name and a string arguments (the raw JSON text, e.g. '{"path":"a.txt"}')`;
      }
    }
  }
  if (s.events !== undefined && !Array.isArray(s.events))
    return "events must be an array of ModelEvents";
  if (s.events !== undefined && (s.text !== undefined || s.toolCalls !== undefined)) {
    return "events replaces text/toolCalls; give one or the other";
  }
  return undefined;
}

function pieces(s: string, size: number | undefined): string[] {
  if (s.length === 0) return [];
  if (size === undefined || size >= s.length) return [s];
  const out: string[] = [];
  for (let i = 0; i < s.length; ) {
    let end = Math.min(s.length, i + size);
    const c = s.charCodeAt(end - 1);
    if (c >= 0xd800 && c <= 0xdbff && end < s.length) end++; // keep surrogate pairs whole
    out.push(s.slice(i, end));
    i = end;
  }
  return out;
}

function eventsOf(step: ScriptStep): ModelEvent[] {
  if (step.events) return step.events;
  const out: ModelEvent[] = [];
  for (const text of pieces(step.text ?? "", step.chunkSize))
    out.push({ type: "text.delta", text });
  const calls = step.toolCalls ?? [];
  calls.forEach((call, index) => {
    const start: ModelEvent = { type: "call.start", index, name: call.name };
    if (call.id !== undefined) start.id = call.id;
    out.push(start);
    for (const argumentsDelta of pieces(call.arguments, step.chunkSize)) {
      out.push({ type: "call.delta", index, argumentsDelta });
    }
    out.push({ type: "call.end", index });
  });
  if (step.usage) out.push({ type: "usage", usage: step.usage });
  const finish = step.finish === undefined ? (calls.length ? "tool_calls" : "stop") : step.finish;
  if (finish !== null) out.push({ type: "finish", reason: finish });
  return out;
}

/**
 * A scripted `Model` for tests (public: users test their tools with it). Request `i` plays
 * step `i`; running out of steps fails that request with a `protocol` ModelError naming the
 * missing step. Every wait goes through the injected clock (none when delays are 0: chunks
 * then follow one another with no turn of the microtask queue between them); aborting
 * `request.signal` rejects the stream with an `aborted` ModelError at the first chunk asked for
 * after the abort, and at once during delays and hangs. Throws a TypeError at creation for an invalid step in a list script.
 */
export function scriptedModel(script: Script, options: ScriptedModelOptions = {}): ScriptedModel {
  const clock = options.clock ?? systemClock;
  const name = options.name ?? "scripted";
  const record = options.record ?? "shallow";
  if (typeof script !== "function") {
    if (!Array.isArray(script))
      throw new TypeError("scriptedModel: script must be an array of steps or a function");
    script.forEach((step, i) => {
      const problem = typeof step === "function" ? undefined : checkStep(step);
      if (problem) throw new TypeError(`scriptedModel: step ${i + 1} ${problem}`);
    });
  }
  const window = options.contextWindow;
  if (window !== undefined && !(Number.isInteger(window) && window > 0)) {
    throw new TypeError(
      `scriptedModel: contextWindow must be a positive integer (tokens), got ${String(window)}`,
    );
  }
  const reserve =
    options.maxOutputTokens ?? (window === undefined ? undefined : Math.floor(window / 8));
  if (
    reserve !== undefined &&
    !(Number.isInteger(reserve) && reserve >= 0 && (window === undefined || reserve < window))
  ) {
    throw new TypeError(
      `scriptedModel: maxOutputTokens must be an integer ≥ 0 and below contextWindow, got ${String(reserve)}`,
    );
  }
  const maxInput = options.maxInputTokens;
  if (maxInput !== undefined && !(Number.isInteger(maxInput) && maxInput > 0)) {
    throw new TypeError(
      `scriptedModel: maxInputTokens must be a positive integer (tokens), got ${String(maxInput)}`,
    );
  }
  const countTokens = options.countTokens ?? estimateTextTokens;
  const requests: RecordedRequest[] = [];
  let count = 0;

  const resolveStep = (request: ModelRequest, index: number): ScriptStep => {
    const protocol = (message: string, cause?: unknown) =>
      new ModelError(`scripted model "${name}": ${message}`, { kind: "protocol", cause });
    let entry: ScriptStep | ScriptStepFn | undefined =
      typeof script === "function" ? script : script[index];
    if (typeof entry === "function") {
      try {
        entry = entry(request, index);
      } catch (error) {
        throw protocol(`step ${index + 1} function threw: ${String(error)}`, error);
      }
    }
    if (entry === undefined) {
      const given =
        typeof script === "function"
          ? "the step function returned undefined"
          : `the script has ${script.length} step(s)`;
      throw protocol(
        `no step ${index + 1} for request ${index + 1} (attempt ${request.attemptId}); ${given}. The code under test asked the model once more than scripted: add a step, or check why it asked again.`,
      );
    }
    const problem = checkStep(entry);
    if (problem) throw protocol(`step ${index + 1} ${problem}`);
    return entry;
  };

  async function* play(request: ModelRequest, index: number): AsyncGenerator<ModelEvent> {
    const { signal } = request;
    const aborted = () =>
      new ModelError(`scripted model "${name}": request ${index + 1} aborted`, {
        kind: "aborted",
        cause: signal.reason,
      });
    const wait = async (ms: number | undefined) => {
      if (ms === undefined || ms <= 0) return;
      try {
        await sleep(clock, ms, signal);
      } catch {
        throw aborted();
      }
    };
    const hang = () =>
      new Promise<never>((_, reject) => {
        if (signal.aborted) reject(aborted());
        else signal.addEventListener("abort", () => reject(aborted()), { once: true });
      });
    if (signal.aborted) throw aborted();
    const limit = Math.min(window ?? Infinity, maxInput ?? Infinity);
    if (limit !== Infinity) {
      const tokens = requestTokens(request, countTokens);
      if (tokens > limit) {
        throw new ModelError(
          `This model's maximum ${limit === window ? "context length" : "input length"} is ${limit} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`,
          {
            kind: "http",
            status: 400,
            code: "context_length_exceeded",
            type: "invalid_request_error",
          },
        );
      }
    }
    const step = resolveStep(request, index);
    // Waits only when there is a delay: an await of nothing still costs a promise and a turn of
    // the microtask queue for every chunk.
    if (step.delayMs) await wait(step.delayMs);
    if (step.error) {
      const e = step.error;
      const kind = e.kind ?? (e.status !== undefined ? "http" : "network");
      const message =
        e.message ?? `scripted ${e.status !== undefined ? `HTTP ${e.status}` : kind} error`;
      throw new ModelError(message, { ...e, kind });
    }
    const events = eventsOf(step);
    const clamp = (n: number | undefined) => (n === undefined ? -1 : Math.min(n, events.length));
    const hangAt = step.hang ? 0 : clamp(step.hangAfter);
    const cutAt = clamp(step.cutAfter);
    for (let k = 0; ; k++) {
      if (k === hangAt) await hang();
      if (k === cutAt) {
        throw new ModelError(`scripted model "${name}": stream cut after ${k} chunk(s)`, {
          kind: "stream_cut",
        });
      }
      if (k === events.length) return;
      if (k > 0 && step.chunkDelayMs) await wait(step.chunkDelayMs);
      if (signal.aborted) throw aborted();
      yield events[k];
    }
  }

  return {
    name,
    input: { images: options.images ?? true },
    capabilities: options.capabilities,
    requests,
    contextWindow: window,
    maxOutputTokens: reserve,
    ...(maxInput === undefined ? {} : { maxInputTokens: maxInput }),
    countTokens: options.countTokens,
    reset() {
      requests.length = 0;
      count = 0;
    },
    stream(request: ModelRequest): AsyncIterable<ModelEvent> {
      const index = count++;
      if (record !== "none") {
        const history =
          record === "deep" ? structuredClone([...request.messages]) : [...request.messages];
        const messages = toChatMessages(request.messages);
        const tools: ModelToolSpec[] = [...request.tools];
        requests.push({
          ...request,
          messages: record === "deep" ? structuredClone(messages) : messages,
          history,
          tools,
          index,
        });
      }
      return play(request, index);
    },
  };
}
