import { type ChildProcess, spawn } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { AgentEvent, AgentEventType } from "../contracts/events.ts";
import { LineDecoder } from "../contracts/ndjson.ts";
import type { PermissionReply, PermissionRequest } from "../contracts/permission.ts";
import {
  type ClientToolSpec,
  type ControlFrame,
  DEFAULT_MAX_FRAME_BYTES,
  type ErrorFrame,
  type HelloFrame,
  majorOf,
  PROTOCOL_VERSION,
  type RequestId,
  type RequestMap,
  type RequestType,
  type SessionPermissions,
} from "../contracts/protocol.ts";
import type { ToolResult } from "../contracts/tool-result.ts";
import { KeelConnectionError, KeelRequestError } from "./errors.ts";

/** How `connect` reaches a server: spawn one (the default) or attach to its streams. */
export interface ConnectOptions {
  /**
   * Attach to a server already running: `input` is its output (stdout), `output` its input
   * (stdin). Without it, `connect` spawns one.
   */
  streams?: { input: Readable; output: Writable };
  /** The command to spawn. Default: `node <this package>/cli/bin.js serve --stdio`. */
  command?: string;
  /** Its arguments (with `command`), or what follows `serve --stdio` (without). */
  args?: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** The spawned server's stderr (its logs). Default "inherit". */
  stderr?: "inherit" | "ignore" | "pipe";
  client?: { name: string; version?: string };
  /** Called with `error` frames that answer no request of this client (a late reply, …). */
  onProtocolError?: (frame: ErrorFrame) => void;
}

/** What a client tool's `execute` receives beside its arguments. */
export interface ClientToolContext {
  callId: string;
  sessionId: string;
  idempotencyKey: string;
  /** Aborted when Keel cancels the call, it times out, or the connection ends. */
  signal: AbortSignal;
}

/** A tool this process runs for the model: its declaration plus its `execute`. */
export interface ClientTool extends ClientToolSpec {
  /**
   * Contract: resolves with a string or a `ToolResult`; may reject (an `EXECUTION_FAILED` result
   * with the message, or a cancelled call when `ctx.signal` was aborted).
   */
  execute(
    args: unknown,
    ctx: ClientToolContext,
  ): Promise<string | ToolResult> | string | ToolResult;
}

/**
 * Answers a permission request. Contract: resolves with a reply; a rejection or no handler is a
 * `deny`. `signal` aborts when the request is withdrawn, times out or the connection ends.
 */
export type PermissionHandler = (
  request: PermissionRequest,
  ctx: { signal: AbortSignal },
) => Promise<PermissionReply> | PermissionReply;

/** `client.openSession` options: the session's id, client-side tools and permission handling. */
export interface OpenSessionOptions {
  sessionId?: string;
  tools?: ClientTool[];
  /** The session's policy; absent = every call allowed (as in the library). */
  permissions?: SessionPermissions;
  onPermission?: PermissionHandler;
}

type Params<K extends RequestType> = RequestMap[K]["params"];
type Result<K extends RequestType> = RequestMap[K]["result"];

interface Pending {
  resolve: (result: unknown) => void;
  reject: (error: Error) => void;
}

interface SessionHandlers {
  tools: Map<string, ClientTool>;
  onPermission?: PermissionHandler;
  listeners: Set<(event: AgentEvent) => void>;
}

const DEFAULT_BIN = fileURLToPath(new URL("../cli/bin.js", import.meta.url));

/**
 * Connects to a Keel server speaking the control protocol (docs/protocol.md): spawns
 * `keel serve --stdio` (or attaches to `streams`), exchanges `hello`s and resolves once the
 * server's hello arrived. Rejects with `KeelConnectionError` if the server ends first or speaks
 * another major version.
 */
export async function connect(options: ConnectOptions = {}): Promise<KeelClient> {
  let child: ChildProcess | undefined;
  let input: Readable;
  let output: Writable;
  if (options.streams) {
    ({ input, output } = options.streams);
  } else {
    const command = options.command ?? process.execPath;
    const args = options.command
      ? (options.args ?? [])
      : [DEFAULT_BIN, "serve", "--stdio", ...(options.args ?? [])];
    child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ["pipe", "pipe", options.stderr ?? "inherit"],
    });
    input = child.stdout!;
    output = child.stdin!;
  }
  const client = new KeelClient(input, output, child, options);
  await client.ready;
  return client;
}

/**
 * One connection to a Keel server. Requests are typed by `RequestMap`; each resolves with its
 * `ok` result or rejects with `KeelRequestError`. When the connection ends, every pending
 * request rejects at once with one `KeelConnectionError` (the terminal reason), running tool
 * and permission handlers are aborted, and `closed` resolves with the reason.
 */
export class KeelClient {
  /** The server's hello (protocol version, capabilities, limits). */
  server!: HelloFrame;
  readonly ready: Promise<void>;
  /** Resolves with the terminal reason when the connection has ended. */
  readonly closed: Promise<string>;
  /** The spawned server, if `connect` spawned it. */
  readonly process: ChildProcess | undefined;
  private readonly output: Writable;
  private readonly options: ConnectOptions;
  private readonly pending = new Map<string, Pending>();
  private readonly sessions = new Map<string, SessionHandlers>();
  /** Running control handlers by control id, to abort on `cancel`. */
  private readonly running = new Map<string, AbortController>();
  private nextId = 0;
  private terminal: KeelConnectionError | undefined;
  /** The reason the server's `goodbye` gave: the terminal reason when it sent one. */
  private goodbye: string | undefined;
  private maxFrameBytes = DEFAULT_MAX_FRAME_BYTES;
  private resolveClosed!: (reason: string) => void;
  private helloWaiter!: { resolve: () => void; reject: (e: Error) => void };

  constructor(
    input: Readable,
    output: Writable,
    child: ChildProcess | undefined,
    options: ConnectOptions,
  ) {
    this.output = output;
    this.process = child;
    this.options = options;
    this.closed = new Promise((resolve) => {
      this.resolveClosed = resolve;
    });
    this.ready = new Promise((resolve, reject) => {
      this.helloWaiter = { resolve, reject };
    });
    const decoder = new LineDecoder(1024 * 1024 * 1024);
    input.on("data", (chunk: Buffer) => {
      for (const line of decoder.push(chunk)) {
        if (line.type === "frame") this.onFrame(line.frame);
        else
          this.options.onProtocolError?.({ type: "error", code: line.code, message: line.message });
      }
    });
    const ended = (why: string) => {
      if (!child || child.exitCode !== null || child.signalCode !== null) return this.end(why);
      // The server's stdout ended: its exit status, when it comes at once, says why.
      const timer = setTimeout(() => this.end(why), 200);
      child.once("exit", () => clearTimeout(timer));
    };
    input.on("end", () => ended("the server's stdout ended"));
    input.on("error", (e) => ended(`reading the server failed: ${e.message}`));
    output.on("error", (e: NodeJS.ErrnoException) =>
      this.end(`writing to the server failed (${e.code ?? e.message})`),
    );
    child?.on("exit", (code, signal) =>
      this.end(
        signal ? `the server was killed by ${signal}` : `the server exited with code ${code}`,
      ),
    );
    child?.on("error", (e) => this.end(`the server could not start: ${e.message}`));
    this.send({
      type: "hello",
      protocol: PROTOCOL_VERSION,
      capabilities: [],
      ...(options.client ? { client: options.client } : {}),
    });
  }

  /** Sends a request; resolves with its `ok` result. */
  request<K extends RequestType>(type: K, params: Params<K>): Promise<Result<K>> {
    if (this.terminal) return Promise.reject(this.terminal);
    const id = ++this.nextId;
    const line = `${JSON.stringify({ ...params, type, id })}\n`;
    if (Buffer.byteLength(line) - 1 > this.maxFrameBytes) {
      return Promise.reject(
        new KeelRequestError(
          "FRAME_TOO_LARGE",
          `${type}: the frame is ${Buffer.byteLength(line) - 1} bytes, over the server's bound of ${this.maxFrameBytes}`,
          id,
        ),
      );
    }
    return new Promise((resolve, reject) => {
      this.pending.set(String(id), { resolve: resolve as (r: unknown) => void, reject });
      this.output.write(line);
    });
  }

  /** Opens (or reopens from the store) a session with its client tools and permission handler. */
  async openSession(options: OpenSessionOptions = {}): Promise<ClientSession> {
    const tools = (options.tools ?? []).map(({ execute: _e, ...spec }) => spec);
    const params: Params<"session.open"> = {
      ...(options.sessionId ? { sessionId: options.sessionId } : {}),
      ...(tools.length ? { tools } : {}),
      ...(options.permissions ? { permissions: options.permissions } : {}),
    };
    const handlers: SessionHandlers = {
      tools: new Map((options.tools ?? []).map((t) => [t.name, t])),
      onPermission: options.onPermission,
      listeners: new Set(),
    };
    // Registered before the reply: a control request may follow it at once.
    if (options.sessionId) this.sessions.set(options.sessionId, handlers);
    try {
      const { sessionId, entries } = await this.request("session.open", params);
      this.sessions.set(sessionId, handlers);
      return new ClientSession(this, sessionId, entries, handlers);
    } catch (err) {
      if (options.sessionId) this.sessions.delete(options.sessionId);
      throw err;
    }
  }

  /** The sessions in the server's store. */
  listSessions(): Promise<Result<"sessions.list">["sessions"]> {
    return this.request("sessions.list", {}).then((r) => r.sessions);
  }

  /**
   * Ends the connection: closes the server's stdin (it settles its turns, flushes and exits)
   * and resolves with the terminal reason when the server is gone.
   */
  close(): Promise<string> {
    if (!this.terminal) this.output.end();
    return this.closed;
  }

  /** @internal */
  forget(sessionId: string): void {
    this.sessions.delete(sessionId);
  }

  private send(frame: object): void {
    if (this.terminal) return;
    this.output.write(`${JSON.stringify(frame)}\n`);
  }

  private onFrame(frame: Record<string, unknown>): void {
    switch (frame.type) {
      case "hello": {
        const hello = frame as unknown as HelloFrame;
        if (majorOf(hello.protocol) !== majorOf(PROTOCOL_VERSION)) {
          this.end(
            `the server speaks protocol ${hello.protocol}; this client speaks ${PROTOCOL_VERSION}`,
          );
          this.output.end();
          return;
        }
        this.server = hello;
        this.maxFrameBytes = hello.limits?.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
        this.helloWaiter.resolve();
        return;
      }
      case "ok":
      case "error": {
        const pending = frame.id !== undefined ? this.pending.get(String(frame.id)) : undefined;
        if (!pending) {
          if (frame.type === "error")
            this.options.onProtocolError?.(frame as unknown as ErrorFrame);
          return;
        }
        this.pending.delete(String(frame.id));
        if (frame.type === "ok") pending.resolve(frame.result);
        else {
          const e = frame as unknown as ErrorFrame;
          pending.reject(new KeelRequestError(e.code, e.message, e.id as RequestId, e.refusal));
        }
        return;
      }
      case "event": {
        const handlers = this.sessions.get(frame.sessionId as string);
        for (const listener of handlers?.listeners ?? []) listener(frame.event as AgentEvent);
        return;
      }
      case "cancel":
        this.running.get(frame.id as string)?.abort(new Error(String(frame.reason)));
        return;
      case "permission.request":
      case "tool.execute":
        void this.control(frame as unknown as ControlFrame);
        return;
      case "goodbye":
        this.goodbye = String(frame.reason);
        return;
      default:
        return; // a newer minor version's frame: ignored
    }
  }

  private async control(frame: ControlFrame): Promise<void> {
    const abort = new AbortController();
    this.running.set(frame.id, abort);
    const handlers = this.sessions.get(frame.sessionId);
    try {
      if (frame.type === "permission.request") {
        if (!handlers?.onPermission) {
          throw Object.assign(new Error(`no permission handler for session ${frame.sessionId}`), {
            code: "NO_HANDLER",
          });
        }
        const reply = await handlers.onPermission(frame.request, { signal: abort.signal });
        this.send({ type: "ok", id: frame.id, result: reply });
      } else {
        const tool = handlers?.tools.get(frame.tool);
        if (!tool) {
          throw Object.assign(
            new Error(`no client tool ${frame.tool} in session ${frame.sessionId}`),
            {
              code: "NO_HANDLER",
            },
          );
        }
        const result = await tool.execute(frame.args, {
          callId: frame.callId,
          sessionId: frame.sessionId,
          idempotencyKey: frame.idempotencyKey,
          signal: abort.signal,
        });
        this.send({ type: "ok", id: frame.id, result });
      }
    } catch (err) {
      const code = abort.signal.aborted
        ? "CANCELLED"
        : ((err as { code?: string }).code ?? "FAILED");
      this.send({
        type: "error",
        id: frame.id,
        code,
        message: (err as Error)?.message ?? String(err),
      });
    } finally {
      this.running.delete(frame.id);
    }
  }

  private end(why: string): void {
    if (this.terminal) return;
    const reason = this.goodbye ? `the server closed the connection: ${this.goodbye}` : why;
    const error = new KeelConnectionError(reason);
    this.terminal = error;
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const p of pending) p.reject(error);
    for (const abort of this.running.values()) abort.abort(error);
    this.running.clear();
    this.helloWaiter.reject(error);
    this.resolveClosed(reason);
  }
}

/** One open session of a `KeelClient`. */
export class ClientSession {
  constructor(
    private readonly client: KeelClient,
    readonly id: string,
    /** Entries the session had in the store when opened (0 for a new one). */
    readonly entriesAtOpen: number,
    private readonly handlers: SessionHandlers,
  ) {}

  /** Resolves when the turn that consumes the prompt ends. */
  prompt(text: string): Promise<Result<"prompt">> {
    return this.client.request("prompt", { sessionId: this.id, text });
  }
  /** Steers the running turn: read after its current batch, before the next model request. */
  steer(text: string): Promise<Result<"steer">> {
    return this.client.request("steer", { sessionId: this.id, text });
  }
  /** Queues a follow-up: read when the current turn would end; it starts the next turn. */
  followUp(text: string): Promise<Result<"follow_up">> {
    return this.client.request("follow_up", { sessionId: this.id, text });
  }
  /** Cancels the running turn; queued inputs stay queued. */
  async interrupt(reason?: string): Promise<void> {
    await this.client.request("interrupt", { sessionId: this.id, ...(reason ? { reason } : {}) });
  }
  /** Answers a pending permission request (one reply reaches every pending request). */
  async replyPermission(requestId: string, reply: PermissionReply): Promise<void> {
    await this.client.request("permission.reply", { sessionId: this.id, requestId, reply });
  }
  /** The permission requests waiting for an answer (from the session's log: any process's). */
  async pendingPermissions(): Promise<Result<"permissions.pending">["requests"]> {
    return (await this.client.request("permissions.pending", { sessionId: this.id })).requests;
  }
  /** Replaces older history with a summary, between turns (see `session.compact()`). */
  compact(keepRecentTokens?: number): Promise<Result<"compact">> {
    return this.client.request("compact", {
      sessionId: this.id,
      ...(keepRecentTokens !== undefined ? { keepRecentTokens } : {}),
    });
  }
  /** The projection: what the model would be sent next. */
  async messages(): Promise<Result<"messages">["messages"]> {
    return (await this.client.request("messages", { sessionId: this.id })).messages;
  }
  /** The session's log entries (those after `afterSeq`, when given). */
  async entries(afterSeq?: number): Promise<Result<"entries">["entries"]> {
    const params = { sessionId: this.id, ...(afterSeq !== undefined ? { afterSeq } : {}) };
    return (await this.client.request("entries", params)).entries;
  }

  /**
   * Streams the session's events (all, or the listed types) to `listener`; resolves once the
   * server subscribed. Returns a function that removes the listener (and unsubscribes when it
   * was the last).
   */
  async subscribe(
    listener: (event: AgentEvent) => void,
    events?: AgentEventType[],
  ): Promise<() => Promise<void>> {
    this.handlers.listeners.add(listener);
    await this.client.request("subscribe", { sessionId: this.id, ...(events ? { events } : {}) });
    return async () => {
      this.handlers.listeners.delete(listener);
      if (this.handlers.listeners.size === 0) {
        await this.client.request("unsubscribe", { sessionId: this.id });
      }
    };
  }

  /** Interrupts a running turn, waits for it to settle and closes the session on the server. */
  async close(): Promise<void> {
    await this.client.request("session.close", { sessionId: this.id });
    this.client.forget(this.id);
  }
}
