/**
 * The connection's table of open sessions: `session.open` (client tools, permission policy and
 * an agent per session, loaded from the store), `session.close`, `sessions.list`, and the
 * lookup every other request makes. Kept apart from server.ts, which reads frames and routes
 * requests, because opening and closing are bookkeeping of their own: an open of an id that is
 * being closed waits for that close, and a failed load leaves nothing behind.
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import type { RequestFrame, RequestMap, ServerFrame } from "../../contracts/protocol.ts";
import {
  type Agent,
  type AgentOptions,
  createAgent,
  type Model,
  type Session,
  type SessionStore,
} from "../../index.ts";
import { clientTools } from "./client-tools.ts";
import type { ControlChannel } from "./control.ts";
import { gatedModel, type ReadGate } from "./gated-model.ts";
import { permissionAsks } from "./permission-asks.ts";
import { ProtocolError } from "./protocol-error.ts";

/** One open session of the connection: its agent, and what the server subscribed on it. */
export interface OpenSession {
  id: string;
  agent: Agent;
  session: Session;
  ready: Promise<void>;
  unsubscribe?: () => void;
  /** Stops withdrawing the session's decided `permission.request`s (see `open`). */
  stopWithdrawing: () => void;
}

/** What {@link sessionTable} needs of the server and the connection. */
export interface SessionTableOptions {
  store: SessionStore;
  /** A model for each new session. Contract: returns a fresh or shareable Model; may throw. */
  model: () => Model;
  /** Passed to every session's agent (deadlines, limits, retry). */
  agent?: Partial<Omit<AgentOptions, "model" | "tools" | "store" | "permissions" | "logger">>;
  logger: Logger;
  control: ControlChannel;
  send: (frame: ServerFrame) => void;
  /** When each session's model stream may be read on (the writer's backpressure). */
  gate: ReadGate;
  /** Default timeout of `tool.execute`. */
  controlTimeoutMs: number;
  /** Default timeout of `permission.request`. */
  permissionTimeoutMs: number;
}

/** The open sessions of one connection (see {@link sessionTable}). */
export interface SessionTable {
  /** The open sessions by id. */
  readonly sessions: ReadonlyMap<string, OpenSession>;
  /** The open session `sessionId`; throws `ProtocolError` `UNKNOWN_SESSION` when none is. */
  opened(sessionId: string): OpenSession;
  /** `session.open`: resolves once the session is loaded; throws `ProtocolError` when refused. */
  open(request: RequestFrame<"session.open">): Promise<RequestMap["session.open"]["result"]>;
  /** `sessions.list`: the stored sessions, each marked open or not. */
  list(): Promise<RequestMap["sessions.list"]["result"]>;
  /**
   * Closes `entry`: it leaves the table at once (before any await), so an open of the same id
   * sent next waits for this close; closing it again returns the same promise.
   */
  close(entry: OpenSession): Promise<void>;
}

/** The session table of one connection. */
export function sessionTable(options: SessionTableOptions): SessionTable {
  const { control, send } = options;
  const sessions = new Map<string, OpenSession>();
  /** Sessions being closed: an open of the same id waits for its close to end. */
  const closingSessions = new Map<string, Promise<void>>();
  const { readPermissions, withdrawAsk } = permissionAsks({
    control,
    send,
    defaultTimeoutMs: options.permissionTimeoutMs,
  });

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
    const tools = await clientTools(request.tools, {
      execute: (params) => control.request("tool.execute", { sessionId, ...params }),
      cancel: (id, reason) => control.notifyCancel(id, reason),
      invalidReply: (id, message) =>
        send({ type: "error", ref: id, code: "INVALID_REPLY", message }),
      defaultTimeoutMs: options.controlTimeoutMs,
    });
    // Reading the tools yields to the loop: another open of the same id may have come first.
    if (request.sessionId !== undefined && sessions.has(request.sessionId)) {
      throw new ProtocolError(
        "SESSION_OPEN",
        `session ${request.sessionId} is already open in this server; use it, or session.close it first`,
      );
    }
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
      model: gatedModel(model, options.gate),
      tools,
      store: options.store,
      logger: options.logger,
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

  async function list() {
    const stored = await options.store.list();
    const listed = stored.map((s) => ({ ...s, open: sessions.has(s.sessionId) }));
    return { sessions: listed } satisfies RequestMap["sessions.list"]["result"];
  }

  function close(entry: OpenSession): Promise<void> {
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

  return { sessions, opened, open, list, close };
}
