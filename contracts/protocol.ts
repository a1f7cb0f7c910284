// The control protocol of `keel serve --stdio` (docs/protocol.md): the frames both
// sides write, one JSON object per line. Shared by the server (cli/serve/) and keel/client.

import type { AcceptanceStatus, Evidence } from "./acceptance.ts";
import type { ChatMessage } from "./chat.ts";
import type { AgentEvent, AgentEventType } from "./events.ts";
import type {
  PermissionAction,
  PermissionReply,
  PermissionRequest,
  PermissionRule,
  Risk,
} from "./permission.ts";
import type { ToolResult } from "./tool-result.ts";
import type { TurnResult as LibraryTurnResult } from "./turn-result.ts";

/**
 * `major.minor`. A peer accepts any minor of its own major (unknown fields and capabilities are
 * ignored); another major is refused with `UNSUPPORTED_VERSION`. Changelog: 1.0 — first version.
 */
export const PROTOCOL_VERSION = "1.0";

/** Default bound on one frame (one line, newline excluded), in bytes. */
export const DEFAULT_MAX_FRAME_BYTES = 8 * 1024 * 1024;

/** What this server offers; announced in its `hello`. */
export const SERVER_CAPABILITIES = [
  "sessions",
  "events",
  "permissions",
  "client-tools",
  "coalesce:text.streamed",
] as const;

/** A request id: a non-empty string (≤ 256 chars) or a safe integer, chosen by the sender. */
export type RequestId = string | number;

/** The first frame each side writes. */
export interface HelloFrame {
  type: "hello";
  /** `major.minor`, e.g. "1.0". */
  protocol: string;
  /** Server only. */
  server?: { name: string; version: string };
  /** Client only (optional). */
  client?: { name: string; version?: string };
  capabilities?: string[];
  /** Server only: the bounds it enforces. */
  limits?: { maxFrameBytes: number };
}

/** A JSON Schema object plus the traits Keel reads; the client runs the tool. */
export interface ClientToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the arguments; must describe an object (`"type": "object"`). */
  parameters: Record<string, unknown>;
  traits?: {
    readOnly?: boolean;
    concurrencySafe?: boolean;
    idempotent?: boolean;
    cancellable?: boolean;
    risk?: Risk;
    outputBudget?: { maxBytes: number; overflow: "truncate" | "spill" };
    executionMode?: "parallel" | "sequential";
  };
  /** How long Keel waits for the `tool.execute` reply. Default: the server's control timeout. */
  timeoutMs?: number;
}

/** Permission policy of one session; absent in `session.open` = every call allowed. */
export interface SessionPermissions {
  rules?: PermissionRule[];
  defaults?: Partial<Record<Risk, PermissionAction>>;
  /** How long a `permission.request` may wait. Default: the server's permission timeout. */
  timeoutMs?: number;
  /** What no reply in time means. Default "deny" (the turn stops). */
  onTimeout?: "deny" | "deny_with_feedback";
}

/**
 * What a prompt resolves to (the library's `PromptResult`): how the turn ended as its log holds
 * it (`code` on a turn the runtime failed: `STORE_FAILED`, `LEASE_LOST`), its final text, summed
 * usage and model requests; with an acceptance spec, also the acceptance fields.
 */
export interface TurnResult extends LibraryTurnResult {
  acceptance?: AcceptanceStatus;
  evidence?: Evidence;
  rounds?: number;
}

/** One stored session, as `sessions.list` reports it. */
export interface SessionListing {
  sessionId: string;
  createdAt: number;
  updatedAt: number;
  entries: number;
  /** Whether this server process has it open. */
  open: boolean;
}

/** A log entry as stored (see session/entries.ts for every type's fields). */
export type EntryRecord = { id: string; seq: number; type: string } & Record<string, unknown>;

/** Every request a client may send: its params and the result of its `ok` response. */
export interface RequestMap {
  "session.open": {
    params: { sessionId?: string; tools?: ClientToolSpec[]; permissions?: SessionPermissions };
    result: { sessionId: string; entries: number };
  };
  prompt: { params: { sessionId: string; text: string }; result: TurnResult & { inboxId: string } };
  steer: { params: { sessionId: string; text: string }; result: { inboxId: string } };
  follow_up: { params: { sessionId: string; text: string }; result: { inboxId: string } };
  interrupt: { params: { sessionId: string; reason?: string }; result: Record<string, never> };
  "permission.reply": {
    params: { sessionId: string; requestId: string; reply: PermissionReply };
    result: Record<string, never>;
  };
  /** The session's permission requests waiting for an answer, as its log holds them. */
  "permissions.pending": {
    params: { sessionId: string };
    result: { requests: PermissionRequest[] };
  };
  compact: {
    params: { sessionId: string; keepRecentTokens?: number };
    result: {
      entryId: string;
      firstKeptId: string;
      tokensBefore: number;
      tokensAfter: number;
      summarized: number;
      omitted: number;
      durable: boolean;
    };
  };
  messages: { params: { sessionId: string }; result: { messages: ChatMessage[] } };
  entries: { params: { sessionId: string; afterSeq?: number }; result: { entries: EntryRecord[] } };
  "sessions.list": { params: Record<string, never>; result: { sessions: SessionListing[] } };
  "session.close": { params: { sessionId: string }; result: Record<string, never> };
  subscribe: {
    params: { sessionId: string; events?: AgentEventType[] };
    result: Record<string, never>;
  };
  unsubscribe: { params: { sessionId: string }; result: Record<string, never> };
}

/** The name of every request a client may send. */
export type RequestType = keyof RequestMap;

/** Every request type, for validation and docs. */
export const REQUEST_TYPES = [
  "session.open",
  "prompt",
  "steer",
  "follow_up",
  "interrupt",
  "permission.reply",
  "permissions.pending",
  "compact",
  "messages",
  "entries",
  "sessions.list",
  "session.close",
  "subscribe",
  "unsubscribe",
] as const satisfies readonly RequestType[];

const coversEveryRequest: RequestType extends (typeof REQUEST_TYPES)[number] ? true : false = true;
void coversEveryRequest;

/** A request frame: its params are top-level fields beside `type` and `id`. */
export type RequestFrame<K extends RequestType = RequestType> = K extends RequestType
  ? { type: K; id: RequestId } & RequestMap[K]["params"]
  : never;

/** Every control request Keel sends a client, with the result its `ok` reply carries. */
export interface ControlMap {
  "permission.request": {
    params: {
      sessionId: string;
      request: PermissionRequest;
      timeoutMs: number;
      /**
       * What to show a person who approves: the tool and its whole arguments as one line, never
       * cut, runs of spaces shown as counts (`⟨320 spaces⟩`), control characters escaped. A
       * client that shows less than this (or than `request.args`) must not ask.
       */
      display: string;
    };
    result: PermissionReply;
  };
  "tool.execute": {
    params: {
      sessionId: string;
      callId: string;
      tool: string;
      args: unknown;
      idempotencyKey: string;
      timeoutMs: number;
    };
    /** A string is read as `{ ok: true, content }`. */
    result: ToolResult | string;
  };
}

/** The name of every control request the server may send the client. */
export type ControlType = keyof ControlMap;

/** A control request from the server (a permission ask, a client tool to execute). */
export type ControlFrame<K extends ControlType = ControlType> = K extends ControlType
  ? { type: K; id: string } & ControlMap[K]["params"]
  : never;

/** Success reply to a request (either direction). */
export interface OkFrame<R = unknown> {
  type: "ok";
  id: RequestId;
  result: R;
}

/** Codes of `error` frames. */
export type ProtocolErrorCode =
  /** The line is longer than `limits.maxFrameBytes`; it was skipped up to its newline. */
  | "FRAME_TOO_LARGE"
  /** The line is not valid UTF-8. */
  | "INVALID_UTF8"
  /** The line is not JSON (or the last line, without newline, was not complete JSON). */
  | "INVALID_JSON"
  /** JSON, but not a frame: not an object, no `type`, a bad `id`, a missing or mistyped field. */
  | "INVALID_FRAME"
  /** `type` names no frame this server knows. */
  | "UNKNOWN_TYPE"
  /** A request sent before the client's `hello`. */
  | "HELLO_REQUIRED"
  /** The client's `hello` names another major version. */
  | "UNSUPPORTED_VERSION"
  /** Another request with this id is still in flight. */
  | "DUPLICATE_ID"
  /** A reply to a control request that is no longer waiting (timed out, answered, unknown). */
  | "LATE_REPLY"
  /** The reply to a control request does not have the shape that request needs. */
  | "INVALID_REPLY"
  /** No open session with that id (open it with `session.open`). */
  | "UNKNOWN_SESSION"
  /** `session.open` for a session this server already has open. */
  | "SESSION_OPEN"
  /** A client tool declaration Keel cannot use (bad name, schema, traits). */
  | "INVALID_TOOL"
  /** The server is shutting down; the request was not done. */
  | "SHUTTING_DOWN"
  /**
   * The session store refused the request's write or read (a full disk, a file locked past its
   * busy timeout, a lost database): nothing of the request was written; it may be sent again.
   */
  | "STORE_FAILED"
  /** The library refused (its `code` in `refusal`): TURN_OPEN, UNKNOWN_REQUEST, … */
  | "REFUSED"
  /** A bug in Keel (the message says what failed). */
  | "INTERNAL";

/**
 * Failure reply to a request, or a problem with a frame. `id` is the request id when the bad
 * frame had one; `ref` names the control request a bad or late reply was for, or the request
 * id of a refused duplicate (the request in flight under that id keeps its own response).
 */
export interface ErrorFrame {
  type: "error";
  id?: RequestId;
  ref?: RequestId;
  code: ProtocolErrorCode | string;
  message: string;
  /** With `REFUSED`: the library's refusal code (e.g. `TURN_OPEN`). */
  refusal?: string;
}

/** One session event, for a subscribed session. */
export interface EventFrame {
  type: "event";
  sessionId: string;
  event: AgentEvent;
}

/** Tells the client to abort a control request it is running (a cancelled tool call). */
export interface CancelFrame {
  type: "cancel";
  id: string;
  reason: string;
}

/** The last frame before the server exits: why, and how many requests were failed. */
export interface GoodbyeFrame {
  type: "goodbye";
  reason: string;
}

/** Every frame the server writes. */
export type ServerFrame =
  | HelloFrame
  | OkFrame
  | ErrorFrame
  | EventFrame
  | ControlFrame
  | CancelFrame
  | GoodbyeFrame;

/** Every frame a client writes. */
export type ClientFrame = HelloFrame | RequestFrame | OkFrame | ErrorFrame;

/** The major number of a `major.minor` version, or undefined when malformed. */
export function majorOf(version: unknown): number | undefined {
  if (typeof version !== "string") return undefined;
  const m = /^(\d+)\.(\d+)$/.exec(version);
  return m ? Number(m[1]) : undefined;
}
