import { createAnthropic } from "@ai-sdk/anthropic";
import { createGoogleGenerativeAI } from "@ai-sdk/google";
import { createOpenAI } from "@ai-sdk/openai";
import type { Model } from "../../contracts/model.ts";
import { type AiSdkModelOptions, aiSdkModel } from "../../providers/ai-sdk-model.ts";
import {
  anthropicError,
  anthropicMessage,
  blockEvents,
  messageStart,
  pieces,
} from "./anthropic-wire.ts";
import type { FakeReply, RecordedBody } from "./fake-openai-server.ts";
import { geminiError, geminiEvents, geminiReply } from "./gemini-wire.ts";
import { responsesError, responsesEvents, responsesReply } from "./responses-wire.ts";

/**
 * One provider's wire, for tests that run the same sessions against each: the real AI SDK
 * provider package pointed at a loopback server, reply builders in the provider's documented
 * format, and readers of what the server received in the provider's request format.
 */
export interface Wire {
  kind: "anthropic" | "openai" | "google";
  model(baseURL: string, options?: AiSdkModelOptions): Model;
  /** A response with one reasoning block (opaque `token`), some text, then `calls` in order. */
  calls(
    calls: { id: string; name: string; args: string }[],
    reasoning: { text: string; token: string },
  ): FakeReply;
  text(text: string): FakeReply;
  /** The response starts a call and its arguments are cut after `keep` characters (socket destroyed). */
  cutMidToolInput(call: { id: string; name: string; args: string }, keep: number): FakeReply;
  /** Some text, then nothing more until the client goes away. */
  hangAfterText(text: string): FakeReply;
  /** The provider's 400 for a prompt over the context window. */
  overflow(): FakeReply;
  rateLimited(retryAfterSeconds: number): FakeReply;
  /** The tool results a request sends, in order: the call id (or name for Gemini) and the text. */
  toolResults(body: RecordedBody): { ref: string; content: string }[];
  /** How each result refers to its call in this format, given the call. */
  ref(call: { id: string; name: string }): string;
  /** The reasoning a request sends back, in the provider's own structure. */
  reasoningSent(body: RecordedBody): unknown[];
  /** The reasoning structure the provider sent in `calls(…, reasoning)`, as it must come back. */
  reasoningExpected(reasoning: { text: string; token: string }): unknown[];
  /** The image parts of the last user message of a request. */
  imagesSent(body: RecordedBody): unknown[];
  /** The system prompt a request sends, in the provider's own place for it (undefined: none). */
  instructionsSent(body: RecordedBody): string | undefined;
}

type Json = Record<string, unknown>;
const asArray = (v: unknown) => (Array.isArray(v) ? (v as Json[]) : []);

export const anthropicWire: Wire = {
  kind: "anthropic",
  model: (baseURL, options) =>
    aiSdkModel(createAnthropic({ baseURL, apiKey: "test-key" })("claude-loopback"), options),
  calls: (calls, reasoning) =>
    anthropicMessage([
      { type: "thinking", thinking: reasoning.text, signature: reasoning.token },
      { type: "text", text: "Let me check both." },
      ...calls.map((c) => ({ type: "tool_use" as const, id: c.id, name: c.name, input: c.args })),
    ]),
  text: (text) => anthropicMessage([{ type: "text", text }]),
  cutMidToolInput: (call, keep) => [
    messageStart(),
    ...blockEvents(0, { type: "tool_use", id: call.id, name: call.name, input: call.args }).slice(
      0,
      1 + pieces(call.args.slice(0, keep), 7).length,
    ),
    { type: "destroy" },
  ],
  hangAfterText: (text) => [
    messageStart(),
    ...blockEvents(0, { type: "text", text }).slice(0, -1),
    { type: "hang" },
  ],
  overflow: () =>
    anthropicError(
      400,
      "invalid_request_error",
      "prompt is too long: 215003 tokens > 200000 maximum",
    ),
  rateLimited: (s) =>
    anthropicError(
      429,
      "rate_limit_error",
      "Number of request tokens has exceeded your per-minute rate limit",
      { "retry-after": String(s) },
    ),
  toolResults: (body) =>
    asArray(body.messages)
      .filter((m) => m.role === "user")
      .flatMap((m) => asArray(m.content))
      .filter((b) => b.type === "tool_result")
      .map((b) => ({
        ref: String(b.tool_use_id),
        content:
          typeof b.content === "string"
            ? b.content
            : asArray(b.content)
                .map((c) => c.text)
                .join(""),
      })),
  ref: (c) => c.id,
  reasoningSent: (body) =>
    asArray(body.messages)
      .filter((m) => m.role === "assistant")
      .flatMap((m) => asArray(m.content))
      .filter((b) => b.type === "thinking" || b.type === "redacted_thinking"),
  reasoningExpected: (r) => [{ type: "thinking", thinking: r.text, signature: r.token }],
  imagesSent: (body) =>
    asArray(asArray(body.messages).at(-1)?.content).filter((b) => b.type === "image"),
  // The Messages API's top-level `system`: a string or text blocks.
  instructionsSent: (body) =>
    body.system === undefined
      ? undefined
      : typeof body.system === "string"
        ? body.system
        : asArray(body.system)
            .map((b) => b.text)
            .join(""),
};

export const openaiResponsesWire: Wire = {
  kind: "openai",
  model: (baseURL, options) =>
    aiSdkModel(createOpenAI({ baseURL, apiKey: "test-key" }).responses("gpt-loopback"), {
      providerOptions: { openai: { store: false, include: ["reasoning.encrypted_content"] } },
      ...options,
    }),
  calls: (calls, reasoning) =>
    responsesReply([
      {
        type: "reasoning",
        id: "rs_loopback1",
        summary: reasoning.text,
        encrypted: reasoning.token,
      },
      { type: "message", id: "msg_loopback1", text: "Let me check both." },
      ...calls.map((c, i) => ({
        type: "function_call" as const,
        id: `fc_loopback${i}`,
        callId: c.id,
        name: c.name,
        arguments: c.args,
      })),
    ]),
  text: (text) => responsesReply([{ type: "message", id: "msg_loopback2", text }]),
  cutMidToolInput: (call, keep) => {
    const events = responsesEvents([
      {
        type: "function_call",
        id: "fc_cut",
        callId: call.id,
        name: call.name,
        arguments: call.args,
      },
    ]);
    // created, in_progress, item added, then the deltas that carry the first `keep` characters
    return [
      ...events.slice(0, 3 + pieces(call.args.slice(0, keep), 7).length),
      { type: "destroy" },
    ];
  },
  hangAfterText: (text) => {
    const events = responsesEvents([{ type: "message", id: "msg_hang", text }]);
    return [...events.slice(0, events.length - 3), { type: "hang" }];
  },
  overflow: () =>
    responsesError(400, {
      message:
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
      type: "invalid_request_error",
      param: "input",
      code: "context_length_exceeded",
    }),
  rateLimited: (s) =>
    responsesError(
      429,
      {
        message:
          "Rate limit reached for gpt-loopback on tokens per min (TPM). Please try again in 1s.",
        type: "tokens",
        code: "rate_limit_exceeded",
      },
      { "retry-after": String(s) },
    ),
  toolResults: (body) =>
    asArray(body.input)
      .filter((i) => i.type === "function_call_output")
      .map((i) => ({ ref: String(i.call_id), content: String(i.output) })),
  ref: (c) => c.id,
  reasoningSent: (body) => asArray(body.input).filter((i) => i.type === "reasoning"),
  reasoningExpected: (r) => [
    {
      type: "reasoning",
      id: "rs_loopback1",
      encrypted_content: r.token,
      summary: [{ type: "summary_text", text: r.text }],
    },
  ],
  imagesSent: (body) =>
    asArray(asArray(body.input).at(-1)?.content).filter((b) => b.type === "input_image"),
  // The Responses API's `input` items with role system (or developer, for reasoning models).
  instructionsSent: (body) => {
    const system = asArray(body.input).filter((i) => i.role === "system" || i.role === "developer");
    return system.length === 0 ? undefined : system.map((i) => String(i.content)).join("\n");
  },
};

export const geminiWire: Wire = {
  kind: "google",
  model: (baseURL, options) =>
    aiSdkModel(
      createGoogleGenerativeAI({ baseURL, apiKey: "test-key" })("gemini-loopback"),
      options,
    ),
  calls: (calls, reasoning) =>
    geminiReply([
      { text: reasoning.text, thought: true },
      { text: "Let me check both." },
      ...calls.map((c, i) => ({
        functionCall: { name: c.name, args: JSON.parse(c.args) as Record<string, unknown> },
        // Gemini signs the first call of a response (thought signatures).
        ...(i === 0 ? { thoughtSignature: reasoning.token } : {}),
      })),
    ]),
  text: (text) => geminiReply([{ text }]),
  cutMidToolInput: (_call, _keep) => [
    // Gemini streams a call whole, in one part: cut the stream after the text before it.
    ...geminiEvents([{ text: "Reading" }]).slice(0, 1),
    {
      type: "raw",
      text: 'data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"sl',
    },
    { type: "destroy" },
  ],
  hangAfterText: (text) => [...firstChunk(text), { type: "hang" }],
  overflow: () =>
    geminiError(
      400,
      "INVALID_ARGUMENT",
      "The input token count (1203456) exceeds the maximum number of tokens allowed (1048576).",
    ),
  rateLimited: (s) =>
    geminiError(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).", {
      "retry-after": String(s),
    }),
  toolResults: (body) =>
    asArray(body.contents)
      .flatMap((c) => asArray(c.parts))
      .filter((p) => p.functionResponse)
      .map((p) => {
        const r = p.functionResponse as Json;
        return { ref: String(r.name), content: String((r.response as Json).content) };
      }),
  ref: (c) => c.name,
  reasoningSent: (body) =>
    asArray(body.contents)
      .filter((c) => c.role === "model")
      .flatMap((c) => asArray(c.parts))
      .filter((p) => p.thought === true || p.thoughtSignature !== undefined)
      .map((p) =>
        p.functionCall ? { functionCall: true, thoughtSignature: p.thoughtSignature } : p,
      ),
  reasoningExpected: (r) => [
    { text: r.text, thought: true },
    { functionCall: true, thoughtSignature: r.token },
  ],
  imagesSent: (body) =>
    asArray(asArray(body.contents).at(-1)?.parts).filter((p) => p.inlineData || p.fileData),
  // Gemini's `systemInstruction` (its parts' text), outside `contents`.
  instructionsSent: (body) => {
    const system = body.systemInstruction as Json | undefined;
    return system === undefined
      ? undefined
      : asArray(system.parts)
          .map((p) => p.text)
          .join("");
  },
};

function firstChunk(text: string): FakeReply {
  return [
    {
      type: "sse",
      data: {
        candidates: [{ content: { role: "model", parts: [{ text }] }, index: 0 }],
        modelVersion: "gemini-loopback",
      },
    },
  ];
}

export const WIRES: readonly Wire[] = [anthropicWire, openaiResponsesWire, geminiWire];
