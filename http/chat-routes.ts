/**
 * The AI SDK's chat routes, so `useChat` with its default transport talks to Keel unchanged
 * (docs/web-apps.md): `POST /chat` (the transport's send: the chat's `id` is the session id;
 * a new user message is submitted, approval responses are permission replies), `GET
 * /chat/:id/stream` (its resume: the turn that runs, from its start, or 204) and
 * `GET /chat/:id/messages` (the conversation as `UIMessage`s, to load a page).
 */
import { randomUUID } from "node:crypto";
import { HttpError } from "./http-error.ts";
import { readJsonBody } from "./read-body.ts";
import { checkSessionId, type Hub } from "./session-hubs.ts";
import type { SessionRouteContext } from "./session-routes.ts";
import { uiMessagesOf } from "./ui-history.ts";
import { uiStreamResponse } from "./ui-stream.ts";

/** What the chat routes need beside the session routes' context. */
export interface ChatRouteContext extends SessionRouteContext {
  /** How long a turn waiting for an approval stays quiet before its response ends (ms). */
  approvalQuietMs: number;
}

interface ToolPartIn {
  type?: unknown;
  state?: unknown;
  approval?: { id?: unknown; approved?: unknown; reason?: unknown };
}

const bad = (message: string) => new HttpError(400, "INVALID_BODY", `POST /chat: ${message}`);

/** `POST /chat`: see the file's comment. */
export async function postChat(request: Request, ctx: ChatRouteContext): Promise<Response> {
  const body = await readJsonBody(request, ctx.maxBodyBytes);
  if (typeof body.id !== "string")
    throw bad('"id" (the chat id, used as the session id) must be a string');
  if (body.trigger !== undefined && body.trigger !== "submit-message") {
    throw bad(
      `trigger ${JSON.stringify(body.trigger)} is not supported: Keel's log is append-only, so a message is not regenerated; send a new one`,
    );
  }
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0)
    throw bad('"messages" must be a non-empty array of UI messages');
  const last = messages.at(-1) as { role?: unknown; parts?: unknown };
  if (!Array.isArray(last?.parts)) throw bad("the last message needs a `parts` array");
  const hub = await ctx.hubs.get(checkSessionId(body.id));
  if (last.role === "user") return submit(hub, last.parts, ctx);
  if (last.role === "assistant") return approvals(hub, last.parts as ToolPartIn[], ctx);
  throw bad(
    `the last message's role must be "user" or "assistant", got ${JSON.stringify(last?.role)}`,
  );
}

/** A new user message: submitted as a prompt; the response streams the turn that consumes it. */
async function submit(hub: Hub, parts: unknown[], ctx: ChatRouteContext): Promise<Response> {
  const text = parts
    .filter(
      (p): p is { type: "text"; text: string } =>
        (p as { type?: unknown })?.type === "text" &&
        typeof (p as { text?: unknown }).text === "string",
    )
    .map((p) => p.text)
    .join("\n");
  if (text.trim() === "") throw bad("the user message has no text part");
  const inboxId = `in_${randomUUID()}`;
  const turn = hub.ui.turnFor(inboxId);
  try {
    await hub.session.followUp(text, { id: inboxId });
  } catch (error) {
    hub.ui.forget(inboxId);
    throw error;
  }
  return uiStreamResponse({ ...streamOptions(hub, ctx), turn, from: 0, start: false });
}

/**
 * The approval responses of the last assistant message (tool parts in `approval-responded`):
 * each is the reply to its permission request (`approved` → `allow_once`; not approved → `deny`,
 * or `deny_with_feedback` with its `reason`); the response continues the turn's message from
 * here.
 */
async function approvals(hub: Hub, parts: ToolPartIn[], ctx: ChatRouteContext): Promise<Response> {
  const responded = parts.filter(
    (p) => p?.state === "approval-responded" && typeof p.approval?.id === "string",
  );
  if (responded.length === 0) {
    throw bad(
      "the last message is the assistant's and holds no approval response; send a user message",
    );
  }
  const turn = hub.ui.active;
  if (!turn) {
    throw new HttpError(
      409,
      "REFUSED",
      "no turn of this chat waits for an approval: it ended (an unanswered request times out as denied)",
      "UNKNOWN_REQUEST",
    );
  }
  const from = turn.chunks.length;
  for (const part of responded) {
    const { id, approved, reason } = part.approval as {
      id: string;
      approved?: unknown;
      reason?: unknown;
    };
    const reply =
      approved === true
        ? { type: "allow_once" as const }
        : typeof reason === "string" && reason.length > 0
          ? { type: "deny_with_feedback" as const, feedback: reason }
          : { type: "deny" as const };
    const replied = await hub.session.replyPermission(id, reply);
    // A reply that reached this request through another one (a deny) was already applied.
    if (!replied.ok && responded.length === 1)
      throw new HttpError(409, "REFUSED", replied.message, replied.code);
  }
  return uiStreamResponse({ ...streamOptions(hub, ctx), turn, from, start: true });
}

/** `GET /chat/:id/stream`: the running turn's message from its start, then live; 204 when none runs. */
export async function resumeChat(id: string, ctx: ChatRouteContext): Promise<Response> {
  const hub = await ctx.hubs.get(id);
  const turn = hub.ui.active;
  if (!turn) return new Response(null, { status: 204, headers: ctx.headers });
  return uiStreamResponse({ ...streamOptions(hub, ctx), turn, from: 0, start: false });
}

/** `GET /chat/:id/messages`: the conversation as UI messages, without the turn that runs (resume it). */
export async function chatMessages(id: string, ctx: ChatRouteContext): Promise<Response> {
  const hub = await ctx.hubs.get(id);
  let history = hub.session.history();
  if (hub.ui.active) {
    const lastUser = history.findLastIndex((m) => m.role === "user");
    history = history.slice(0, lastUser + 1);
  }
  return Response.json(
    { messages: uiMessagesOf(history) },
    { headers: { "cache-control": "no-store", ...ctx.headers } },
  );
}

const streamOptions = (hub: Hub, ctx: ChatRouteContext) => ({
  session: hub.session,
  quietMs: ctx.approvalQuietMs,
  heartbeatMs: ctx.heartbeatMs,
  maxBufferedBytes: ctx.maxBufferedBytes,
  headers: ctx.headers,
});
