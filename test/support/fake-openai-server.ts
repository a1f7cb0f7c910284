import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

/**
 * A loopback HTTP server for tests over real HTTP (OpenAI-compatible Chat Completions by its
 * reply builders below; the other wire formats build their replies in anthropic-wire.ts,
 * responses-wire.ts and gemini-wire.ts): each request
 * takes the next scripted reply (a list of steps), and every request is recorded with its
 * parsed body. `close()` destroys open sockets, so a test never hangs on a stalled reply.
 */

/** One step of a scripted reply, executed in order. */
export type FakeStep =
  /** Status line and headers (written implicitly, as 200 text/event-stream, before the first `sse`). */
  | { type: "head"; status?: number; headers?: Record<string, string> }
  /** One SSE event: `data: <json or string>\n\n`, after an `event: <name>` line when named. */
  | { type: "sse"; data: unknown; event?: string }
  /** Bytes as they are (a half chunk, a comment, `data: [DONE]`). */
  | { type: "raw"; text: string }
  /** A complete JSON response (errors). */
  | { type: "json"; status: number; body: unknown; headers?: Record<string, string> }
  /** Pause until the promise settles (a barrier the test controls). */
  | { type: "gate"; until: Promise<unknown> }
  /** Pause for `ms` from when this step is reached (not from when the reply was queued). */
  | { type: "sleep"; ms: number }
  /** Destroy the socket now: a cut connection. */
  | { type: "destroy" }
  /** Stop here and never answer or finish (until `close()`). */
  | { type: "hang" }
  /** End the response normally. */
  | { type: "end" };

export type FakeReply = FakeStep[];

export interface RecordedRequest {
  index: number;
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  /** The parsed JSON body (or the raw text when it is not JSON). */
  body: RecordedBody;
  /** When the server received it (epoch ms). */
  at: number;
  /** Set when the client closed the connection before the reply ended. */
  aborted?: boolean;
}

/** The Chat Completions request fields tests look at; anything else stays reachable. */
export interface RecordedBody {
  model?: string;
  messages?: { role: string; content?: unknown }[];
  tools?: { type: string; function: { name: string } }[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  [field: string]: unknown;
}

export interface FakeOpenAIServer {
  /** e.g. `http://127.0.0.1:41234/v1`, for `baseURL`. */
  readonly baseURL: string;
  readonly requests: readonly RecordedRequest[];
  /** Requests received whose response has not finished (or closed) yet. */
  readonly inFlight: number;
  /** The most requests ever in flight at once. */
  readonly maxInFlight: number;
  /** Queues replies for the next requests, in order. */
  enqueue(...replies: FakeReply[]): void;
  /** Resolves when at least `count` requests have arrived. */
  waitForRequests(count: number): Promise<void>;
  close(): Promise<void>;
}

/** Options of {@link startFakeOpenAIServer}. */
export interface FakeServerOptions {
  /**
   * Checks a request's wire format as the real server would: a returned message answers the
   * request with a 400 carrying it (the scripted reply stays queued for the next request).
   */
  check?: (request: RecordedRequest) => string | undefined;
}

/** Starts the server on 127.0.0.1 and a random port. Unscripted requests get a clear 500. */
export async function startFakeOpenAIServer(
  options: FakeServerOptions = {},
): Promise<FakeOpenAIServer> {
  const queue: FakeReply[] = [];
  const requests: RecordedRequest[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  const sockets = new Set<Socket>();
  let closed = false;
  let inFlight = 0;
  let maxInFlight = 0;
  let releaseHangs!: () => void;
  const closing = new Promise<void>((resolve) => {
    releaseHangs = resolve;
  });

  const server = createServer((req, res) => {
    void handle(req, res).catch(() => res.destroy());
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    let body: RecordedBody = { raw: text };
    try {
      body = JSON.parse(text);
    } catch {}
    const index = requests.length;
    const record: RecordedRequest = {
      index,
      method: req.method ?? "",
      url: req.url ?? "",
      headers: req.headers,
      body,
      at: Date.now(),
    };
    requests.push(record);
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    let done = false;
    // `finish` fires when the last byte is handed to the OS: before the client can have read it.
    const ended = () => {
      if (done) return;
      done = true;
      inFlight--;
    };
    res.on("finish", ended);
    res.on("close", () => {
      ended();
      if (!res.writableFinished) record.aborted = true;
    });
    for (const w of waiters.splice(0)) {
      if (requests.length >= w.count) w.resolve();
      else waiters.push(w);
    }
    const refused = options.check?.(record);
    if (refused !== undefined) {
      await play(errorReply(400, { message: refused, type: "BadRequestError" }), res);
      return;
    }
    const reply = queue.shift() ?? [
      {
        type: "json",
        status: 500,
        body: {
          error: {
            message: `fake server: no reply scripted for request #${index}; call enqueue() first`,
            type: "server_error",
          },
        },
      },
    ];
    await play(reply, res);
  }

  async function play(reply: FakeReply, res: ServerResponse) {
    const write = (text: string) =>
      new Promise<void>((resolve) => res.write(text, () => resolve()));
    const head = (status = 200, headers: Record<string, string> = {}) => {
      if (res.headersSent) return;
      res.writeHead(status, {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        ...headers,
      });
      res.flushHeaders();
    };
    for (const step of reply) {
      if (closed) return;
      switch (step.type) {
        case "head":
          head(step.status, step.headers);
          break;
        case "sse":
          head();
          await write(
            `${step.event ? `event: ${step.event}\n` : ""}data: ${typeof step.data === "string" ? step.data : JSON.stringify(step.data)}\n\n`,
          );
          break;
        case "raw":
          head();
          await write(step.text);
          break;
        case "json":
          res.writeHead(step.status, { "content-type": "application/json", ...step.headers });
          res.end(JSON.stringify(step.body));
          return;
        case "gate":
          await Promise.race([step.until, closing]);
          break;
        case "sleep":
          await Promise.race([new Promise((r) => setTimeout(r, step.ms)), closing]);
          break;
        case "destroy":
          res.socket?.destroy();
          return;
        case "hang":
          await closing;
          return;
        case "end":
          head();
          res.end();
          return;
      }
    }
    if (!res.writableEnded) res.end();
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    get inFlight() {
      return inFlight;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    enqueue: (...replies) => {
      queue.push(...replies);
    },
    waitForRequests: (count) =>
      requests.length >= count
        ? Promise.resolve()
        : new Promise((resolve) => waiters.push({ count, resolve })),
    close: async () => {
      closed = true;
      releaseHangs();
      for (const s of sockets) s.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Reply builders: the faults TESTING.md asks for.

let chunkSeq = 0;

/** One `chat.completion.chunk` with choice 0. */
export function chunk(delta: Record<string, unknown>, finishReason: string | null = null) {
  return {
    id: `chatcmpl-fake-${++chunkSeq}`,
    object: "chat.completion.chunk",
    created: 1_700_000_000,
    model: "fake-model",
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  };
}

/** The final usage chunk (`stream_options.include_usage`): empty `choices`. */
export function usageChunk(promptTokens: number, completionTokens: number) {
  return {
    id: `chatcmpl-fake-${++chunkSeq}`,
    object: "chat.completion.chunk",
    created: 1_700_000_000,
    model: "fake-model",
    choices: [],
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    },
  };
}

const DONE: FakeStep = { type: "raw", text: "data: [DONE]\n\n" };
const sse = (data: unknown): FakeStep => ({ type: "sse", data });

export interface FakeToolCall {
  id: string;
  name: string;
  /** The arguments text, split into the pieces the server streams. */
  args: string | string[];
}

/** A normal stream: text pieces, then tool calls (arguments in pieces), finish, usage, [DONE]. */
export function streamReply(options: {
  text?: string | string[];
  calls?: FakeToolCall[];
  finishReason?: string;
  usage?: { prompt: number; completion: number } | null;
}): FakeReply {
  const texts = typeof options.text === "string" ? [options.text] : (options.text ?? []);
  const steps: FakeStep[] = [sse(chunk({ role: "assistant", content: "" }))];
  for (const t of texts) steps.push(sse(chunk({ content: t })));
  (options.calls ?? []).forEach((call, index) => {
    const pieces = typeof call.args === "string" ? [call.args] : call.args;
    steps.push(
      sse(
        chunk({
          tool_calls: [
            { index, id: call.id, type: "function", function: { name: call.name, arguments: "" } },
          ],
        }),
      ),
    );
    for (const p of pieces)
      steps.push(sse(chunk({ tool_calls: [{ index, function: { arguments: p } }] })));
  });
  const finish = options.finishReason ?? (options.calls?.length ? "tool_calls" : "stop");
  steps.push(sse(chunk({}, finish)));
  const usage = options.usage === undefined ? { prompt: 11, completion: 7 } : options.usage;
  if (usage) steps.push(sse(usageChunk(usage.prompt, usage.completion)));
  steps.push(DONE, { type: "end" });
  return steps;
}

/** A complete error response in the OpenAI error shape. */
export function errorReply(
  status: number,
  error: { message: string; type?: string; code?: string | null; param?: string | null },
  headers: Record<string, string> = {},
): FakeReply {
  return [
    {
      type: "json",
      status,
      headers,
      body: { error: { type: null, code: null, param: null, ...error } },
    },
  ];
}

/** 429 rate limit; pass e.g. `{ "retry-after": "2" }`, an HTTP-date, or `retry-after-ms`. */
export function rateLimited(headers: Record<string, string> = {}): FakeReply {
  return errorReply(
    429,
    {
      message: "Rate limit reached for fake-model on requests per min (RPM): Limit 3, Used 3.",
      type: "requests",
      code: "rate_limit_exceeded",
    },
    headers,
  );
}

export function serviceUnavailable(headers: Record<string, string> = {}): FakeReply {
  return errorReply(
    503,
    { message: "The server is overloaded or not ready yet.", type: "server_error" },
    headers,
  );
}

export function contextOverflow(): FakeReply {
  return errorReply(400, {
    message:
      "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.",
    type: "invalid_request_error",
    param: "messages",
    code: "context_length_exceeded",
  });
}

export function insufficientQuota(): FakeReply {
  return errorReply(429, {
    message:
      "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs.",
    type: "insufficient_quota",
    code: "insufficient_quota",
  });
}

/** The socket is destroyed before any response byte. */
export const cutBeforeAnyByte = (): FakeReply => [{ type: "destroy" }];

/** Text starts streaming, then the socket is destroyed (optionally mid-chunk). */
export function cutAfterText(text: string, options: { midChunk?: boolean } = {}): FakeReply {
  const steps: FakeStep[] = [
    sse(chunk({ role: "assistant", content: "" })),
    sse(chunk({ content: text })),
  ];
  if (options.midChunk) steps.push({ type: "raw", text: 'data: {"id":"chatcmpl-cut","obj' });
  steps.push({ type: "destroy" });
  return steps;
}

/** The connection is accepted and never answered. */
export const neverAnswer = (): FakeReply => [{ type: "hang" }];

/** Headers and some text arrive, then nothing more. */
export const stallAfterText = (text: string): FakeReply => [
  sse(chunk({ role: "assistant", content: text })),
  { type: "hang" },
];

/** The body ends cleanly without any finish_reason (and without [DONE]). */
export const endWithoutFinish = (text: string): FakeReply => [
  sse(chunk({ role: "assistant", content: text })),
  { type: "end" },
];

/** A tool call whose arguments are cut by `finish_reason: "length"` in the middle. */
export const lengthInToolArguments = (): FakeReply =>
  streamReply({
    calls: [
      { id: "call_len", name: "write_file", args: ['{"path": "/tmp/a.txt", ', '"content": "hel'] },
    ],
    finishReason: "length",
  });

/** A complete tool call whose arguments are not valid JSON. */
export const malformedArguments = (): FakeReply =>
  streamReply({
    calls: [{ id: "call_bad", name: "read_file", args: ['{"path": "/tmp/a",', ",}"] }],
  });
