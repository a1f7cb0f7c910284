// `keel serve` against a hostile client, a failing disk and a bug (issue 27: findings 3, 4, 7,
// 8, 9 and the serve items of the Low list). The server runs over in-memory Node streams (no
// mock) with real sessions, stores and scripted models.
import { PassThrough } from "node:stream";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { serve } from "../cli/serve/server.ts";
import { guardProcess } from "../cli/serve.ts";
import type { ServerFrame } from "../contracts/protocol.ts";
import { type Model, memoryStore, type SessionStore, scriptedModel } from "../index.ts";
import type { ScriptStep } from "../providers/scripted-model.ts";

const quiet = pino({ level: "silent" });

function start(options: {
  model?: () => Model;
  store?: SessionStore;
  maxFrameBytes?: number;
  maxBufferedBytes?: number;
  controlTimeoutMs?: number;
  outputHighWaterMark?: number;
  read?: boolean;
}) {
  const input = new PassThrough();
  const output = new PassThrough({ highWaterMark: options.outputHighWaterMark ?? 16 * 1024 });
  const server = serve({
    input,
    output,
    store: options.store ?? memoryStore(),
    model: options.model ?? (() => scriptedModel([{ text: "hi" }])),
    logger: quiet,
    version: "test",
    ...(options.maxFrameBytes ? { maxFrameBytes: options.maxFrameBytes } : {}),
    ...(options.maxBufferedBytes ? { maxBufferedBytes: options.maxBufferedBytes } : {}),
    ...(options.controlTimeoutMs ? { controlTimeoutMs: options.controlTimeoutMs } : {}),
  });
  const frames: ServerFrame[] = [];
  const waiters: { pred: (f: ServerFrame) => boolean; resolve: (f: ServerFrame) => void }[] = [];
  let buffer = "";
  let bytes = 0;
  const read = () =>
    output.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
      buffer += chunk.toString("utf8");
      const lines = buffer.split("\n");
      buffer = lines.pop() ?? "";
      for (const line of lines) {
        const frame = JSON.parse(line) as ServerFrame;
        frames.push(frame);
        for (const w of [...waiters]) {
          if (w.pred(frame)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(frame);
          }
        }
      }
    });
  if (options.read !== false) read();
  const send = (frame: object) => input.write(`${JSON.stringify(frame)}\n`);
  send({ type: "hello", protocol: "1.0" });
  return {
    input,
    output,
    server,
    frames,
    send,
    read,
    bytes: () => bytes,
    waitFor(pred: (f: ServerFrame) => boolean): Promise<ServerFrame> {
      const seen = frames.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve) => waiters.push({ pred, resolve }));
    },
  };
}

const response = (id: number) => (f: ServerFrame) =>
  (f.type === "ok" || f.type === "error") && "id" in f && f.id === id;

const ends: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const end of ends.splice(0)) await end();
});

describe("keel serve forwards the model and survives its sessions' failures", () => {
  it("forwards the wrapped model's window, reserve and counter: context.measured reads the window (it read null, so sessions never compacted)", async () => {
    const t = start({
      model: () =>
        scriptedModel([{ text: "ok" }], { contextWindow: 50_000, maxOutputTokens: 1000 }),
    });
    ends.push(() => t.server.shutdown("test over"));
    t.send({ type: "session.open", id: 1, sessionId: "s" });
    t.send({ type: "subscribe", id: 2, sessionId: "s", events: ["context.measured"] });
    t.send({ type: "prompt", id: 3, sessionId: "s", text: "hello" });
    await t.waitFor(response(3));
    const measured = t.frames.find(
      (f) => f.type === "event" && f.event.type === "context.measured",
    );
    expect(measured).toMatchObject({ event: { window: 50_000, reserve: 1000 } });
  });

  it("an interrupt whose append is refused (disk full) gets an error response; the server and its other sessions go on (it answered ok, then exited 1 without goodbye)", async () => {
    const inner = memoryStore();
    let full = false;
    const store: SessionStore = {
      ...inner,
      append: (sessionId, entries) =>
        full
          ? Promise.reject(
              Object.assign(new Error("ENOSPC: no space left on device"), { code: "ENOSPC" }),
            )
          : inner.append(sessionId, entries),
    };
    const t = start({ store, model: () => scriptedModel([{ text: "ok" }, { text: "again" }]) });
    ends.push(() => t.server.shutdown("test over"));
    t.send({ type: "session.open", id: 1, sessionId: "a" });
    t.send({ type: "session.open", id: 2, sessionId: "b" });
    await t.waitFor(response(2));
    full = true;
    t.send({ type: "interrupt", id: 3, sessionId: "a", reason: "stop" });
    const answer = await t.waitFor(response(3));
    expect(answer).toMatchObject({ type: "error", id: 3 });
    expect((answer as { message: string }).message).toMatch(/ENOSPC/);
    full = false;
    t.send({ type: "sessions.list", id: 4 });
    expect(await t.waitFor(response(4))).toMatchObject({ type: "ok" });
    expect(t.frames.some((f) => f.type === "goodbye")).toBe(false);
  });

  it("an unhandled rejection ends the connection with goodbye and a reason that names it, never a silent exit", async () => {
    const t = start({});
    const guard = guardProcess(t.server, quiet);
    try {
      process.emit("unhandledRejection", new Error("a bug somewhere"), Promise.resolve());
      const bye = await t.waitFor((f) => f.type === "goodbye");
      expect(bye).toMatchObject({
        reason: expect.stringMatching(/internal error \(unhandled rejection\): a bug somewhere/),
      });
      expect(guard.failed).toBe(true);
    } finally {
      guard.release();
    }
  });
});

describe("keel serve answers every request exactly once", () => {
  it("a duplicate request id is refused with `ref`, so the request in flight keeps the only response under its id (two responses carried the id)", async () => {
    const slow: ScriptStep[] = [{ text: "slow answer", delayMs: 150 }];
    const t = start({ model: () => scriptedModel(slow) });
    ends.push(() => t.server.shutdown("test over"));
    t.send({ type: "session.open", id: 1, sessionId: "s" });
    await t.waitFor(response(1));
    t.send({ type: "prompt", id: 5, sessionId: "s", text: "one" });
    t.send({ type: "prompt", id: 5, sessionId: "s", text: "two" });
    await t.waitFor(response(5));
    await new Promise((r) => setTimeout(r, 300));
    const withId = t.frames.filter((f) => "id" in f && f.id === 5);
    expect(withId).toHaveLength(1);
    expect(withId[0]).toMatchObject({ type: "ok" });
    expect(t.frames).toContainEqual(
      expect.objectContaining({ type: "error", ref: 5, code: "DUPLICATE_ID" }),
    );
  });

  it("a request sent after shutdown began and before goodbye gets SHUTTING_DOWN (it got no answer)", async () => {
    const t = start({ model: () => scriptedModel([{ text: "slow", delayMs: 400 }]) });
    t.send({ type: "session.open", id: 1, sessionId: "s" });
    await t.waitFor(response(1));
    t.send({ type: "prompt", id: 2, sessionId: "s", text: "go" });
    await new Promise((r) => setTimeout(r, 50));
    const closed = t.server.shutdown("SIGTERM received");
    t.send({ type: "sessions.list", id: 3 });
    await closed;
    const answer = t.frames.find(response(3));
    expect(answer).toMatchObject({ type: "error", code: "SHUTTING_DOWN" });
    const goodbyeAt = t.frames.findIndex((f) => f.type === "goodbye");
    expect(t.frames.indexOf(answer!)).toBeLessThan(goodbyeAt);
  });

  it("session.close then session.open of the same id, sent together, both succeed (SESSION_OPEN and INTERNAL before)", async () => {
    const t = start({});
    ends.push(() => t.server.shutdown("test over"));
    t.send({ type: "session.open", id: 1, sessionId: "s" });
    await t.waitFor(response(1));
    t.send({ type: "session.close", id: 2, sessionId: "s" });
    t.send({ type: "session.open", id: 3, sessionId: "s" });
    expect(await t.waitFor(response(2))).toMatchObject({ type: "ok" });
    expect(await t.waitFor(response(3))).toMatchObject({ type: "ok" });
  });
});

describe("keel serve under a client that floods or stops reading", () => {
  it("a tool.execute reply over the frame limit fails that call at once with its id, not after the control timeout", async () => {
    const t = start({
      maxFrameBytes: 4096,
      controlTimeoutMs: 60_000,
      model: () =>
        scriptedModel([
          { toolCalls: [{ id: "c1", name: "echo", arguments: '{"x":"y"}' }] },
          { text: "done" },
        ]),
    });
    ends.push(() => t.server.shutdown("test over"));
    t.send({
      type: "session.open",
      id: 1,
      sessionId: "s",
      tools: [
        {
          name: "echo",
          description: "echo",
          parameters: { type: "object", properties: { x: { type: "string" } } },
          traits: { risk: "low" },
        },
      ],
    });
    await t.waitFor(response(1));
    t.send({ type: "subscribe", id: 2, sessionId: "s", events: ["call.settled"] });
    const started = performance.now();
    t.send({ type: "prompt", id: 3, sessionId: "s", text: "go" });
    const exec = (await t.waitFor((f) => f.type === "tool.execute")) as { id: string };
    t.send({ type: "ok", id: exec.id, result: "z".repeat(10_000) });
    expect(await t.waitFor(response(3))).toMatchObject({ type: "ok" });
    expect(performance.now() - started).toBeLessThan(30_000);
    const settled = t.frames.find((f) => f.type === "event" && f.event.type === "call.settled");
    expect(settled).toMatchObject({ event: { result: { ok: false, code: "EXECUTION_FAILED" } } });
    expect(t.frames).toContainEqual(
      expect.objectContaining({ type: "error", ref: exec.id, code: "FRAME_TOO_LARGE" }),
    );
  });

  it("stops reading requests while the client does not read responses: 60 unread answers of 200 KB stay bounded (the server grew by 419 MB)", async () => {
    const big = "x".repeat(200_000);
    const t = start({
      read: false,
      maxBufferedBytes: 256 * 1024,
      outputHighWaterMark: 1024,
      model: () => scriptedModel([{ text: big }]),
    });
    t.send({ type: "session.open", id: 1, sessionId: "s" });
    t.send({ type: "prompt", id: 2, sessionId: "s", text: "talk" });
    await new Promise((r) => setTimeout(r, 300));
    for (let i = 0; i < 60; i++) t.send({ type: "messages", id: 100 + i, sessionId: "s" });
    await new Promise((r) => setTimeout(r, 500));
    // Every response is ~200 KB: without input backpressure all 60 would be queued (12 MB).
    expect(t.server.writer.buffered).toBeLessThan(3 * 1024 * 1024);
    expect(t.input.isPaused()).toBe(true);
    t.read();
    await t.waitFor(response(159));
    await t.server.shutdown("test over");
  });

  it("argument previews go out bounded and throttled: a 1 MB argument costs the client kilobytes (133 MB before)", async () => {
    const arg = JSON.stringify({ content: "q".repeat(1024 * 1024) });
    const t = start({
      model: () =>
        scriptedModel([
          { toolCalls: [{ id: "c1", name: "nothing", arguments: arg }], chunkSize: 256 },
          { text: "done" },
        ]),
    });
    ends.push(() => t.server.shutdown("test over"));
    t.send({ type: "session.open", id: 1, sessionId: "s" });
    t.send({ type: "subscribe", id: 2, sessionId: "s", events: ["call.previewed"] });
    await t.waitFor(response(2));
    const before = t.bytes();
    t.send({ type: "prompt", id: 3, sessionId: "s", text: "go" });
    await t.waitFor(response(3));
    const previews = t.frames.filter(
      (f) => f.type === "event" && f.event.type === "call.previewed",
    );
    expect(previews.length).toBeGreaterThan(0);
    for (const p of previews) expect(JSON.stringify(p).length).toBeLessThan(8 * 1024);
    expect(t.bytes() - before).toBeLessThan(2 * 1024 * 1024);
  });
});
