/**
 * `createHttpHandler(agent, options)`: Keel behind HTTP as one fetch-style function,
 * `(Request) => Promise<Response>`, for Node's `http` (node-listener.ts), Hono, a Next.js route
 * handler or anything that speaks the Fetch API (docs/web-apps.md). Every request needs the
 * bearer token (or passes `authorize`), else 401 and nothing runs; a browser's cross-origin
 * request needs its origin listed in `cors.origins`; bodies are bounded; every error is JSON
 * with a `code`.
 */
import { timingSafeEqual } from "node:crypto";
import type { Agent } from "../actors/agent-options.ts";
import { type ChatRouteContext, chatMessages, postChat, resumeChat } from "./chat-routes.ts";
import { errorResponse, HttpError } from "./http-error.ts";
import { SessionHubs } from "./session-hubs.ts";
import { listSessions, openSession, sessionAction } from "./session-routes.ts";

/** Options of {@link createHttpHandler}: `token` or `authorize` is required. */
export interface HttpHandlerOptions {
  /** The bearer token every request must carry (`Authorization: Bearer <token>`); 16+ characters. */
  token?: string;
  /**
   * Instead of (or beside) `token`: decides whether a request may go on (your own sessions or
   * cookies). Contract: resolves true to let it through; a throw or false answers 401.
   */
  authorize?: (request: Request) => boolean | Promise<boolean>;
  /** Browsers' cross-origin requests: the origins allowed (e.g. `https://app.example.com`). Default none. */
  cors?: { origins: readonly string[] };
  /** A path prefix the routes live under (e.g. `/api/keel`). Default none. */
  basePath?: string;
  /** The largest request body read (bytes). Default 1 MiB. */
  maxBodyBytes?: number;
  /** Bytes an event stream may hold for a client that does not read before it is cut. Default 1 MiB. */
  maxBufferedBytes?: number;
  /** An idle event stream gets a comment line this often, for proxies (ms). Default 15 000. */
  heartbeatMs?: number;
  /** Events each session keeps in memory for readers that reconnect (bytes of JSON). Default 4 MiB. */
  replayBytes?: number;
  /** How long a turn waiting for an approval stays quiet before its chat response ends (ms). Default 50. */
  approvalQuietMs?: number;
}

/** A fetch-style handler; `close()` stops following the agent's sessions (it does not close the agent). */
export interface HttpHandler {
  /** Answers one request (errors are JSON responses, never rejections). */
  (request: Request): Promise<Response>;
  /** Stops following the sessions it opened; their event streams end when their clients leave. */
  close(): Promise<void>;
}

const positive = (name: string, value: number | undefined, fallback: number): number => {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v < 1 || v > 2 ** 31 - 1) {
    throw new RangeError(
      `createHttpHandler: ${name} must be an integer from 1 to ${2 ** 31 - 1}, got ${String(value)}`,
    );
  }
  return v;
};

/** See the file's comment and docs/web-apps.md for the routes. */
export function createHttpHandler(agent: Agent, options: HttpHandlerOptions): HttpHandler {
  const tokenOk = checkAuth(options);
  const origins = new Set(options.cors?.origins ?? []);
  const base = (options.basePath ?? "").replace(/\/+$/, "");
  const hubs = new SessionHubs(
    agent,
    positive("replayBytes", options.replayBytes, 4 * 1024 * 1024),
  );
  const context = {
    agent,
    hubs,
    maxBodyBytes: positive("maxBodyBytes", options.maxBodyBytes, 1024 * 1024),
    heartbeatMs: positive("heartbeatMs", options.heartbeatMs, 15_000),
    maxBufferedBytes: positive("maxBufferedBytes", options.maxBufferedBytes, 1024 * 1024),
    approvalQuietMs: positive("approvalQuietMs", options.approvalQuietMs, 50),
  };
  const handler = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const origin = request.headers.get("origin");
    const cors: Record<string, string> =
      origin && origins.has(origin)
        ? { "access-control-allow-origin": origin, vary: "origin" }
        : {};
    try {
      if (origin && origin !== url.origin && !origins.has(origin)) {
        throw new HttpError(
          403,
          "ORIGIN_NOT_ALLOWED",
          `origin ${origin} may not call this server: add it to createHttpHandler's cors.origins (\`keel serve --cors-origin\`)`,
        );
      }
      if (request.method === "OPTIONS") return preflight(cors);
      if (!(await tokenOk(request))) {
        throw new HttpError(
          401,
          "UNAUTHORIZED",
          "send the server's token as `Authorization: Bearer <token>` (`keel serve --http` prints it)",
        );
      }
      if (base && !url.pathname.startsWith(`${base}/`))
        throw new HttpError(
          404,
          "NOT_FOUND",
          `no route ${url.pathname}: the routes are under ${base}/`,
        );
      return await route(request, url.pathname.slice(base.length), { ...context, headers: cors });
    } catch (error) {
      return errorResponse(error, cors);
    }
  };
  return Object.assign(handler, { close: () => hubs.close() });
}

/** The request's route (path without the base), answered. */
function route(request: Request, path: string, ctx: ChatRouteContext): Promise<Response> {
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const method = request.method;
  const wrong = () =>
    new HttpError(
      405,
      "METHOD_NOT_ALLOWED",
      `${method} is not allowed on ${path}; docs/web-apps.md lists the routes`,
    );
  if (parts[0] === "sessions" && parts.length === 1) {
    if (method === "GET") return listSessions(ctx);
    if (method === "POST") return openSession(request, ctx);
    throw wrong();
  }
  if (parts[0] === "sessions" && parts.length >= 3)
    return sessionAction(request, ctx, parts[1], parts.slice(2));
  if (parts[0] === "chat" && parts.length === 1) {
    if (method !== "POST") throw wrong();
    return postChat(request, ctx);
  }
  if (
    parts[0] === "chat" &&
    parts.length === 3 &&
    (parts[2] === "stream" || parts[2] === "messages")
  ) {
    if (method !== "GET") throw wrong();
    return parts[2] === "stream" ? resumeChat(parts[1], ctx) : chatMessages(parts[1], ctx);
  }
  throw new HttpError(
    404,
    "NOT_FOUND",
    `no route ${method} ${path}; docs/web-apps.md lists the routes`,
  );
}

function preflight(cors: Record<string, string>): Response {
  if (!cors["access-control-allow-origin"]) return new Response(null, { status: 204 });
  return new Response(null, {
    status: 204,
    headers: {
      ...cors,
      "access-control-allow-methods": "GET, POST, OPTIONS",
      "access-control-allow-headers": "authorization, content-type, last-event-id",
      "access-control-max-age": "600",
    },
  });
}

/** The request check of the options: the bearer token, `authorize`, or both (both must pass). */
function checkAuth(options: HttpHandlerOptions): (request: Request) => Promise<boolean> {
  const { token, authorize } = options;
  if (token === undefined && authorize === undefined) {
    throw new TypeError(
      "createHttpHandler: give a `token` (16+ characters; every request sends it as a bearer token) or an `authorize(request)` function",
    );
  }
  if (token !== undefined && (typeof token !== "string" || token.length < 16)) {
    throw new TypeError(
      "createHttpHandler: `token` must be a string of 16 or more characters (e.g. crypto.randomBytes(24).toString('base64url'))",
    );
  }
  const expected = token === undefined ? undefined : Buffer.from(token);
  return async (request) => {
    if (expected) {
      const given = /^Bearer (.+)$/.exec(request.headers.get("authorization") ?? "")?.[1];
      const buf = Buffer.from(given ?? "");
      if (buf.length !== expected.length || !timingSafeEqual(buf, expected)) return false;
    }
    if (!authorize) return true;
    try {
      return (await authorize(request)) === true;
    } catch {
      return false;
    }
  };
}
