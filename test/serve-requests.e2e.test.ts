// `keel serve --stdio` as a real child process, spoken to in raw frames: the requests that act
// on a running session (follow_up, interrupt, compact, unsubscribe, session.close), the
// timeout of a `tool.execute` nobody answers, and the `permission.request`s one reply decides
// (docs/protocol.md §3 and §5).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { AgentEvent } from "../contracts/events.ts";
import type { ServerFrame } from "../contracts/protocol.ts";
import type { ScriptStep } from "../providers/scripted-model.ts";
import { type RawServer, responseTo, spawnServer } from "./support/serve-child.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-serve-requests-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let scripts = 0;

/** Starts a server whose sessions each play `steps`, and says hello. */
async function start(steps: ScriptStep[], extra: string[] = []): Promise<RawServer> {
  const file = join(dir, `script-${++scripts}.json`);
  writeFileSync(file, JSON.stringify(steps));
  const server = spawnServer([
    "--store",
    "memory",
    "--provider",
    "scripted",
    "--script",
    file,
    ...extra,
  ]);
  await server.waitFor((f) => f.type === "hello", "the server's hello");
  server.send({ type: "hello", protocol: "1.0" });
  return server;
}

/** Sends a request and waits for its response. */
async function ask(
  server: RawServer,
  frame: { type: string; id: string | number; [field: string]: unknown },
) {
  server.send(frame);
  return server.waitFor(responseTo(frame.id), `the response to ${frame.type} ${frame.id}`);
}

async function stop(server: RawServer) {
  server.child.stdin.end();
  expect(await server.exited).toEqual({ code: 0, signal: null });
}

/** The events of session `sessionId` the server sent so far. */
const eventsOf = (server: RawServer, sessionId: string): AgentEvent[] =>
  server.frames.flatMap((f) => (f.type === "event" && f.sessionId === sessionId ? [f.event] : []));

const isEvent = (type: AgentEvent["type"]) => (f: ServerFrame) =>
  f.type === "event" && f.event.type === type;

const highRiskTool = {
  name: "delete_file",
  description: "Deletes a file.",
  parameters: {
    type: "object",
    properties: { path: { type: "string" } },
    required: ["path"],
  },
  traits: { risk: "high", concurrencySafe: true },
};

describe("keel serve --stdio: requests on a running session", () => {
  it("follow_up is acknowledged at once and read only when the running turn would end", async () => {
    const server = await start([
      { text: "first answer", delayMs: 400 },
      { text: "answer to the follow-up" },
    ]);
    await ask(server, { type: "session.open", id: "open", sessionId: "f" });
    await ask(server, { type: "subscribe", id: "sub", sessionId: "f" });
    server.send({ type: "prompt", id: "go", sessionId: "f", text: "start" });
    await server.waitFor(isEvent("attempt.started"));
    const ack = await ask(server, {
      type: "follow_up",
      id: "fu",
      sessionId: "f",
      text: "and then?",
    });
    expect(ack).toMatchObject({ type: "ok", result: { inboxId: expect.any(String) } });
    const inboxId = (ack as { result: { inboxId: string } }).result.inboxId;
    // Acknowledged while the first model response is still on its way.
    expect(server.frames.some(responseTo("go"))).toBe(false);
    expect(await server.waitFor(responseTo("go"))).toMatchObject({
      type: "ok",
      result: { status: "completed" },
    });
    await server.waitFor(
      (f) =>
        f.type === "event" &&
        f.event.type === "turn.ended" &&
        eventsOf(server, "f").filter((e) => e.type === "turn.ended").length === 2,
      "the follow-up's turn to end",
    );
    const events = eventsOf(server, "f");
    const consumed = events.findIndex((e) => e.type === "inbox.consumed" && e.inboxId === inboxId);
    const firstAnswer = events.findIndex(
      (e) => e.type === "message.committed" && JSON.stringify(e).includes("first answer"),
    );
    expect(consumed).toBeGreaterThan(firstAnswer);
    expect(firstAnswer).toBeGreaterThan(-1);
    const messages = await ask(server, { type: "messages", id: "m", sessionId: "f" });
    expect(
      (
        messages as { result: { messages: { role: string; content: unknown }[] } }
      ).result.messages.map((m) => [m.role, m.content]),
    ).toEqual([
      ["user", "start"],
      ["assistant", "first answer"],
      ["user", "and then?"],
      ["assistant", "answer to the follow-up"],
    ]);
    await stop(server);
  });

  it("interrupt ends the running turn cancelled with the client's reason; the session takes the next prompt", async () => {
    const server = await start([{ hang: true }, { text: "back again" }]);
    await ask(server, { type: "session.open", id: "open", sessionId: "i" });
    await ask(server, { type: "subscribe", id: "sub", sessionId: "i", events: ["turn.ended"] });
    server.send({ type: "prompt", id: "go", sessionId: "i", text: "think forever" });
    // The turn is running: its model stream hangs until aborted.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(server.frames.some(responseTo("go"))).toBe(false);
    const ack = await ask(server, {
      type: "interrupt",
      id: "stop",
      sessionId: "i",
      reason: "the user pressed Esc",
    });
    expect(ack).toEqual({ type: "ok", id: "stop", result: {} });
    expect(await server.waitFor(responseTo("go"))).toMatchObject({
      type: "ok",
      result: { status: "cancelled" },
    });
    expect(eventsOf(server, "i")).toMatchObject([
      {
        type: "turn.ended",
        status: "cancelled",
        reason: expect.stringContaining("the user pressed Esc"),
      },
    ]);
    expect(
      await ask(server, { type: "prompt", id: "again", sessionId: "i", text: "hi" }),
    ).toMatchObject({
      type: "ok",
      result: { status: "completed" },
    });
    await stop(server);
  });

  it("compact refuses with NOTHING_TO_COMPACT on an empty session and TURN_OPEN during a turn, and between turns replaces older history with the model's summary", async () => {
    const long = (what: string) => `${what}: ${"lorem ipsum dolor sit amet ".repeat(60)}`;
    const server = await start([
      { text: long("first") },
      { text: long("second") },
      { text: "Summary: the user asked twice and got long answers." },
      { hang: true },
    ]);
    await ask(server, { type: "session.open", id: "open", sessionId: "c" });
    expect(await ask(server, { type: "compact", id: "empty", sessionId: "c" })).toMatchObject({
      type: "error",
      code: "REFUSED",
      refusal: "NOTHING_TO_COMPACT",
    });
    await ask(server, { type: "prompt", id: "p1", sessionId: "c", text: "one" });
    await ask(server, { type: "prompt", id: "p2", sessionId: "c", text: "two" });
    const done = await ask(server, {
      type: "compact",
      id: "now",
      sessionId: "c",
      keepRecentTokens: 0,
    });
    expect(done).toMatchObject({
      type: "ok",
      result: { entryId: expect.any(String), firstKeptId: expect.any(String), durable: true },
    });
    const result = (
      done as { result: { tokensBefore: number; tokensAfter: number; summarized: number } }
    ).result;
    expect(result.tokensAfter).toBeLessThan(result.tokensBefore);
    expect(result.summarized).toBeGreaterThan(0);
    const entries = await ask(server, { type: "entries", id: "log", sessionId: "c" });
    const compaction = (
      entries as { result: { entries: { type: string; summary?: string }[] } }
    ).result.entries.filter((e) => e.type === "compaction");
    expect(compaction).toMatchObject([
      { summary: expect.stringContaining("the user asked twice") },
    ]);
    const messages = await ask(server, { type: "messages", id: "m", sessionId: "c" });
    const view = JSON.stringify(messages);
    expect(view).toContain("the user asked twice");
    expect(view).not.toContain("first: lorem");
    // A turn is running (its model hangs): compaction waits for no one, it refuses.
    server.send({ type: "prompt", id: "p3", sessionId: "c", text: "three" });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await ask(server, { type: "compact", id: "busy", sessionId: "c" })).toMatchObject({
      type: "error",
      code: "REFUSED",
      refusal: "TURN_OPEN",
    });
    await stop(server);
  });

  it("after unsubscribe no event of the session reaches the client; another session's subscription goes on", async () => {
    const server = await start([{ text: "hello" }, { text: "hello again" }]);
    for (const s of ["u", "v"]) {
      await ask(server, { type: "session.open", id: `open-${s}`, sessionId: s });
      await ask(server, { type: "subscribe", id: `sub-${s}`, sessionId: s });
    }
    await ask(server, { type: "prompt", id: "p1", sessionId: "u", text: "one" });
    expect(eventsOf(server, "u").some((e) => e.type === "turn.ended")).toBe(true);
    expect(await ask(server, { type: "unsubscribe", id: "unsub", sessionId: "u" })).toEqual({
      type: "ok",
      id: "unsub",
      result: {},
    });
    const seen = server.frames.length;
    expect(
      await ask(server, { type: "prompt", id: "p2", sessionId: "u", text: "two" }),
    ).toMatchObject({
      result: { status: "completed" },
    });
    await ask(server, { type: "prompt", id: "p3", sessionId: "v", text: "three" });
    const later = server.frames.slice(seen).filter((f) => f.type === "event");
    expect(later.filter((f) => f.type === "event" && f.sessionId === "u")).toEqual([]);
    expect(
      later.some((f) => f.type === "event" && f.sessionId === "v" && f.event.type === "turn.ended"),
    ).toBe(true);
    await stop(server);
  });

  it("session.close settles the running turn, then requests for the session get UNKNOWN_SESSION until it is opened again", async () => {
    const server = await start([{ hang: true }]);
    await ask(server, { type: "session.open", id: "open", sessionId: "x" });
    server.send({ type: "prompt", id: "go", sessionId: "x", text: "wait" });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const closed = await ask(server, { type: "session.close", id: "close", sessionId: "x" });
    expect(closed).toEqual({ type: "ok", id: "close", result: {} });
    // The turn settled before the close was acknowledged.
    const order = server.frames.filter((f) => responseTo("go")(f) || responseTo("close")(f));
    expect(order).toMatchObject([
      { id: "go", type: "ok", result: { status: "cancelled" } },
      { id: "close" },
    ]);
    for (const frame of [
      { type: "prompt", id: "after-prompt", sessionId: "x", text: "still there?" },
      { type: "messages", id: "after-messages", sessionId: "x" },
      { type: "session.close", id: "after-close", sessionId: "x" },
    ]) {
      expect(await ask(server, frame)).toMatchObject({
        type: "error",
        code: "UNKNOWN_SESSION",
        message: expect.stringContaining("open it with session.open"),
      });
    }
    const listed = await ask(server, { type: "sessions.list", id: "list" });
    expect(listed).toMatchObject({ result: { sessions: [{ sessionId: "x", open: false }] } });
    const reopened = await ask(server, { type: "session.open", id: "reopen", sessionId: "x" });
    expect(reopened).toMatchObject({ type: "ok", result: { sessionId: "x" } });
    expect((reopened as { result: { entries: number } }).result.entries).toBeGreaterThan(0);
    await stop(server);
  });
});

describe("keel serve --stdio: control requests", () => {
  it("a tool.execute no one answers ends at --control-timeout with a cancel and a TIMEOUT result, and the turn goes on", async () => {
    const server = await start(
      [
        { toolCalls: [{ id: "call_t", name: "delete_file", arguments: '{"path":"a.txt"}' }] },
        { text: "I could not tell whether a.txt was deleted." },
      ],
      ["--control-timeout", "300"],
    );
    await ask(server, {
      type: "session.open",
      id: "open",
      sessionId: "t",
      tools: [{ ...highRiskTool, traits: { risk: "low" } }],
    });
    await ask(server, { type: "subscribe", id: "sub", sessionId: "t", events: ["call.settled"] });
    server.send({ type: "prompt", id: "go", sessionId: "t", text: "delete a.txt" });
    const exec = (await server.waitFor((f) => f.type === "tool.execute")) as { id: string };
    expect(exec).toMatchObject({ callId: "call_t", tool: "delete_file", timeoutMs: 300 });
    expect(await server.waitFor(responseTo("go"))).toMatchObject({
      type: "ok",
      result: { status: "completed" },
    });
    expect(server.frames).toContainEqual({
      type: "cancel",
      id: exec.id,
      reason: "timed out after 300 ms",
    });
    expect(eventsOf(server, "t")).toMatchObject([
      {
        type: "call.settled",
        callId: "call_t",
        result: {
          ok: false,
          code: "TIMEOUT",
          message: expect.stringContaining("whether delete_file ran is unknown"),
        },
      },
    ]);
    const messages = JSON.stringify(
      await ask(server, { type: "messages", id: "m", sessionId: "t" }),
    );
    expect(messages).toContain("I could not tell whether a.txt was deleted.");
    // The answer after the timeout changes nothing.
    server.send({ type: "ok", id: exec.id, result: "deleted" });
    expect(
      await server.waitFor((f) => f.type === "error" && "ref" in f && f.ref === exec.id),
    ).toMatchObject({ code: "LATE_REPLY" });
    expect(eventsOf(server, "t")).toHaveLength(1);
    await stop(server);
  });
});
