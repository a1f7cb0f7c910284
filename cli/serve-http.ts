/**
 * `keel serve --http <port>`: Keel behind HTTP (docs/web-apps.md). One agent with the built-in
 * tools (the working directory is the workspace, as for `keel run`) serves every session; its
 * routes (http/, `createHttpHandler`) live under `/api`, so the AI SDK's `useChat` finds its
 * chat at its default `/api/chat`; `--static <dir>` serves a page (e.g. examples/web) at `/`.
 * A bearer token is generated (or given with `--token` / KEEL_HTTP_TOKEN) and printed; no token
 * only with `--no-token`, and only on a loopback address. Permission requests wait for an HTTP
 * reply up to `--permission-timeout`, then are denied with feedback.
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import pino from "pino";
import {
  builtinTools,
  createAgent,
  createHttpHandler,
  memoryStore,
  toNodeListener,
} from "../index.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import { staticFiles } from "./http-static.ts";
import { openInspector } from "./inspect.ts";
import { workspaceInstructions } from "./instructions.ts";
import { modelFactory, openServeStore, type ServeOptions } from "./serve.ts";
import { openStore, storeChoice } from "./store.ts";

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);

/** The token the options name: given, from KEEL_HTTP_TOKEN, generated, or none (`--no-token`, loopback only). */
function tokenOf(options: ServeOptions, host: string): string | undefined {
  if (options.token === false) {
    if (!LOOPBACK.has(host)) {
      throw new CliError(
        `--no-token is allowed only on a loopback address (127.0.0.1, ::1, localhost), not ${host}`,
        EXIT.usage,
      );
    }
    return undefined;
  }
  const token =
    options.token ??
    (options.env ?? process.env).KEEL_HTTP_TOKEN ??
    randomBytes(24).toString("base64url");
  if (token.length < 16)
    throw new CliError("--token (or KEEL_HTTP_TOKEN) must be 16 or more characters", EXIT.usage);
  return token;
}

/** See the file's comment. Resolves on SIGTERM/SIGINT once the server, the agent and the store closed. */
export async function runServeHttp(options: ServeOptions & { http: number }): Promise<ExitCode> {
  const host = options.host ?? "127.0.0.1";
  const token = tokenOf(options, host);
  const model = modelFactory(options)();
  const { choice, store, logger } = await openServeStore(options.store);
  const protect =
    choice.kind === "sqlite" ? ["", "-wal", "-shm", "-journal"].map((s) => choice.path + s) : [];
  const tools = builtinTools({ root: process.cwd(), protect });
  const waitMs = options.permissionTimeout ?? 60_000;
  const inspector = options.inspect || options.port ? await openInspector(options.port) : undefined;
  if (inspector) process.stderr.write(`keel inspector: ${inspector.url}\n`);
  const agent = createAgent({
    ...(inspector ? { inspect: inspector.sink } : {}),
    model,
    tools,
    store,
    logger,
    instructions: workspaceInstructions(process.cwd(), tools),
    // A request waits for a reply over HTTP (`replyPermission`); unanswered, it is denied.
    permissions: {
      ask: (request) =>
        new Promise((resolve) => {
          const feedback = `no one answered the permission request for ${request.tool} within ${waitMs} ms, so it did not run`;
          setTimeout(() => resolve({ type: "deny_with_feedback", feedback }), waitMs).unref();
        }),
    },
  });
  const handler = createHttpHandler(agent, {
    ...(token ? { token } : { authorize: () => true }),
    basePath: "/api",
    ...(options.corsOrigin?.length ? { cors: { origins: options.corsOrigin } } : {}),
    ...(options.maxBodyBytes ? { maxBodyBytes: options.maxBodyBytes } : {}),
    ...(options.maxBufferedBytes ? { maxBufferedBytes: options.maxBufferedBytes } : {}),
  });
  const api = toNodeListener(handler);
  const page = options.static ? staticFiles(options.static) : undefined;
  const server = createServer((req, res) => {
    if ((req.url ?? "/").startsWith("/api/") || !page) return api(req, res);
    page(req, res);
  });
  await listen(server, options.http, host);
  const port = (server.address() as AddressInfo).port;
  const origin = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  process.stdout.write(`keel serve: ${origin}/api (docs/web-apps.md)\n`);
  process.stdout.write(token ? `token: ${token}\n` : "token: none (--no-token, loopback only)\n");
  if (page) process.stdout.write(`page: ${origin}/${token ? `#token=${token}` : ""}\n`);
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once("SIGTERM", resolve);
    process.once("SIGINT", resolve);
  });
  logger.info({ signal }, "keel serve --http: closing");
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await handler.close();
  await agent.close();
  await store.close();
  await inspector?.close();
  return EXIT.ok;
}

function listen(
  server: ReturnType<typeof createServer>,
  port: number,
  host: string,
): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      reject(
        error.code === "EADDRINUSE"
          ? new CliError(
              `port ${port} is in use on ${host}: pick another with --http <port> (0: a free one)`,
              EXIT.config,
            )
          : error,
      ),
    );
    server.listen(port, host, resolve);
  });
}
