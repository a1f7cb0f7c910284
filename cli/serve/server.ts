/**
 * The control protocol server's connection (docs/protocol.md): the NDJSON input pump and its
 * backpressure, frame checks, the `hello` handshake, the table of requests in flight and the
 * shutdown that ends them all. It is the entry point the CLI and the tests import; what one
 * request does lives beside it: session-table.ts opens and closes sessions, permission-asks.ts
 * asks the client for permissions, session-requests.ts runs the requests about one session.
 */
import type { Readable, Writable } from "node:stream";
import type { Logger } from "pino";
import { MAX_TIMER_MS } from "../../contracts/clock.ts";
import { LineDecoder, type LineResult } from "../../contracts/ndjson.ts";
import {
  DEFAULT_MAX_FRAME_BYTES,
  majorOf,
  PROTOCOL_VERSION,
  REQUEST_TYPES,
  type RequestFrame,
  type RequestId,
  type RequestType,
  SERVER_CAPABILITIES,
} from "../../contracts/protocol.ts";
import type { AgentOptions, Model, SessionStore } from "../../index.ts";
import { ControlChannel } from "./control.ts";
import { ProtocolError } from "./protocol-error.ts";
import { isRequestType, readId, readRequest } from "./requests.ts";
import { runSessionRequest } from "./session-requests.ts";
import { sessionTable } from "./session-table.ts";
import { FrameWriter } from "./writer.ts";

/** The connection {@link serve} runs on, and the defaults of the sessions it opens. */
/** How long the input must be quiet before `goodbye` (see `inputQuiet`). */
const QUIET_MS = 100;
/** The longest `goodbye` waits for a quiet input. */
const QUIET_CAP_MS = 1_000;

export interface ServerOptions {
  input: Readable;
  output: Writable;
  store: SessionStore;
  /** A model for each new session. Contract: returns a fresh or shareable Model; may throw. */
  model: () => Model;
  logger: Logger;
  version: string;
  /** Bound on one incoming line. Default `DEFAULT_MAX_FRAME_BYTES` (8 MiB). */
  maxFrameBytes?: number;
  /** Bytes that may wait for the client to read before model streams pause. Default 1 MiB. */
  maxBufferedBytes?: number;
  /** Default timeout of `tool.execute`. Default 300 000 ms. */
  controlTimeoutMs?: number;
  /** Default timeout of `permission.request`. Default 60 000 ms. */
  permissionTimeoutMs?: number;
  /** Bound on settling turns and flushing at the end. Default 20 000 ms. */
  shutdownDeadlineMs?: number;
  /** Passed to every session's agent (deadlines, limits, retry). */
  agent?: Partial<Omit<AgentOptions, "model" | "tools" | "store" | "permissions" | "logger">>;
}

/** A running server: see {@link serve}. */
export interface Server {
  /** Resolves with the terminal reason once turns are settled, logs flushed and stdout ended. */
  readonly closed: Promise<string>;
  /** Ends the connection (idempotent): the first reason is the terminal one. */
  shutdown(reason: string): Promise<string>;
  /** Observability for tests: the writer (coalescing, congestion). */
  readonly writer: FrameWriter;
}

interface InFlight {
  id: RequestId;
  type: RequestType;
}

const keyOf = (id: RequestId) => `${typeof id}:${id}`;

/**
 * The control protocol server (docs/protocol.md): reads NDJSON frames from `input`, writes them
 * to `output`, and runs many sessions, one agent each (each session has its own client tools and
 * permission policy; they share the store). Bad frames get an `error` frame and the server
 * goes on. The connection ends when `input` ends, `output` breaks, or `shutdown()` is called:
 * every request in flight fails at once with the terminal reason, every control request too,
 * running turns are interrupted and settled, logs flushed, a `goodbye` frame is written and
 * `closed` resolves.
 */
export function serve(options: ServerOptions): Server {
  const log = options.logger;
  const maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  const controlTimeoutMs = options.controlTimeoutMs ?? 300_000;
  const permissionTimeoutMs = options.permissionTimeoutMs ?? 60_000;
  for (const [name, ms] of [
    ["controlTimeoutMs", controlTimeoutMs],
    ["permissionTimeoutMs", permissionTimeoutMs],
    ["shutdownDeadlineMs", options.shutdownDeadlineMs ?? 20_000],
  ] as const) {
    if (!Number.isSafeInteger(ms) || ms < 1 || ms > MAX_TIMER_MS)
      throw new RangeError(
        `serve: ${name} must be an integer from 1 to ${MAX_TIMER_MS} (milliseconds; a longer timer fires at once), got ${String(ms)}`,
      );
  }
  const decoder = new LineDecoder(maxFrameBytes);
  const inflight = new Map<string, InFlight>();
  let helloReceived = false;
  let closing: Promise<string> | undefined;
  let resolveClosed!: (reason: string) => void;
  const closed = new Promise<string>((resolve) => {
    resolveClosed = resolve;
  });

  const writer = new FrameWriter({
    out: options.output,
    maxBufferedBytes: options.maxBufferedBytes ?? 1024 * 1024,
    onBroken: (reason) => void shutdown(reason),
  });
  const send = writer.send.bind(writer);
  const control = new ControlChannel(send);
  const gate = () => (writer.congested ? writer.whenWritable() : undefined);
  const table = sessionTable({
    store: options.store,
    model: options.model,
    ...(options.agent ? { agent: options.agent } : {}),
    logger: log,
    control,
    send,
    gate,
    controlTimeoutMs,
    permissionTimeoutMs,
  });
  const { sessions } = table;

  send({
    type: "hello",
    protocol: PROTOCOL_VERSION,
    server: { name: "keel", version: options.version },
    capabilities: [...SERVER_CAPABILITIES],
    limits: { maxFrameBytes },
  });

  // Input backpressure: lines are handled one at a time, each after the answers of the one
  // before were written; while the client does not read what we write, we stop handling its
  // lines and stop reading its input (its writes then block in the pipe), so unread responses
  // cannot pile up without end.
  const lines: LineResult[] = [];
  let pumping = false;
  let inputDone = false;
  const pump = async () => {
    if (pumping) return;
    pumping = true;
    try {
      while (lines.length > 0) {
        if (writer.congested && !writer.broken) {
          await writer.whenWritable();
          continue;
        }
        handleLine(lines.shift()!);
        // The request's answer (when it has one at once) is written before the next line.
        await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      pumping = false;
    }
    if (inputDone) void shutdown("stdin ended");
    else if (!closed_ && !writer.congested) options.input.resume();
    else if (!closed_) void writer.whenWritable().then(() => !closed_ && void pump());
  };
  let closed_ = false;
  const onData = (chunk: Buffer) => {
    lines.push(...decoder.push(chunk));
    if (lines.length === 0) return;
    // No more chunks until these lines are handled (and the client reads what they answer).
    options.input.pause();
    void pump();
  };
  const onEnd = () => {
    inputDone = true;
    lines.push(...decoder.end());
    void pump();
  };
  const onError = (err: Error) => void shutdown(`stdin failed: ${err.message}`);
  options.input.on("data", onData);
  options.input.on("end", onEnd);
  options.input.on("error", onError);

  function handleLine(line: LineResult): void {
    if (line.type === "bad") {
      const id = readId(line.id);
      // A reply to a control request (read from the head of a line too long to keep): that
      // request fails now, instead of waiting for its timeout; the error frame names it by `ref`.
      if ((line.frameType === "ok" || line.frameType === "error") && typeof id === "string") {
        send({ type: "error", ref: id, code: line.code, message: line.message });
        control.fail(
          id,
          `the client's reply to ${id} was not accepted: ${line.message}`,
          line.code,
        );
        return;
      }
      send({
        type: "error",
        ...(id !== undefined ? { id } : {}),
        code: line.code,
        message: line.message,
      });
      return;
    }
    handleFrame(line.frame);
  }

  function handleFrame(frame: Record<string, unknown>) {
    const type = frame.type;
    const id = readId(frame.id);
    const error = (code: string, message: string) =>
      send({ type: "error", ...(id !== undefined ? { id } : {}), code, message });
    if (typeof type !== "string") {
      return error("INVALID_FRAME", 'a frame needs a string "type" (e.g. "hello", "prompt", "ok")');
    }
    if (type === "hello") return hello(frame, error);
    if (type === "ok" || type === "error") {
      if (typeof frame.id !== "string") {
        return error(
          "INVALID_FRAME",
          `an "${type}" frame answers a control request: its "id" must be the request's id (e.g. "k1")`,
        );
      }
      if (type === "ok" && !("result" in frame)) {
        return send({
          type: "error",
          ref: frame.id,
          code: "INVALID_FRAME",
          message: `the "ok" reply to ${frame.id} needs a "result"`,
        });
      }
      if (
        type === "error" &&
        (typeof frame.code !== "string" || typeof frame.message !== "string")
      ) {
        return send({
          type: "error",
          ref: frame.id,
          code: "INVALID_FRAME",
          message: `the "error" reply to ${frame.id} needs a string "code" and "message"`,
        });
      }
      return control.settle(frame as unknown as Parameters<typeof control.settle>[0]);
    }
    if (!isRequestType(type)) {
      return error(
        "UNKNOWN_TYPE",
        `unknown frame type ${JSON.stringify(type)}; requests are ${["hello", ...REQUEST_TYPES, "ok", "error"].join(", ")} (see docs/protocol.md)`,
      );
    }
    if (id === undefined) {
      return error(
        "INVALID_FRAME",
        `${type}: "id" must be a non-empty string (≤ 256 chars) or an integer; the response carries it`,
      );
    }
    if (!helloReceived) {
      return error(
        "HELLO_REQUIRED",
        `${type} ${id}: send {"type":"hello","protocol":"${PROTOCOL_VERSION}"} first`,
      );
    }
    if (closing) return error("SHUTTING_DOWN", `${type} ${id}: the server is shutting down`);
    const key = keyOf(id);
    if (inflight.has(key)) {
      // `ref`, not `id`: the request in flight under this id gets its own, single response.
      return send({
        type: "error",
        ref: id,
        code: "DUPLICATE_ID",
        message: `request id ${JSON.stringify(id)} is already in flight; this ${type} was not run. Use a new id for each request`,
      });
    }
    let request: RequestFrame;
    try {
      request = readRequest(frame, type);
    } catch (err) {
      return error((err as ProtocolError).code, (err as Error).message);
    }
    inflight.set(key, { id, type });
    run(request).then(
      (result) => {
        if (inflight.delete(key)) send({ type: "ok", id, result });
      },
      (err: unknown) => {
        if (!inflight.delete(key)) return;
        if (err instanceof ProtocolError) {
          send({
            type: "error",
            id,
            code: err.code,
            message: err.message,
            ...(err.refusal ? { refusal: err.refusal } : {}),
          });
        } else {
          // A store that refused (full disk, locked, unreachable) is not a bug in Keel.
          const store = (err as Error)?.name === "StoreError";
          log.error({ err, type, id }, "a request failed");
          send({
            type: "error",
            id,
            code: store ? "STORE_FAILED" : "INTERNAL",
            message: `${type} failed: ${store ? `the session store refused it (${(err as { code?: string }).code}): ` : ""}${(err as Error)?.message ?? String(err)}`,
          });
        }
      },
    );
  }

  function hello(frame: Record<string, unknown>, error: (code: string, message: string) => void) {
    if (helloReceived)
      return error("INVALID_FRAME", "hello was already received; send it once, first");
    const major = majorOf(frame.protocol);
    if (major === undefined) {
      return error(
        "INVALID_FRAME",
        `hello: "protocol" must be "major.minor" (e.g. "${PROTOCOL_VERSION}"), got ${JSON.stringify(frame.protocol)}`,
      );
    }
    if (major !== majorOf(PROTOCOL_VERSION)) {
      return error(
        "UNSUPPORTED_VERSION",
        `the client speaks protocol ${frame.protocol as string}; this server speaks ${PROTOCOL_VERSION} and accepts ${majorOf(PROTOCOL_VERSION)}.x only. Use a client for protocol ${majorOf(PROTOCOL_VERSION)}.x (or a Keel that speaks ${frame.protocol as string}).`,
      );
    }
    helloReceived = true;
  }

  async function run(request: RequestFrame): Promise<unknown> {
    switch (request.type) {
      case "session.open":
        return table.open(request);
      case "sessions.list":
        return table.list();
      default:
        break;
    }
    const entry = table.opened(request.sessionId);
    // Closed at once (before any await): an open of the same id sent next waits for this close.
    if (request.type === "session.close") {
      await table.close(entry);
      return {};
    }
    await entry.ready;
    return runSessionRequest(entry, request, send);
  }

  /**
   * Reads the client's input until it has been quiet for {@link QUIET_MS} (at most
   * {@link QUIET_CAP_MS}) and every line read is answered: a request the client sent before it
   * could see `goodbye` gets its `SHUTTING_DOWN`, not silence.
   */
  async function inputQuiet(): Promise<void> {
    if (inputDone || writer.broken) return;
    const start = Date.now();
    let last = start;
    const seen = () => {
      last = Date.now();
    };
    options.input.on("data", seen);
    if (!writer.congested) options.input.resume();
    const sleep = () => new Promise((resolve) => setTimeout(resolve, 5));
    while (Date.now() - start < QUIET_CAP_MS) {
      if (Date.now() - last >= QUIET_MS && lines.length === 0 && !pumping) break;
      await sleep();
    }
    options.input.off("data", seen);
  }

  function shutdown(reason: string): Promise<string> {
    closing ??= (async () => {
      log.info({ reason }, "keel serve: shutting down");
      // Input is still read until goodbye: every request sent meanwhile gets SHUTTING_DOWN.
      options.input.off("end", onEnd);
      // Requests on both sides fail at once, with the one terminal reason.
      for (const r of inflight.values()) {
        send({
          type: "error",
          id: r.id,
          code: "SHUTTING_DOWN",
          message: `${r.type} ${r.id} did not complete: ${reason}`,
        });
      }
      inflight.clear();
      for (const entry of sessions.values()) {
        entry.session
          .interrupt(`the connection ended: ${reason}`)
          .catch((err) => log.error({ err }, "interrupting a session at shutdown failed"));
      }
      control.failAll(reason);
      const settled = Promise.all(
        [...sessions.values()].map((e) =>
          table.close(e).catch((err) => log.error({ err }, "closing a session failed")),
        ),
      );
      const deadline = options.shutdownDeadlineMs ?? 20_000;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"late">((resolve) => {
        timer = setTimeout(() => resolve("late"), deadline);
      });
      if ((await Promise.race([settled, late])) === "late") {
        log.error({ deadline }, "keel serve: sessions did not settle in time; exiting anyway");
      }
      clearTimeout(timer);
      await inputQuiet(); // requests already sent are read and answered SHUTTING_DOWN
      send({ type: "goodbye", reason });
      closed_ = true;
      options.input.off("data", onData);
      options.input.destroy();
      await writer.end(2000);
      resolveClosed(reason);
      return reason;
    })();
    return closing;
  }

  return { closed, shutdown, writer };
}
