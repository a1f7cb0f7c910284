import { PERMISSION_REPLY_SHAPES, readPermissionReply } from "../../contracts/permission.ts";
import {
  REQUEST_TYPES,
  type RequestFrame,
  type RequestId,
  type RequestType,
} from "../../contracts/protocol.ts";
import { AGENT_EVENT_TYPES, type PermissionReply } from "../../index.ts";
import { ProtocolError } from "./protocol-error.ts";

const REQUESTS = new Set<string>(REQUEST_TYPES);
const EVENTS = new Set<string>(AGENT_EVENT_TYPES);

export const isRequestType = (type: unknown): type is RequestType =>
  typeof type === "string" && REQUESTS.has(type);

/** A valid request id, or undefined. Ids are non-empty strings (≤ 256 chars) or safe integers. */
export function readId(value: unknown): RequestId | undefined {
  if (typeof value === "string" && value.length > 0 && value.length <= 256) return value;
  if (typeof value === "number" && Number.isSafeInteger(value)) return value;
  return undefined;
}

/**
 * Checks a request frame's fields for its type; throws `ProtocolError` (`INVALID_FRAME`)
 * naming the first field that is missing or of the wrong type, and what it should be.
 */
export function readRequest(frame: Record<string, unknown>, type: RequestType): RequestFrame {
  const fail = (field: string, expected: string): never => {
    const got =
      frame[field] === undefined ? "it is missing" : `got ${JSON.stringify(frame[field])}`;
    throw new ProtocolError("INVALID_FRAME", `${type}: "${field}" must be ${expected}; ${got}`);
  };
  const text = (field: string, optional = false) => {
    const v = frame[field];
    if (v === undefined && optional) return;
    if (typeof v !== "string" || v.length === 0) fail(field, "a non-empty string");
  };
  const count = (field: string, min: number) => {
    const v = frame[field];
    if (v === undefined) return;
    if (!Number.isSafeInteger(v) || (v as number) < min) fail(field, `an integer ≥ ${min}`);
  };
  if (type !== "sessions.list") text("sessionId", type === "session.open");
  switch (type) {
    case "session.open":
      if (frame.tools !== undefined && !Array.isArray(frame.tools)) {
        fail("tools", "an array of tool declarations");
      }
      if (
        frame.permissions !== undefined &&
        (typeof frame.permissions !== "object" || frame.permissions === null)
      ) {
        fail("permissions", "an object ({ rules?, defaults?, timeoutMs?, onTimeout? })");
      }
      break;
    case "prompt":
    case "steer":
    case "follow_up":
      text("text");
      break;
    case "interrupt":
      text("reason", true);
      break;
    case "permission.reply":
      text("requestId");
      readReply(frame.reply, (expected) => fail("reply", expected));
      break;
    case "compact":
      count("keepRecentTokens", 0);
      break;
    case "entries":
      count("afterSeq", 0);
      break;
    case "subscribe": {
      const events = frame.events;
      if (events === undefined) break;
      if (!Array.isArray(events)) fail("events", "an array of event types");
      for (const e of events as unknown[]) {
        if (typeof e !== "string" || !EVENTS.has(e)) {
          throw new ProtocolError(
            "INVALID_FRAME",
            `subscribe: ${JSON.stringify(e)} is not an event type; event types are ${AGENT_EVENT_TYPES.join(", ")}`,
          );
        }
      }
      break;
    }
    case "messages":
    case "permissions.pending":
    case "sessions.list":
    case "session.close":
    case "unsubscribe":
      break;
    default: {
      const never: never = type;
      return never;
    }
  }
  return frame as RequestFrame;
}

/** A permission reply, checked; `fail` is called with what was expected. */
export function readReply(value: unknown, fail: (expected: string) => never): PermissionReply {
  return readPermissionReply(value) ?? fail(`a permission reply: ${PERMISSION_REPLY_SHAPES}`);
}
