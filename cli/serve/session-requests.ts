/**
 * The requests that read or change one open session (prompt, steer, follow_up, interrupt,
 * permission.reply, permissions.pending, compact, messages, entries, subscribe, unsubscribe), apart from the
 * connection's dispatcher in server.ts: each needs only the session's table row and a way to
 * send frames, not the connection's state, so the protocol's per-session surface reads in one
 * place. Opening, closing and listing sessions change the table itself and live in
 * session-table.ts.
 */
import { randomUUID } from "node:crypto";
import type {
  EntryRecord,
  RequestFrame,
  RequestMap,
  RequestType,
  ServerFrame,
} from "../../contracts/protocol.ts";
import { previewThrottle } from "./previews.ts";
import { ProtocolError } from "./protocol-error.ts";
import type { OpenSession } from "./session-table.ts";

/** The request types answered by {@link runSessionRequest}: those about one open session. */
export type SessionRequestType = Exclude<
  RequestType,
  "session.open" | "sessions.list" | "session.close"
>;

/**
 * Runs one request on the open session `entry` (already loaded) and returns its `ok` result;
 * a refusal throws `ProtocolError`. `send` carries the session's events after `subscribe`.
 */
export async function runSessionRequest(
  entry: OpenSession,
  request: RequestFrame<SessionRequestType>,
  send: (frame: ServerFrame) => void,
): Promise<unknown> {
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
      const replied = await session.replyPermission(request.requestId, request.reply);
      if (!replied.ok) throw new ProtocolError("REFUSED", replied.message, replied.code);
      return {};
    }
    case "permissions.pending":
      return {
        requests: await session.pendingPermissions(),
      } satisfies RequestMap["permissions.pending"]["result"];
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
