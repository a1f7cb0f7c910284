/**
 * The routes about sessions, the control protocol's requests over HTTP (docs/web-apps.md):
 * list and open sessions, prompt, steer, follow up, interrupt, answer a permission request,
 * read entries and messages, and follow the session's events as server-sent events. Request and
 * result bodies have the protocol's shapes (contracts/protocol.ts, docs/protocol.md).
 */
import { randomUUID } from "node:crypto";
import type { Agent } from "../actors/agent-options.ts";
import {
  PERMISSION_REPLY_SHAPES,
  type PermissionReply,
  readPermissionReply,
} from "../contracts/permission.ts";
import { HttpError } from "./http-error.ts";
import { readJsonBody, textField } from "./read-body.ts";
import { checkSessionId, type Hub, type SessionHubs } from "./session-hubs.ts";
import { sseStream } from "./sse-stream.ts";

/** What the session routes need of the handler. */
export interface SessionRouteContext {
  agent: Agent;
  hubs: SessionHubs;
  maxBodyBytes: number;
  heartbeatMs: number;
  maxBufferedBytes: number;
  /** Headers every response carries (CORS). */
  headers: Record<string, string>;
}

const json = (body: unknown, ctx: SessionRouteContext, status = 200) =>
  Response.json(body, { status, headers: { "cache-control": "no-store", ...ctx.headers } });

/** `GET /sessions`: the stored sessions, each marked `open` when this handler serves it. */
export async function listSessions(ctx: SessionRouteContext): Promise<Response> {
  const stored = await ctx.agent.listSessions();
  return json({ sessions: stored.map((s) => ({ ...s, open: ctx.hubs.has(s.sessionId) })) }, ctx);
}

/** `POST /sessions` `{ sessionId? }`: opens (or creates) a session. */
export async function openSession(request: Request, ctx: SessionRouteContext): Promise<Response> {
  const body = await readJsonBody(request, ctx.maxBodyBytes);
  const given = body.sessionId;
  if (given !== undefined && typeof given !== "string") {
    throw new HttpError(
      400,
      "INVALID_BODY",
      `POST /sessions: "sessionId" must be a string; got ${JSON.stringify(given)}`,
    );
  }
  const id = given === undefined ? `s_${randomUUID()}` : checkSessionId(given);
  const hub = await ctx.hubs.get(id);
  return json({ sessionId: id, entries: hub.session.entries().length }, ctx);
}

/**
 * A request about one session (`/sessions/:id/<action>`): each action calls the session method
 * of the same name. Throws `HttpError` for a bad body or an unknown action.
 */
export async function sessionAction(
  request: Request,
  ctx: SessionRouteContext,
  id: string,
  action: string[],
): Promise<Response> {
  const hub = await ctx.hubs.get(id);
  const route = `${request.method} /sessions/${id}/${action.join("/")}`;
  const key = `${request.method} ${action[0] ?? ""}${action.length > 1 ? "/:id" : ""}`;
  switch (key) {
    case "GET events":
      return events(request, hub, ctx);
    case "GET entries":
      return json(
        { entries: entriesAfter(hub, new URL(request.url).searchParams.get("afterSeq"), route) },
        ctx,
      );
    case "GET messages":
      return json({ messages: hub.session.history() }, ctx);
    case "GET permissions":
      return json({ requests: await hub.session.pendingPermissions() }, ctx);
    case "POST permissions/:id":
      return reply(hub, action[1], await readJsonBody(request, ctx.maxBodyBytes), route, ctx);
    default:
      break;
  }
  if (request.method !== "POST") throw notFound(route);
  const body = await readJsonBody(request, ctx.maxBodyBytes);
  switch (action.join("/")) {
    case "prompt":
      return prompt(hub, body, route, ctx);
    case "steer":
      return json({ inboxId: await hub.session.steer(textField(body, "text", route)) }, ctx, 202);
    case "follow-up":
      return json(
        { inboxId: await hub.session.followUp(textField(body, "text", route)) },
        ctx,
        202,
      );
    case "interrupt": {
      const reason =
        body.reason === undefined ? "interrupted by the client" : textField(body, "reason", route);
      return json({ inboxId: await hub.session.interrupt(reason) }, ctx, 202);
    }
    default:
      throw notFound(route);
  }
}

const notFound = (route: string) =>
  new HttpError(404, "NOT_FOUND", `no route ${route}; docs/web-apps.md lists the routes`);

/**
 * `POST prompt` `{ text, wait? }`: 202 `{ inboxId }` once the input is durable (its turn starts
 * when no other runs); with `wait: true`, 200 with the turn's result when it ends (a closed
 * connection does not stop it).
 */
async function prompt(
  hub: Hub,
  body: Record<string, unknown>,
  route: string,
  ctx: SessionRouteContext,
) {
  const text = textField(body, "text", route);
  if (body.wait !== undefined && typeof body.wait !== "boolean") {
    throw new HttpError(400, "INVALID_BODY", `${route}: "wait" must be true or false`);
  }
  if (body.wait === true) {
    const inboxId = `in_${randomUUID()}`;
    return json({ inboxId, ...(await hub.session.prompt(text, { id: inboxId })) }, ctx);
  }
  // A follow-up is a prompt whose caller does not wait for its turn (the same lane, the same turn).
  return json({ inboxId: await hub.session.followUp(text) }, ctx, 202);
}

function entriesAfter(hub: Hub, afterSeq: string | null, route: string) {
  if (afterSeq !== null && !/^\d{1,15}$/.test(afterSeq)) {
    throw new HttpError(
      400,
      "INVALID_BODY",
      `${route}: afterSeq must be an integer ≥ 0; got ${JSON.stringify(afterSeq)}`,
    );
  }
  const after = afterSeq === null ? -1 : Number(afterSeq);
  return hub.session.entries().filter((e) => e.seq > after);
}

async function reply(
  hub: Hub,
  requestId: string,
  body: Record<string, unknown>,
  route: string,
  ctx: SessionRouteContext,
) {
  const answer = readReply(body.reply, route);
  const replied = await hub.session.replyPermission(requestId, answer);
  if (!replied.ok) throw new HttpError(409, "REFUSED", replied.message, replied.code);
  return json({}, ctx);
}

/** A permission reply from a body, checked (the shapes of the protocol's `permission.reply`). */
export function readReply(value: unknown, route: string): PermissionReply {
  const reply = readPermissionReply(value);
  if (reply) return reply;
  throw new HttpError(
    400,
    "INVALID_BODY",
    `${route}: "reply" must be ${PERMISSION_REPLY_SHAPES}; got ${JSON.stringify(value)}`,
  );
}

/**
 * `GET events`: the session's feed as server-sent events from `Last-Event-ID` (or `?after=`;
 * neither: from now). Closing it stops only this reader.
 */
async function events(request: Request, hub: Hub, ctx: SessionRouteContext): Promise<Response> {
  const after =
    request.headers.get("last-event-id") ??
    new URL(request.url).searchParams.get("after") ??
    undefined;
  let stop: (() => void) | undefined;
  const { body, writer } = sseStream({
    heartbeatMs: ctx.heartbeatMs,
    maxBufferedBytes: ctx.maxBufferedBytes,
    onClose: () => stop?.(),
  });
  // Errors in the id are found before the response starts.
  stop = await hub.feed.attach(after || undefined, (item) =>
    writer.write({ id: item.id, event: item.event, data: item.json }),
  );
  if (writer.closed) stop();
  return new Response(body, {
    headers: {
      "content-type": "text/event-stream",
      "cache-control": "no-cache, no-transform",
      "x-accel-buffering": "no",
      ...ctx.headers,
    },
  });
}
