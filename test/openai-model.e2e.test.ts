import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { userText } from "../contracts/messages.ts";
import type { Model, ModelEvent, ModelRequest } from "../contracts/model.ts";
import { ModelError } from "../contracts/model.ts";
import { classifyModelError, parseRetryAfter } from "../machines/policies/retry-classify.ts";
import { wholeLines } from "../providers/openai-fetch.ts";
import { openaiModel } from "../providers/openai-model.ts";
import {
  chunk,
  contextOverflow,
  cutAfterText,
  cutBeforeAnyByte,
  endWithoutFinish,
  type FakeOpenAIServer,
  type FakeStep,
  insufficientQuota,
  lengthInToolArguments,
  malformedArguments,
  neverAnswer,
  rateLimited,
  serviceUnavailable,
  stallAfterText,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";

let server: FakeOpenAIServer;
let model: Model;

beforeEach(async () => {
  server = await startFakeOpenAIServer();
  model = openaiModel({ contextWindow: 8192, model: "fake-model", baseURL: server.baseURL });
});
afterEach(async () => {
  await server.close();
});

function request(signal = new AbortController().signal): ModelRequest {
  return {
    messages: [userText("hi")],
    tools: [
      {
        type: "function",
        function: { name: "read_file", description: "Read a file", parameters: { type: "object" } },
      },
    ],
    signal,
    attemptId: "att_1",
  };
}

async function collect(m: Model, req = request()) {
  const events: ModelEvent[] = [];
  try {
    for await (const e of m.stream(req)) events.push(e);
    return { events, error: undefined };
  } catch (error) {
    return { events, error: error as ModelError };
  }
}

describe("openaiModel over real HTTP with the real SDK", () => {
  it("streams text, then usage, then finish, with stream:true and include_usage on the wire", async () => {
    server.enqueue(streamReply({ text: ["Hel", "lo"], usage: { prompt: 5, completion: 2 } }));
    const { events, error } = await collect(model);
    expect(error).toBeUndefined();
    expect(events).toEqual([
      { type: "text.delta", text: "Hel" },
      { type: "text.delta", text: "lo" },
      { type: "usage", usage: { inputTokens: 5, outputTokens: 2 } },
      { type: "finish", reason: "stop" },
    ]);
    const body = server.requests[0].body;
    expect(body).toMatchObject({
      model: "fake-model",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "hi" }],
    });
    expect(body.tools?.[0].function.name).toBe("read_file");
  });

  it("a dummy API key is used when only baseURL is given, and extraBody reaches the server", async () => {
    const m = openaiModel({
      contextWindow: 8192,
      model: "fake-model",
      baseURL: server.baseURL,
      extraBody: { temperature: 0.2 },
    });
    server.enqueue(streamReply({ text: "x" }));
    await collect(m);
    const auth = server.requests[0].headers.authorization;
    expect(auth).toBe(`Bearer ${process.env.OPENAI_API_KEY || "not-needed"}`);
    expect(server.requests[0].body.temperature).toBe(0.2);
  });

  it("tool-call deltas are keyed by index: start with id and name on first sight, deltas, end at finish", async () => {
    server.enqueue(
      streamReply({
        text: "Reading.",
        calls: [
          { id: "call_a", name: "read_file", args: ['{"pa', 'th":"a"}'] },
          { id: "call_b", name: "list_dir", args: ['{"dir":', '"."}'] },
        ],
      }),
    );
    const { events, error } = await collect(model);
    expect(error).toBeUndefined();
    const calls = events.filter((e) => e.type.startsWith("call."));
    expect(calls).toEqual([
      { type: "call.start", index: 0, id: "call_a", name: "read_file" },
      { type: "call.delta", index: 0, argumentsDelta: '{"pa' },
      { type: "call.delta", index: 0, argumentsDelta: 'th":"a"}' },
      { type: "call.start", index: 1, id: "call_b", name: "list_dir" },
      { type: "call.delta", index: 1, argumentsDelta: '{"dir":' },
      { type: "call.delta", index: 1, argumentsDelta: '"."}' },
      { type: "call.end", index: 0 },
      { type: "call.end", index: 1 },
    ]);
    expect(events.at(-1)).toEqual({ type: "finish", reason: "tool_calls" });
  });

  it('finish_reason "length" in the middle of tool arguments is reported as length with the partial arguments', async () => {
    server.enqueue(lengthInToolArguments());
    const { events } = await collect(model);
    const args = events
      .filter((e) => e.type === "call.delta")
      .map((e) => (e.type === "call.delta" ? e.argumentsDelta : ""))
      .join("");
    expect(args).toBe('{"path": "/tmp/a.txt", "content": "hel');
    expect(events.at(-1)).toEqual({ type: "finish", reason: "length" });
  });

  it("malformed arguments pass through verbatim: parsing is the tool layer's job", async () => {
    server.enqueue(malformedArguments());
    const { events, error } = await collect(model);
    expect(error).toBeUndefined();
    const args = events
      .flatMap((e) => (e.type === "call.delta" ? [e.argumentsDelta] : []))
      .join("");
    expect(args).toBe('{"path": "/tmp/a",,}');
    expect(events.at(-1)).toEqual({ type: "finish", reason: "tool_calls" });
  });

  it('legacy "function_call" and unknown finish reasons map to tool_calls or stop', async () => {
    server.enqueue(
      streamReply({ calls: [{ id: "c", name: "f", args: "{}" }], finishReason: "function_call" }),
      streamReply({ text: "ok", finishReason: "eos_token_weird" }),
    );
    expect((await collect(model)).events.at(-1)).toEqual({ type: "finish", reason: "tool_calls" });
    expect((await collect(model)).events.at(-1)).toEqual({ type: "finish", reason: "stop" });
  });
});

describe("openaiModel maps every fault to a ModelError, with the SDK's own retries off", () => {
  const cases = [
    ["429 Retry-After: 2", rateLimited({ "retry-after": "2" }), 429, "rate_limit", 2000],
    ["429 retry-after-ms", rateLimited({ "retry-after-ms": "1500" }), 429, "rate_limit", 1500],
    ["429 Retry-After: 0", rateLimited({ "retry-after": "0" }), 429, "rate_limit", 0],
    ["503 without Retry-After", serviceUnavailable(), 503, "overloaded", undefined],
    ["400 context overflow", contextOverflow(), 400, "context_overflow", undefined],
    ["429 insufficient_quota", insufficientQuota(), 429, "quota", undefined],
  ] as const;
  for (const [label, reply, status, category, waitMs] of cases) {
    it(`${label} → kind http, status ${status}, category ${category}, one request only`, async () => {
      server.enqueue(reply, streamReply({ text: "must not be requested" }));
      const { error } = await collect(model);
      expect(error).toBeInstanceOf(ModelError);
      expect(error?.kind).toBe("http");
      expect(error?.status).toBe(status);
      expect(error?.headers["content-type"]).toContain("application/json");
      expect(classifyModelError(error).category).toBe(category);
      const after = parseRetryAfter(error?.headers, Date.now());
      expect(after).toEqual(
        waitMs === undefined
          ? { kind: "absent" }
          : expect.objectContaining({ kind: "delay", ms: waitMs }),
      );
      expect(server.requests).toHaveLength(1);
    });
  }

  it("an HTTP-date Retry-After survives the trip as a header the policy converts against wall time", async () => {
    const date = new Date(Date.now() + 30_000).toUTCString();
    server.enqueue(rateLimited({ "retry-after": date }));
    const { error } = await collect(model);
    expect(error?.headers["retry-after"]).toBe(date);
    const after = parseRetryAfter(error?.headers, Date.parse(date) - 30_000);
    expect(after).toMatchObject({ kind: "delay", ms: 30_000 });
  });

  it("the context-overflow error keeps its OpenAI code, type and body", async () => {
    server.enqueue(contextOverflow());
    const { error } = await collect(model);
    expect(error).toMatchObject({ code: "context_length_exceeded", type: "invalid_request_error" });
    expect(error?.body).toMatchObject({ message: expect.stringMatching(/maximum context length/) });
  });

  it("a socket destroyed before any byte is a network error", async () => {
    server.enqueue(cutBeforeAnyByte());
    const { events, error } = await collect(model);
    expect(events).toEqual([]);
    expect(error?.kind).toBe("network");
    expect(classifyModelError(error)).toMatchObject({ retryable: true, category: "network" });
  });

  it("a socket destroyed after text started is a stream cut, after the text was delivered", async () => {
    server.enqueue(cutAfterText("partial "));
    const { events, error } = await collect(model);
    expect(events).toEqual([{ type: "text.delta", text: "partial " }]);
    expect(error?.kind).toBe("stream_cut");
    expect(classifyModelError(error).retryable).toBe(true);
  });

  it("a cut in the middle of an SSE chunk is a stream cut", async () => {
    server.enqueue(cutAfterText("partial ", { midChunk: true }));
    const { error } = await collect(model);
    expect(error?.kind).toBe("stream_cut");
  });

  it("a body that ends cleanly without finish_reason is a stream cut", async () => {
    server.enqueue(endWithoutFinish("half"));
    const { events, error } = await collect(model);
    expect(events).toEqual([{ type: "text.delta", text: "half" }]);
    expect(error?.kind).toBe("stream_cut");
  });

  it("an error object inside the stream becomes an http ModelError with its code", async () => {
    server.enqueue([
      { type: "sse", data: chunk({ role: "assistant", content: "a" }) },
      {
        type: "sse",
        data: { error: { message: "Overloaded", type: "overloaded_error", code: "overloaded" } },
      },
      { type: "end" },
    ]);
    const { error } = await collect(model);
    expect(error).toMatchObject({ kind: "http", type: "overloaded_error" });
    expect(classifyModelError(error)).toMatchObject({ retryable: true, category: "overloaded" });
  });

  it("a cut after the finish chunk (before usage and [DONE]) still completes the message", async () => {
    server.enqueue([
      { type: "sse", data: chunk({ role: "assistant", content: "done" }) },
      { type: "sse", data: chunk({}, "stop") },
      { type: "destroy" },
    ]);
    const { events, error } = await collect(model);
    expect(error).toBeUndefined();
    expect(events).toEqual([
      { type: "text.delta", text: "done" },
      { type: "finish", reason: "stop" },
    ]);
  });

  it('finish_reason "error" is a protocol error, not a completed message', async () => {
    server.enqueue(streamReply({ text: "x", finishReason: "error" }));
    const { error } = await collect(model);
    expect(error?.kind).toBe("protocol");
  });

  it("an unparsable chunk is a protocol error", async () => {
    server.enqueue([{ type: "raw", text: "data: {not json\n\n" }, { type: "end" }]);
    const { error } = await collect(model);
    expect(error?.kind).toBe("protocol");
  });

  it("aborting a request the server never answers rejects promptly with kind aborted", async () => {
    server.enqueue(neverAnswer());
    const ac = new AbortController();
    const pending = collect(model, request(ac.signal));
    await server.waitForRequests(1);
    const t0 = performance.now();
    ac.abort(new Error("user interrupt"));
    const { error } = await pending;
    expect(error?.kind).toBe("aborted");
    expect(performance.now() - t0).toBeLessThan(1000);
  });

  it("aborting mid-stream rejects with kind aborted, not a stream cut", async () => {
    server.enqueue(stallAfterText("some"));
    const ac = new AbortController();
    const it = model.stream(request(ac.signal))[Symbol.asyncIterator]();
    expect((await it.next()).value).toEqual({ type: "text.delta", text: "some" });
    const next = it.next();
    ac.abort();
    await expect(next).rejects.toMatchObject({ kind: "aborted" });
  });

  it("an already-aborted signal fails before any request is sent", async () => {
    const ac = new AbortController();
    ac.abort();
    const { error } = await collect(model, request(ac.signal));
    expect(error?.kind).toBe("aborted");
    expect(server.requests).toHaveLength(0);
  });

  it("a first-chunk timeout on the real clock aborts the request after ~200 ms", async () => {
    const m = openaiModel({
      contextWindow: 8192,
      model: "fake-model",
      baseURL: server.baseURL,
      firstChunkTimeoutMs: 200,
    });
    server.enqueue(neverAnswer());
    const t0 = performance.now();
    const { error } = await collect(m);
    const elapsed = performance.now() - t0;
    expect(error?.kind).toBe("first_chunk_timeout");
    expect(elapsed).toBeGreaterThanOrEqual(195);
    expect(elapsed).toBeLessThan(2000);
    expect(classifyModelError(error)).toMatchObject({ retryable: true, category: "timeout" });
  });

  it("an idle timeout on the real clock fires when a stream stalls after text", async () => {
    const m = openaiModel({
      contextWindow: 8192,
      model: "fake-model",
      baseURL: server.baseURL,
      idleTimeoutMs: 200,
    });
    server.enqueue(stallAfterText("so far"));
    const { events, error } = await collect(m);
    expect(events).toEqual([{ type: "text.delta", text: "so far" }]);
    expect(error?.kind).toBe("idle_timeout");
  });

  it("rejects invalid options with a message naming the option", () => {
    expect(() =>
      openaiModel({ contextWindow: 8192, model: "m", baseURL: server.baseURL, idleTimeoutMs: 0 }),
    ).toThrow(/idleTimeoutMs must be > 0/);
    expect(() => openaiModel({ contextWindow: 8192, model: "", baseURL: server.baseURL })).toThrow(
      /model/,
    );
  });
});

describe("replies from the wild: bodies without the error wrapper, JSON 200, long SSE lines", () => {
  it("a vLLM error body with a top-level message keeps its text, and a context-length message is classified as overflow", async () => {
    const message =
      "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.";
    server.enqueue([
      {
        type: "json",
        status: 400,
        body: { object: "error", message, type: "BadRequestError", param: null, code: 400 },
      },
    ]);
    const { error } = await collect(model);
    expect(error?.kind).toBe("http");
    expect(error?.status).toBe(400);
    expect(error?.message).toContain("maximum context length is 4096 tokens");
    expect(error?.message).not.toContain("no body");
    expect(classifyModelError(error).category).toBe("context_overflow");
    expect(server.requests).toHaveLength(1);
  });

  it("a body with only `detail` (FastAPI proxies) keeps its text", async () => {
    server.enqueue([{ type: "json", status: 503, body: { detail: "upstream model is loading" } }]);
    const { error } = await collect(model);
    expect(error?.message).toContain("upstream model is loading");
    expect(classifyModelError(error).category).toBe("overloaded");
  });

  it("a non-streamed JSON 200 reply is read as the same answer, not retried as a connection cut", async () => {
    server.enqueue([
      {
        type: "json",
        status: 200,
        body: {
          id: "chatcmpl-json",
          object: "chat.completion",
          created: 1_700_000_000,
          model: "fake-model",
          choices: [
            {
              index: 0,
              message: {
                role: "assistant",
                content: "plain JSON",
                tool_calls: [
                  {
                    id: "call_1",
                    type: "function",
                    function: { name: "read_file", arguments: '{"path":"a"}' },
                  },
                ],
              },
              finish_reason: "tool_calls",
            },
          ],
          usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
        },
      },
    ]);
    const { events, error } = await collect(model);
    expect(error).toBeUndefined();
    expect(events).toEqual([
      { type: "text.delta", text: "plain JSON" },
      { type: "call.start", index: 0, id: "call_1", name: "read_file" },
      { type: "call.delta", index: 0, argumentsDelta: '{"path":"a"}' },
      { type: "call.end", index: 0 },
      { type: "usage", usage: { inputTokens: 7, outputTokens: 3 } },
      { type: "finish", reason: "tool_calls" },
    ]);
    expect(server.requests).toHaveLength(1);
  });

  it("a JSON 200 that holds an error becomes that error, with its text", async () => {
    server.enqueue([
      {
        type: "json",
        status: 200,
        body: { object: "error", message: "rate limit reached for this key", code: 429 },
      },
    ]);
    const { error } = await collect(model);
    expect(error?.status).toBe(429);
    expect(error?.message).toContain("rate limit reached for this key");
    expect(classifyModelError(error).category).toBe("rate_limit");
  });

  it("a 4 MB SSE line sent in 1 KB pieces arrives whole (the SDK's decoder sees it in one piece)", async () => {
    const args = JSON.stringify({ path: "big.txt", content: "x".repeat(4 * 1024 * 1024) });
    const line = `data: ${JSON.stringify(chunk({ tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "read_file", arguments: args } }] }))}\n\n`;
    const pieces: FakeStep[] = [{ type: "head" }];
    for (let i = 0; i < line.length; i += 1024)
      pieces.push({ type: "raw", text: line.slice(i, i + 1024) });
    pieces.push(
      { type: "sse", data: chunk({}, "tool_calls") },
      { type: "raw", text: "data: [DONE]\n\n" },
      { type: "end" },
    );
    server.enqueue(pieces);
    const { events, error } = await collect(model);
    expect(error).toBeUndefined();
    const text = events
      .filter((e): e is Extract<ModelEvent, { type: "call.delta" }> => e.type === "call.delta")
      .map((e) => e.argumentsDelta)
      .join("");
    expect(text).toBe(args);
  });

  it("an SSE line over the limit fails the stream with an error that names the limit, not a timeout", async () => {
    const body = new Blob(["data: ", "y".repeat(3000)]).stream();
    const lines = wholeLines(body, 1024);
    const reader = lines.getReader();
    const failure = await reader.read().then(
      () => reader.read(),
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(ModelError);
    expect((failure as ModelError).kind).toBe("protocol");
    expect((failure as ModelError).message).toContain("SSE line longer than 1024 bytes");
  });
});

describe("openaiModel and the environment: the rule keel uses", () => {
  const saved = { key: process.env.OPENAI_API_KEY, url: process.env.OPENAI_BASE_URL };
  afterEach(() => {
    for (const [name, value] of [
      ["OPENAI_API_KEY", saved.key],
      ["OPENAI_BASE_URL", saved.url],
    ] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });

  it("with only OPENAI_BASE_URL set, openaiModel() reaches that server without a key, as keel run does", async () => {
    delete process.env.OPENAI_API_KEY;
    process.env.OPENAI_BASE_URL = server.baseURL;
    server.enqueue(streamReply({ text: "local" }));
    const local = openaiModel({ model: "qwen2.5", contextWindow: 8192 });
    const { events, error } = await collect(local);
    expect(error).toBeUndefined();
    expect(events).toContainEqual({ type: "text.delta", text: "local" });
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0].body).toMatchObject({ model: "qwen2.5" });
  });

  it("an exported but empty variable is unset; the options win over the environment; env can be passed", async () => {
    process.env.OPENAI_API_KEY = "";
    process.env.OPENAI_BASE_URL = "";
    expect(() => openaiModel({ model: "m", contextWindow: 8192 })).toThrow(
      /no API key\. Pass \{ apiKey \} or set OPENAI_API_KEY; for a server without auth, pass \{ baseURL \} or set OPENAI_BASE_URL/,
    );
    process.env.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"; // wrong: the option below wins
    server.enqueue(streamReply({ text: "a" }), streamReply({ text: "b" }));
    const byOption = openaiModel({ model: "m", contextWindow: 8192, baseURL: server.baseURL });
    expect((await collect(byOption)).error).toBeUndefined();
    const byEnv = openaiModel({
      model: "m",
      contextWindow: 8192,
      env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "sk-from-env" },
    });
    expect((await collect(byEnv)).error).toBeUndefined();
    expect(server.requests.map((r) => r.headers.authorization)).toEqual([
      "Bearer not-needed",
      "Bearer sk-from-env",
    ]);
  });

  it("a server that cannot be reached is named in the error", async () => {
    const gone = openaiModel({ model: "m", contextWindow: 8192, baseURL: "http://127.0.0.1:9/v1" });
    const { error } = await collect(gone);
    expect(error?.kind).toBe("network");
    expect(error?.message).toContain("http://127.0.0.1:9/v1");
  });
});
