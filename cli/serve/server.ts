import { randomUUID } from "node:crypto";
import type { Readable, Writable } from "node:stream";
import type { Logger } from "pino";
import { MAX_TIMER_MS } from "../../contracts/clock.ts";
import { LineDecoder, type LineResult } from "../../contracts/ndjson.ts";
import {
  DEFAULT_MAX_FRAME_BYTES,
  type EntryRecord,
  majorOf,
  PROTOCOL_VERSION,
  REQUEST_TYPES,
  type RequestFrame,
  type RequestId,
  type RequestMap,
  type RequestType,
  SERVER_CAPABILITIES,
  type SessionPermissions,
} from "../../contracts/protocol.ts";
import {
  type Agent,
  type AgentOptions,
  createAgent,
  type Model,
  type PermissionAction,
  type PermissionOptions,
  type PermissionReply,
  type PermissionRequest,
  type PermissionRule,
  type Session,
  type SessionStore,
} from "../../index.ts";
import { COLLAPSED_NOTE, shownCall } from "../shown-text.ts";
import { clientTool } from "./client-tools.ts";
import { ControlChannel, ControlFailure } from "./control.ts";
import { gatedModel } from "./gated-model.ts";
import { previewThrottle } from "./previews.ts";
import { ProtocolError } from "./protocol-error.ts";
import { isRequestType, readId, readReply, readRequest } from "./requests.ts";
import { FrameWriter } from "./writer.ts";

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

export interface Server {
  /** Resolves with the terminal reason once turns are settled, logs flushed and stdout ended. */
  readonly closed: Promise<string>;
  /** Ends the connection (idempotent): the first reason is the terminal one. */
  shutdown(reason: string): Promise<string>;
  /** Observability for tests: the writer (coalescing, congestion). */
  readonly writer: FrameWriter;
}

interface OpenSession {
  id: string;
  agent: Agent;
  session: Session;
  ready: Promise<void>;
  unsubscribe?: () => void;
  /** Stops withdrawing the session's decided `permission.request`s (see `open`). */
  stopWithdrawing: () => void;
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
  const sessions = new Map<string, OpenSession>();
  /** Sessions being closed: an open of the same id waits for its close to end. */
  const closingSessions = new Map<string, Promise<void>>();
  const inflight = new Map<string, InFlight>();
  /** Control id of each waiting `permission.request`, by session and permission request id. */
  const asks = new Map<string, string>();
  const askKey = (sessionId: string, requestId: string) => JSON.stringify([sessionId, requestId]);
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
          log.error({ err, type, id }, "a request failed");
          send({
            type: "error",
            id,
            code: "INTERNAL",
            message: `${type} failed: ${(err as Error)?.message ?? String(err)}`,
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

  function opened(sessionId: string): OpenSession {
    const entry = sessions.get(sessionId);
    if (!entry) {
      throw new ProtocolError(
        "UNKNOWN_SESSION",
        `no open session ${JSON.stringify(sessionId)}: open it with session.open first (sessions.list shows stored ones)`,
      );
    }
    return entry;
  }

  async function run(request: RequestFrame): Promise<unknown> {
    switch (request.type) {
      case "session.open":
        return open(request);
      case "sessions.list": {
        const stored = await options.store.list();
        const listed = stored.map((s) => ({ ...s, open: sessions.has(s.sessionId) }));
        return { sessions: listed } satisfies RequestMap["sessions.list"]["result"];
      }
      default:
        break;
    }
    const entry = opened(request.sessionId);
    // Closed at once (before any await): an open of the same id sent next waits for this close.
    if (request.type === "session.close") {
      await closeSession(entry);
      return {};
    }
    await entry.ready;
    const { session } = entry;
    switch (request.type) {
      case "prompt": {
        const inboxId = `in_${randomUUID()}`;
        const result = await session.prompt(request.text, { id: inboxId });
        return { inboxId, ...result } satisfies RequestMap["prompt"]["result"];
      }
      case "steer":
        return { inboxId: await session.steer(request.text) };
      case "follow_up":
        return { inboxId: await session.followUp(request.text) };
      case "interrupt":
        // Awaited: a refused append (disk full) is this request's error, not a crash.
        await session.interrupt(request.reason ?? "interrupted by the client");
        return {};
      case "permission.reply": {
        const replied = session.replyPermission(request.requestId, request.reply);
        if (!replied.ok) throw new ProtocolError("REFUSED", replied.message, replied.code);
        return {};
      }
      case "compact": {
        const result = await session.compact(
          request.keepRecentTokens !== undefined
            ? { keepRecentTokens: request.keepRecentTokens }
            : {},
        );
        if (!result.ok) throw new ProtocolError("REFUSED", result.message, result.code);
        return {
          entryId: result.entry.id,
          firstKeptId: result.firstKeptId,
          tokensBefore: result.tokensBefore,
          tokensAfter: result.tokensAfter,
          summarized: result.summarized,
          omitted: result.omitted,
          durable: result.durable,
        } satisfies RequestMap["compact"]["result"];
      }
      case "messages":
        return { messages: [...session.messages()] };
      case "entries": {
        const after = request.afterSeq ?? -1;
        const entries = session.entries().filter((e) => e.seq > after);
        return { entries: entries as unknown as EntryRecord[] };
      }
      case "subscribe": {
        entry.unsubscribe?.();
        const only = request.events ? new Set<string>(request.events) : undefined;
        const sessionId = entry.id;
        // Argument previews go out bounded and throttled (cli/serve/previews.ts).
        const bounded = previewThrottle(() => performance.now());
        entry.unsubscribe = session.subscribe((event) => {
          if (only && !only.has(event.type)) return;
          const shown = bounded(event);
          if (shown) send({ type: "event", sessionId, event: shown });
        });
        return {};
      }
      case "unsubscribe":
        entry.unsubscribe?.();
        entry.unsubscribe = undefined;
        return {};
      default: {
        const never: never = request;
        return never;
      }
    }
  }

  async function open(request: RequestFrame<"session.open">) {
    const closingNow =
      request.sessionId === undefined ? undefined : closingSessions.get(request.sessionId);
    if (closingNow) await closingNow.catch(() => {});
    if (request.sessionId !== undefined && sessions.has(request.sessionId)) {
      throw new ProtocolError(
        "SESSION_OPEN",
        `session ${request.sessionId} is already open in this server; use it, or session.close it first`,
      );
    }
    // The id is needed by the tools and the permission gate before the agent exists.
    const sessionId = request.sessionId ?? `s_${randomUUID()}`;
    const tools = (request.tools ?? []).map((spec, i) =>
      clientTool(spec, i, {
        execute: (params) => control.request("tool.execute", { sessionId, ...params }),
        cancel: (id, reason) => control.notifyCancel(id, reason),
        invalidReply: (id, message) =>
          send({ type: "error", ref: id, code: "INVALID_REPLY", message }),
        defaultTimeoutMs: controlTimeoutMs,
      }),
    );
    const names = new Set<string>();
    for (const tool of tools) {
      if (names.has(tool.name)) {
        throw new ProtocolError(
          "INVALID_TOOL",
          `two tools are named "${tool.name}"; tool names must be unique`,
        );
      }
      names.add(tool.name);
    }
    const permissions = request.permissions
      ? readPermissions(request.permissions, sessionId)
      : undefined;
    let model: Model;
    try {
      model = options.model();
    } catch (err) {
      throw new ProtocolError(
        "INTERNAL",
        `the server could not create a model: ${(err as Error).message}`,
      );
    }
    const agent = createAgent({
      ...options.agent,
      model: gatedModel(model, gate),
      tools,
      store: options.store,
      logger: log,
      ...(permissions ? { permissions } : {}),
    });
    const session = agent.session(sessionId);
    // A request is decided by its own reply, a reply to another request that reached it, a
    // policy or the end of its turn: its `permission.request` is withdrawn when the decision is
    // emitted, before the call runs or settles.
    const stopWithdrawing = session.subscribe((event) => {
      if (event.type === "permission.decided") withdrawAsk(sessionId, event.requestId);
    });
    const entry: OpenSession = {
      id: sessionId,
      agent,
      session,
      ready: session.ready,
      stopWithdrawing,
    };
    sessions.set(sessionId, entry);
    try {
      await session.ready;
    } catch (err) {
      sessions.delete(sessionId);
      stopWithdrawing();
      await agent.close().catch(() => {});
      throw new ProtocolError(
        "INTERNAL",
        `session ${sessionId} could not be loaded from the store: ${(err as Error).message}`,
      );
    }
    return {
      sessionId,
      entries: session.entries().length,
    } satisfies RequestMap["session.open"]["result"];
  }

  function readPermissions(value: SessionPermissions, sessionId: string): PermissionOptions {
    const bad = (message: string): never => {
      throw new ProtocolError("INVALID_FRAME", `session.open: permissions.${message}`);
    };
    const actions = new Set<PermissionAction>(["allow", "deny", "ask"]);
    const risks = new Set(["low", "medium", "high"]);
    if (value.rules !== undefined && !Array.isArray(value.rules)) bad("rules must be an array");
    for (const [i, rule] of (value.rules ?? []).entries()) {
      const r = rule as Partial<PermissionRule> | null;
      if (!r || !actions.has(r.action as PermissionAction))
        bad(`rules[${i}].action must be "allow", "deny" or "ask"`);
      if (r?.tool !== undefined && typeof r.tool !== "string")
        bad(`rules[${i}].tool must be a tool name or "*"`);
      if (r?.risk !== undefined && !risks.has(r.risk))
        bad(`rules[${i}].risk must be "low", "medium" or "high"`);
    }
    for (const [risk, action] of Object.entries(value.defaults ?? {})) {
      if (!risks.has(risk) || !actions.has(action as PermissionAction)) {
        bad(
          `defaults must map "low" | "medium" | "high" to "allow" | "deny" | "ask"; got ${risk}: ${JSON.stringify(action)}`,
        );
      }
    }
    const timeoutMs = value.timeoutMs ?? permissionTimeoutMs;
    if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_TIMER_MS)
      bad(
        `timeoutMs must be an integer from 1 to ${MAX_TIMER_MS} (milliseconds; 2^31 − 1 is the longest timer, a longer one would fire at once), got ${JSON.stringify(value.timeoutMs)}`,
      );
    const onTimeout = value.onTimeout ?? "deny";
    if (onTimeout !== "deny" && onTimeout !== "deny_with_feedback")
      bad('onTimeout must be "deny" or "deny_with_feedback"');
    return {
      ...(value.rules ? { rules: value.rules } : {}),
      ...(value.defaults ? { defaults: value.defaults } : {}),
      ask: (request) => askClient(sessionId, request, timeoutMs, onTimeout),
    };
  }

  /** One `permission.request`; the broker reads a rejection as `deny`. */
  async function askClient(
    sessionId: string,
    request: PermissionRequest,
    timeoutMs: number,
    onTimeout: "deny" | "deny_with_feedback",
  ): Promise<PermissionReply> {
    const shown = shownCall(request.args);
    const display = `${request.tool} ${shown.text}${shown.collapsed ? ` ${COLLAPSED_NOTE}` : ""}`;
    const sent = control.request("permission.request", {
      sessionId,
      request,
      timeoutMs,
      display,
    });
    const key = askKey(sessionId, request.requestId);
    asks.set(key, sent.id);
    try {
      const value = await sent.result;
      return readReply(value, (expected) => {
        const message = `the reply to permission.request ${sent.id} must be ${expected}; read as deny`;
        send({ type: "error", ref: sent.id, code: "INVALID_REPLY", message });
        throw new ProtocolError("INVALID_FRAME", message);
      });
    } catch (err) {
      if (err instanceof ControlFailure && err.kind === "timeout") {
        return onTimeout === "deny"
          ? { type: "deny" }
          : {
              type: "deny_with_feedback",
              feedback: `no one answered the permission request for ${request.tool} within ${timeoutMs} ms, so it did not run`,
            };
      }
      throw err;
    } finally {
      if (asks.get(key) === sent.id) asks.delete(key);
    }
  }

  /** Withdraws the `permission.request` of a request that was decided (if one still waits). */
  function withdrawAsk(sessionId: string, requestId: string): void {
    const key = askKey(sessionId, requestId);
    const id = asks.get(key);
    if (id === undefined) return;
    asks.delete(key);
    control.withdraw(
      id,
      "decided: a reply to another request of the session answered it, or its turn ended",
    );
  }

  function closeSession(entry: OpenSession): Promise<void> {
    if (sessions.get(entry.id) !== entry) return closingSessions.get(entry.id) ?? Promise.resolve();
    sessions.delete(entry.id);
    const done = entry.agent.close().finally(() => {
      entry.unsubscribe?.();
      entry.stopWithdrawing();
      if (closingSessions.get(entry.id) === done) closingSessions.delete(entry.id);
    });
    closingSessions.set(entry.id, done);
    return done;
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
          closeSession(e).catch((err) => log.error({ err }, "closing a session failed")),
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
