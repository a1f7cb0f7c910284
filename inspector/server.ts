import { randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { type WebSocket, WebSocketServer } from "ws";
import type { InspectSink } from "../actors/events.ts";
import type { Clock } from "../contracts/clock.ts";
import type { LogEntry } from "../session/entries.ts";
import type { Divergence } from "../session/replay-compare.ts";
import type { SessionStore } from "../session/store.ts";
import { createChartSource } from "./chart-source.ts";
import { createFeed } from "./feed.ts";
import { clip, type InspectRecord } from "./records.ts";
import { type ReplayRecordsOptions, replayRecords } from "./replay.ts";

/** `startInspector` options. */
export interface InspectorOptions {
  /** TCP port on 127.0.0.1; 0 or absent picks a free one. */
  port?: number;
  /** Access token (8–128 of `A-Z a-z 0-9 _ -`); absent: 24 random bytes, base64url. */
  token?: string;
  /** Lets the page open `?replay=<sessionId>` from this store. */
  store?: SessionStore;
  /** Stamps XState inspection events; pass the agent's clock so both time bases agree. */
  clock?: Clock;
  /** Records kept for late clients (default 20 000). */
  capacity?: number;
  /**
   * The tools a replay runs with (`replaySession`: their names, descriptions, parameters and
   * traits; nothing runs). Absent: stand-ins named after the log's tools.
   */
  tools?: ReplayRecordsOptions["tools"];
  /** The agent's configuration a replay runs with (limits, retry…), as `replaySession` takes it. */
  agent?: ReplayRecordsOptions["agent"];
}

/** A running inspector: its URL, the sink to give `createAgent`, replay and close. */
export interface Inspector {
  /** `http://127.0.0.1:PORT/?token=…` */
  url: string;
  port: number;
  token: string;
  /** Pass as `createAgent({ inspect })`. Cheap with no page open. */
  sink: InspectSink;
  /**
   * Replays a stored session's log through the shipped charts (`replayRecords`) and shows it
   * (replaces what the page shows); resolves with where the replay diverged from the log, if
   * it did.
   */
  replay(entries: readonly LogEntry[], sessionId?: string): Promise<Divergence | undefined>;
  /** Stops the server and closes every page's connection. */
  close(): Promise<void>;
}

const PAGE_DIR = new URL("./page/", import.meta.url);
const CSS = "text/css; charset=utf-8";
const JS = "text/javascript; charset=utf-8";
/** Every file the page may load; anything else under the token path is refused. */
const ASSETS: Record<string, string> = {
  "style.css": CSS,
  "tree.css": CSS,
  "timeline.css": CSS,
  "log.css": CSS,
  "main.js": JS,
  "model.js": JS,
  "tree.js": JS,
  "timeline.js": JS,
  "event-log.js": JS,
  "panels.js": JS,
  "dom.js": JS,
  "chart.js": JS,
  "chart.css": CSS,
};
/** A client further behind than this many bytes misses batches (counted, shown as dropped). */
const MAX_BUFFERED = 16 * 1024 * 1024;

/**
 * Starts the inspector: an HTTP server on 127.0.0.1 only, serving one page (static files read
 * once at startup, no CDN) and a WebSocket of records. Every HTTP and WebSocket request must
 * carry the token (query `token`, the `/t/<token>/` path of the page's own modules, or the
 * cookie the first load sets); anything else gets 403. The page's modules live under the token
 * path so that their relative imports carry it.
 *
 * Against other web pages in the same browser:
 * - the `Host` header must name this server (`127.0.0.1:<port>` or `localhost:<port>`): a DNS
 *   rebinding page, whose requests say `Host: attacker.example`, is refused;
 * - a WebSocket upgrade with an `Origin` must come from this server's own origin;
 * - `frame-ancestors 'none'` (and `X-Frame-Options: DENY`): no page can frame it;
 * - the first load (`/?token=…`) sets the token as a cookie (`HttpOnly`, `SameSite=Strict`,
 *   named per port) and the page removes it from the address bar; later loads and the
 *   WebSocket authenticate with the cookie. Cookies are scoped to the host, not the port:
 *   another server on 127.0.0.1 receives it, which is why it is named per port and also
 *   accepted only by this one.
 */
export async function startInspector(options: InspectorOptions = {}): Promise<Inspector> {
  const token = options.token ?? randomBytes(24).toString("base64url");
  if (!/^[A-Za-z0-9_-]{8,128}$/.test(token)) {
    throw new RangeError(
      "inspector token must be 8–128 characters of A-Z a-z 0-9 _ - (omit it to get a random one)",
    );
  }
  const port = options.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new RangeError(`inspector port must be an integer 0–65535, got ${port}`);
  }
  const files = new Map<string, Buffer>();
  for (const name of Object.keys(ASSETS)) files.set(name, readFileSync(new URL(name, PAGE_DIR)));
  const html = readFileSync(new URL("index.html", PAGE_DIR), "utf8").replaceAll("%TOKEN%", token);
  const charts = createChartSource();
  const replayOptions: ReplayRecordsOptions = {
    charts,
    ...(options.tools ? { tools: options.tools } : {}),
    ...(options.agent ? { agent: options.agent } : {}),
    ...(options.capacity ? { capacity: options.capacity } : {}),
  };
  const feed = createFeed({ clock: options.clock, capacity: options.capacity, charts });
  const now = () =>
    (options.clock ?? { now: () => performance.timeOrigin + performance.now() }).now();
  const expected = Buffer.from(token);
  const cookieName = () => `keel_inspector_${boundPort}`;
  const cookieToken = (req: IncomingMessage) => {
    for (const part of (req.headers.cookie ?? "").split(";")) {
      const at = part.indexOf("=");
      if (at > 0 && part.slice(0, at).trim() === cookieName()) return part.slice(at + 1).trim();
    }
    return null;
  };
  const hostOk = (req: IncomingMessage) =>
    req.headers.host === `127.0.0.1:${boundPort}` || req.headers.host === `localhost:${boundPort}`;
  const originOk = (req: IncomingMessage) =>
    req.headers.origin === undefined ||
    req.headers.origin === `http://127.0.0.1:${boundPort}` ||
    req.headers.origin === `http://localhost:${boundPort}`;
  const tokenOk = (given: string | null | undefined) => {
    if (!given) return false;
    const buf = Buffer.from(given);
    return buf.length === expected.length && timingSafeEqual(buf, expected);
  };
  let boundPort = 0;

  const refuse = (res: ServerResponse) => {
    res.writeHead(403, {
      "content-type": "text/plain; charset=utf-8",
      "cache-control": "no-store",
    });
    res.end("403 forbidden: open the URL printed by `keel inspect`, it carries the token\n");
  };
  const headers = (type: string) => ({
    "content-type": type,
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "content-security-policy": `default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src ws://127.0.0.1:${boundPort} ws://localhost:${boundPort}; frame-ancestors 'none'; base-uri 'none'; form-action 'none'`,
  });

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (req.method !== "GET" && req.method !== "HEAD") return refuse(res);
    if (!hostOk(req)) return refuse(res);
    if (url.pathname === "/" && tokenOk(url.searchParams.get("token"))) {
      res.writeHead(200, {
        ...headers("text/html; charset=utf-8"),
        "set-cookie": `${cookieName()}=${token}; HttpOnly; SameSite=Strict; Path=/`,
      });
      return res.end(html);
    }
    if (url.pathname === "/" && tokenOk(cookieToken(req))) {
      res.writeHead(200, headers("text/html; charset=utf-8"));
      return res.end(html);
    }
    const match = /^\/t\/([^/]+)\/([a-z-]+\.(?:js|css))$/.exec(url.pathname);
    if (match && tokenOk(match[1]) && files.has(match[2])) {
      res.writeHead(200, headers(ASSETS[match[2]]));
      return res.end(files.get(match[2]));
    }
    refuse(res);
  });

  const wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024 });
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const authorised = tokenOk(url.searchParams.get("token")) || tokenOk(cookieToken(req));
    if (url.pathname !== "/ws" || !authorised || !hostOk(req) || !originOk(req)) {
      socket.end("HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on("message", (data) => answer(ws, data));
      const replayId = url.searchParams.get("replay");
      if (replayId) void serveReplay(ws, replayId);
      else serveLive(ws);
    });
  });

  const send = (ws: WebSocket, message: object) => {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(message));
  };

  /** The page's requests: `{ type: "chart", machine }` gets the machine's placed statechart. */
  const answer = (ws: WebSocket, data: unknown) => {
    let request: { type?: unknown; machine?: unknown };
    try {
      request = JSON.parse(String(data));
    } catch {
      return send(ws, { type: "error", error: "the inspector takes JSON requests" });
    }
    if (request?.type !== "chart" || typeof request.machine !== "string") {
      return send(ws, {
        type: "error",
        error: 'unknown request: expected { type: "chart", machine }',
      });
    }
    const machine = request.machine.slice(0, 200);
    charts.chart(machine).then(
      (chart) => send(ws, { type: "chart", machine, chart }),
      (error: unknown) =>
        send(ws, {
          type: "chart",
          machine,
          error: error instanceof Error ? error.message : String(error),
        }),
    );
  };

  const serveLive = (ws: WebSocket) => {
    let dropped = 0;
    const unsubscribe = feed.subscribe((records) => {
      if (ws.bufferedAmount > MAX_BUFFERED) {
        dropped += records.length;
        return;
      }
      send(ws, { type: "batch", now: now(), records, dropped });
    });
    send(ws, { type: "hello", mode: "live", now: now(), records: feed.records() });
    ws.on("close", unsubscribe);
    void listStored().then(
      (sessions) => sessions.length && send(ws, { type: "sessions", sessions }),
    );
  };

  /**
   * The store's most recent sessions, for the page to offer as replays, each with the first
   * thing its user asked (read from its log) so that a person can tell them apart.
   */
  const listStored = async () => {
    try {
      const store = options.store;
      const all = (await store?.list()) ?? [];
      const recent = all.sort((a, b) => b.updatedAt - a.updatedAt).slice(0, 30);
      return await Promise.all(
        recent.map(async (s) => {
          const entries = await store!.load(s.sessionId).catch(() => []);
          const first = entries.find((e) => e.type === "user_message");
          return first?.type === "user_message" ? { ...s, firstPrompt: clip(first.text, 160) } : s;
        }),
      );
    } catch {
      return [];
    }
  };

  const serveReplay = async (ws: WebSocket, sessionId: string) => {
    if (!options.store) {
      return send(ws, {
        type: "hello",
        mode: "replay",
        now: now(),
        records: [],
        error: "this inspector has no store: start it with `keel inspect --replay <id>`",
      });
    }
    try {
      const entries = await options.store.load(sessionId);
      const error =
        entries.length === 0
          ? `no session "${sessionId}" in the store (see \`keel sessions\`)`
          : undefined;
      const { records } = error
        ? { records: [] }
        : await replayRecords(entries, sessionId, replayOptions);
      send(ws, {
        type: "hello",
        mode: "replay",
        sessionId,
        now: now(),
        records,
        ...(error ? { error } : {}),
      });
    } catch (cause) {
      send(ws, { type: "hello", mode: "replay", now: now(), records: [], error: String(cause) });
    }
  };

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  boundPort = typeof address === "object" && address ? address.port : port;

  return {
    url: `http://127.0.0.1:${boundPort}/?token=${token}`,
    port: boundPort,
    token,
    sink: { observe: feed.observe, publish: feed.publish },
    async replay(entries, sessionId = "replay") {
      const replayed = await replayRecords(entries, sessionId, replayOptions);
      const records: InspectRecord[] = replayed.records;
      feed.flush();
      feed.reset(records);
      for (const ws of wss.clients) {
        send(ws, { type: "hello", mode: "replay", sessionId, now: now(), records: feed.records() });
      }
      return replayed.divergence;
    },
    async close() {
      feed.close();
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
