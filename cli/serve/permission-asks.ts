/**
 * A session's permission policy as the client declared it in `session.open`, and the
 * `permission.request`s it sends the client: checked, asked with a timeout, and withdrawn once
 * the request was decided some other way. Kept apart from server.ts because it is the one part
 * of opening a session that talks back to the client on its own; its only state is the table of
 * asks still waiting, shared by every session of the connection.
 */
import { MAX_TIMER_MS } from "../../contracts/clock.ts";
import type { ServerFrame, SessionPermissions } from "../../contracts/protocol.ts";
import type {
  PermissionAction,
  PermissionOptions,
  PermissionReply,
  PermissionRequest,
  PermissionRule,
} from "../../index.ts";
import { COLLAPSED_NOTE, shownCall } from "../shown-text.ts";
import { type ControlChannel, ControlFailure } from "./control.ts";
import { ProtocolError } from "./protocol-error.ts";
import { readReply } from "./requests.ts";

/** What {@link permissionAsks} needs of the connection. */
export interface PermissionAsksOptions {
  control: ControlChannel;
  send: (frame: ServerFrame) => void;
  /** `timeoutMs` of a policy that names none. */
  defaultTimeoutMs: number;
}

/** The connection's permission asks (see {@link permissionAsks}). */
export interface PermissionAsks {
  /**
   * A session's `permissions` checked (throws `ProtocolError` `INVALID_FRAME` naming the bad
   * field) and turned into agent options whose `ask` sends the client a `permission.request`.
   */
  readPermissions(value: SessionPermissions, sessionId: string): PermissionOptions;
  /** Withdraws the `permission.request` of a request that was decided (if one still waits). */
  withdrawAsk(sessionId: string, requestId: string): void;
}

/** The permission asks of one connection, sent on `control`. */
export function permissionAsks(options: PermissionAsksOptions): PermissionAsks {
  const { control, send } = options;
  /** Control id of each waiting `permission.request`, by session and permission request id. */
  const asks = new Map<string, string>();
  const askKey = (sessionId: string, requestId: string) => JSON.stringify([sessionId, requestId]);

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
    const timeoutMs = value.timeoutMs ?? options.defaultTimeoutMs;
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

  return { readPermissions, withdrawAsk };
}
