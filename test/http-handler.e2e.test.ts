// The HTTP transport (http/) over real HTTP: the bearer token gates every route and nothing runs
// without it; events stream as SSE whose ids are the log's seqs, so a reader resuming from any
// id gets exactly the later entries, also after the server (a new agent on the same SQLite file)
// restarted; a client that goes away mid-turn leaves the turn running; several clients watch one
// session; CORS is by origin; bodies are bounded; errors are JSON with a code.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type Agent,
  createAgent,
  createHttpHandler,
  defineTool,
  type HttpHandler,
  type LogEntry,
  memoryStore,
  type ScriptStep,
  type SessionStore,
  scriptedModel,
  sqliteStore,
  toNodeListener,
} from "../index.ts";
import { readSse } from "./support/sse-client.ts";

const TOKEN = "t0k3n-for-the-http-tests";
const auth = { authorization: `Bearer ${TOKEN}` };
const dir = mkdtempSync(join(tmpdir(), "keel-http-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Served {
  url: string;
  agent: Agent;
  handler: HttpHandler;
  requests: () => number;
  close(): Promise<void>;
}

let open: Served[] = [];
afterEach(async () => {
  for (const s of open) await s.close();
  open = [];
});

/** A tool whose calls wait until `release()`: a turn that stays mid-call as long as a test wants. */
function gate() {
  let release!: () => void;
  const released = new Promise<void>((r) => {
    release = r;
  });
  let started!: () => void;
  const running = new Promise<void>((r) => {
    started = r;
  });
  const tool = defineTool({
    name: "slow",
    description: "waits",
    parameters: z.object({}),
    traits: { risk: "low" },
    execute: async () => {
      started();
      await released;
      return "slow done";
    },
  });
  return { tool, release, running };
}

const echoTool = defineTool({
  name: "echo",
  description: "echoes",
  parameters: z.object({ text: z.string() }),
  traits: { risk: "low" },
  execute: ({ text }) => text,
});

const remove = defineTool({
  name: "delete_file",
  description: "deletes a file",
  parameters: z.object({ path: z.string() }),
  traits: { risk: "high" },
  execute: ({ path }) => `deleted ${path}`,
});

async function serve(
  script: ScriptStep[],
  options: { store?: SessionStore; tools?: ReturnType<typeof defineTool>[]; cors?: string[] } = {},
): Promise<Served> {
  const model = scriptedModel(script);
  const agent = createAgent({
    model,
    tools: options.tools ?? [remove],
    store: options.store ?? memoryStore(),
    permissions: { ask: () => new Promise(() => {}) },
  });
  const handler = createHttpHandler(agent, {
    token: TOKEN,
    ...(options.cors ? { cors: { origins: options.cors } } : {}),
    maxBodyBytes: 4096,
  });
  const server: Server = createServer(toNodeListener(handler));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const served: Served = {
    url,
    agent,
    handler,
    requests: () => model.requests.length,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await handler.close();
      await agent.close();
    },
  };
  open.push(served);
  return served;
}

const post = (url: string, body: unknown, headers: Record<string, string> = auth) =>
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

describe("the HTTP transport", () => {
  it("answers 401 on every route without the token, and runs nothing", async () => {
    const store = memoryStore();
    const s = await serve([{ text: "hi" }], { store });
    const routes: [string, string, unknown?][] = [
      ["GET", "/sessions"],
      ["POST", "/sessions", { sessionId: "a" }],
      ["POST", "/sessions/a/prompt", { text: "hi" }],
      ["POST", "/sessions/a/steer", { text: "hi" }],
      ["POST", "/sessions/a/follow-up", { text: "hi" }],
      ["POST", "/sessions/a/interrupt", {}],
      ["POST", "/sessions/a/permissions/r1", { reply: { type: "allow_once" } }],
      ["GET", "/sessions/a/entries"],
      ["GET", "/sessions/a/events"],
      [
        "POST",
        "/chat",
        { id: "a", messages: [{ id: "1", role: "user", parts: [{ type: "text", text: "hi" }] }] },
      ],
      ["GET", "/chat/a/stream"],
      ["GET", "/nowhere"],
    ];
    for (const [method, path, body] of routes) {
      for (const headers of [
        {} as Record<string, string>,
        { authorization: "Bearer wrong-token-of-the-same-len" },
        { authorization: TOKEN },
      ]) {
        const res = await fetch(s.url + path, {
          method,
          headers: { "content-type": "application/json", ...headers },
          ...(body ? { body: JSON.stringify(body) } : {}),
        });
        expect(res.status, `${method} ${path}`).toBe(401);
        expect((await res.json()).error.code).toBe("UNAUTHORIZED");
      }
    }
    await new Promise((r) => setTimeout(r, 50));
    expect(s.requests()).toBe(0);
    expect(await store.list()).toEqual([]);
  });

  it("refuses to be made without a token or authorize, or with a short token", () => {
    const agent = createAgent({ model: scriptedModel([]), store: memoryStore() });
    expect(() => createHttpHandler(agent, {})).toThrow(/token.*authorize/);
    expect(() => createHttpHandler(agent, { token: "short" })).toThrow(/16 or more/);
  });

  it("runs a prompt and streams the session's entries with their seqs as ids, live events between", async () => {
    const s = await serve([{ text: "hello there" }]);
    const opened = await post(`${s.url}/sessions`, { sessionId: "s1" });
    expect(await opened.json()).toEqual({ sessionId: "s1", entries: 0 });
    const events = await readSse(`${s.url}/sessions/s1/events`, auth);
    const res = await post(`${s.url}/sessions/s1/prompt`, { text: "hi" });
    expect(res.status).toBe(202);
    const { inboxId } = await res.json();
    await events.until((e) => e.event === "entry" && JSON.parse(e.data).type === "turn_end");
    const stored = await s.agent.store.load("s1");
    const entries = events.events.filter((e) => e.event === "entry");
    expect(entries.map((e) => e.id)).toEqual(stored.map((e) => String(e.seq)));
    expect(entries.map((e) => JSON.parse(e.data))).toEqual(JSON.parse(JSON.stringify(stored)));
    expect(JSON.parse(entries[0].data)).toMatchObject({ type: "inbox", inboxId, body: "hi" });
    const live = events.events.filter((e) => e.event !== "entry");
    expect(live.map((e) => e.event)).toContain("text.streamed");
    for (const e of live) expect(e.id).toMatch(/^\d+\.\d+$/);
    // Ids grow in the order they were written: (seq, n) lexicographically.
    const key = (id: string) => id.split(".").map(Number);
    for (let i = 1; i < events.events.length; i++) {
      const [a, b] = [key(events.events[i - 1].id!), key(events.events[i].id!)];
      expect(a[0] < b[0] || (a[0] === b[0] && (a[1] ?? 0) < (b[1] ?? 0))).toBe(true);
    }
    events.close();
  });

  it("a reader resuming from any id in the same process gets exactly the events after it, live ones included", async () => {
    const s = await serve(
      [
        { text: "step one", toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"x"}' }] },
        { text: "all done" },
      ],
      { tools: [echoTool] },
    );
    const first = await readSse(`${s.url}/sessions/s1/events`, auth);
    await post(`${s.url}/sessions/s1/prompt`, { text: "go" });
    await first.until((e) => e.event === "entry" && JSON.parse(e.data).type === "turn_end");
    first.close();
    const all = first.events;
    for (let i = 0; i < all.length; i++) {
      const again = await readSse(`${s.url}/sessions/s1/events`, {
        ...auth,
        "last-event-id": all[i].id!,
      });
      if (i < all.length - 1) await again.until((_e, got) => got.length >= all.length - i - 1);
      await new Promise((r) => setTimeout(r, 20));
      again.close();
      expect(
        again.events.map((e) => e.id),
        `after ${all[i].id}`,
      ).toEqual(all.slice(i + 1).map((e) => e.id));
      expect(again.events.map((e) => e.data)).toEqual(all.slice(i + 1).map((e) => e.data));
    }
  });

  it("after a restart on SQLite, a reader resuming from any id gets every later entry once", async () => {
    const file = join(dir, "restart.db");
    const a = await serve([{ text: "before the restart" }], { store: sqliteStore(file) });
    const reader = await readSse(`${a.url}/sessions/s1/events`, auth);
    await post(`${a.url}/sessions/s1/prompt`, { text: "one" });
    await reader.until((e) => e.event === "entry" && JSON.parse(e.data).type === "turn_end");
    reader.close();
    const seen = reader.events;
    await a.close();
    open = open.filter((o) => o !== a);
    const store = sqliteStore(file);
    const b = await serve([{ text: "after the restart" }], { store });
    await post(`${b.url}/sessions/s1/prompt`, { text: "two", wait: true });
    const stored = await store.load("s1");
    for (const from of seen) {
      const after = Number(from.id!.split(".")[0]);
      const expected = stored.filter((e) => e.seq > after);
      const again = await readSse(`${b.url}/sessions/s1/events`, {
        ...auth,
        "last-event-id": from.id!,
      });
      await again.until((_e, got) => got.length >= expected.length);
      await new Promise((r) => setTimeout(r, 20));
      again.close();
      expect(
        again.events.map((e) => e.id),
        `after ${from.id}`,
      ).toEqual(expected.map((e) => String(e.seq)));
      expect(again.events.map((e) => (JSON.parse(e.data) as LogEntry).id)).toEqual(
        expected.map((e) => e.id),
      );
    }
    const ahead = await fetch(`${b.url}/sessions/s1/events`, {
      headers: { ...auth, "last-event-id": "999" },
    });
    expect(ahead.status).toBe(400);
    expect((await ahead.json()).error.code).toBe("INVALID_EVENT_ID");
    const junk = await fetch(`${b.url}/sessions/s1/events`, {
      headers: { ...auth, "last-event-id": "x1" },
    });
    expect((await junk.json()).error.code).toBe("INVALID_EVENT_ID");
  });

  it("a client that goes away mid-turn leaves the turn running to its end; several clients watch one session", async () => {
    const slow = gate();
    const s = await serve(
      [{ toolCalls: [{ id: "c1", name: "slow", arguments: "{}" }] }, { text: "finished anyway" }],
      { tools: [slow.tool] },
    );
    const watcher = await readSse(`${s.url}/sessions/s1/events`, auth);
    const leaver = await readSse(`${s.url}/sessions/s1/events`, auth);
    const chat = await fetch(`${s.url}/chat`, {
      method: "POST",
      headers: { "content-type": "application/json", ...auth },
      body: JSON.stringify({
        id: "s1",
        messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "go" }] }],
      }),
    });
    expect(chat.status).toBe(200);
    await slow.running;
    leaver.close();
    await chat.body!.cancel();
    slow.release();
    const end = await watcher.until((e) => e.event === "turn.ended");
    expect(JSON.parse(end.data)).toMatchObject({ status: "completed" });
    const session = await s.agent.openSession("s1");
    expect(session.history().at(-1)).toMatchObject({
      role: "assistant",
      content: [{ type: "text", text: "finished anyway" }],
    });
    // The one that stayed saw everything the one that left saw before it left, in the same order.
    expect(watcher.events.slice(0, leaver.events.length).map((e) => e.id)).toEqual(
      leaver.events.map((e) => e.id),
    );
    watcher.close();
  });

  it("a permission request waits for a reply over HTTP; an interrupt is a request of its own", async () => {
    const s = await serve([
      { toolCalls: [{ id: "c1", name: "delete_file", arguments: '{"path":"a.txt"}' }] },
      { text: "deleted it" },
      { toolCalls: [{ id: "c2", name: "delete_file", arguments: '{"path":"b.txt"}' }] },
    ]);
    const events = await readSse(`${s.url}/sessions/s1/events`, auth);
    await post(`${s.url}/sessions/s1/prompt`, { text: "delete a" });
    const asked = await events.until((e) => e.event === "permission.requested");
    const { requestId } = JSON.parse(asked.data).request;
    const pending = await (
      await fetch(`${s.url}/sessions/s1/permissions`, { headers: auth })
    ).json();
    expect(pending.requests.map((r: { requestId: string }) => r.requestId)).toEqual([requestId]);
    const badReply = await post(`${s.url}/sessions/s1/permissions/${requestId}`, {
      reply: { type: "maybe" },
    });
    expect(badReply.status).toBe(400);
    expect((await badReply.json()).error.message).toMatch(/allow_once/);
    const ok = await post(`${s.url}/sessions/s1/permissions/${requestId}`, {
      reply: { type: "allow_once" },
    });
    expect(ok.status).toBe(200);
    await events.until((e) => e.event === "turn.ended");
    const again = await post(`${s.url}/sessions/s1/permissions/${requestId}`, {
      reply: { type: "allow_once" },
    });
    expect(again.status).toBe(409); // the first answer decided it: a second is refused
    expect(await again.json()).toMatchObject({
      error: { code: "REFUSED", refusal: "ALREADY_DECIDED" },
    });
    await post(`${s.url}/sessions/s1/prompt`, { text: "delete b" });
    await events.until(
      (e, all) =>
        e.event === "permission.requested" &&
        all.filter((x) => x.event === "permission.requested").length === 2,
    );
    const stop = await post(`${s.url}/sessions/s1/interrupt`, { reason: "the user pressed stop" });
    expect(stop.status).toBe(202);
    const ended = await events.until(
      (e, all) =>
        e.event === "turn.ended" && all.filter((x) => x.event === "turn.ended").length === 2,
    );
    expect(JSON.parse(ended.data)).toMatchObject({ status: "cancelled" });
    const entries = (await (await fetch(`${s.url}/sessions/s1/entries`, { headers: auth })).json())
      .entries as LogEntry[];
    expect(
      entries
        .filter((e) => e.type === "call_result")
        .map((e) => e.type === "call_result" && e.callId),
    ).toEqual(["c1", "c2"]);
    events.close();
  });

  it("answers a cross-origin browser only from a listed origin; same-origin pages need no listing", async () => {
    const s = await serve([], { cors: ["https://app.example"] });
    const pre = await fetch(`${s.url}/sessions`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example" },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(pre.headers.get("access-control-allow-headers")).toMatch(/authorization/);
    const listed = await fetch(`${s.url}/sessions`, {
      headers: { ...auth, origin: "https://app.example" },
    });
    expect(listed.status).toBe(200);
    expect(listed.headers.get("access-control-allow-origin")).toBe("https://app.example");
    const other = await fetch(`${s.url}/sessions`, {
      headers: { ...auth, origin: "https://evil.example" },
    });
    expect(other.status).toBe(403);
    expect((await other.json()).error.code).toBe("ORIGIN_NOT_ALLOWED");
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    const same = await fetch(`${s.url}/sessions`, { headers: { ...auth, origin: s.url } });
    expect(same.status).toBe(200);
  });

  it("bounds bodies and answers bad requests with a JSON error naming what was wrong", async () => {
    const s = await serve([]);
    const big = await post(`${s.url}/sessions/s1/prompt`, { text: "x".repeat(5000) });
    expect(big.status).toBe(413);
    expect((await big.json()).error.code).toBe("BODY_TOO_LARGE");
    const notJson = await fetch(`${s.url}/sessions/s1/prompt`, {
      method: "POST",
      headers: auth,
      body: "{nope",
    });
    expect(notJson.status).toBe(400);
    expect((await notJson.json()).error).toMatchObject({
      code: "INVALID_BODY",
      message: expect.stringMatching(/not JSON/),
    });
    const noText = await post(`${s.url}/sessions/s1/prompt`, { txt: "hi" });
    expect((await noText.json()).error.message).toMatch(
      /"text" must be a non-empty string; it is missing/,
    );
    const badId = await post(`${s.url}/sessions`, { sessionId: "a b/../c" });
    expect((await badId.json()).error.code).toBe("INVALID_BODY");
    const nowhere = await fetch(`${s.url}/sessions/s1/nothing`, { headers: auth });
    expect(nowhere.status).toBe(404);
    expect((await nowhere.json()).error.code).toBe("NOT_FOUND");
    const wrongMethod = await fetch(`${s.url}/chat`, { headers: auth });
    expect(wrongMethod.status).toBe(405);
    expect(s.requests()).toBe(0);
  });
});
