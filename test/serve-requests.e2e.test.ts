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

describe("keel serve --stdio: one reply decides several permission requests", () => {
  const twoDeletes = () => [
    {
      toolCalls: [
        { id: "call_a", name: "delete_file", arguments: '{"path":"a.txt"}' },
        { id: "call_b", name: "delete_file", arguments: '{"path":"b.txt"}' },
      ],
    },
    { text: "done" },
  ];

  /** Opens a session with the high-risk tool, prompts, and returns both permission.requests. */
  async function twoAsks(server: RawServer) {
    await ask(server, {
      type: "session.open",
      id: "open",
      sessionId: "p",
      tools: [highRiskTool],
      permissions: { timeoutMs: 60_000 },
    });
    await ask(server, {
      type: "subscribe",
      id: "sub",
      sessionId: "p",
      events: ["permission.decided", "call.settled"],
    });
    server.send({ type: "prompt", id: "go", sessionId: "p", text: "delete both" });
    await server.waitFor(
      () => server.frames.filter((f) => f.type === "permission.request").length === 2,
      "two permission requests",
    );
    const asks = server.frames.filter((f) => f.type === "permission.request") as {
      id: string;
      request: { requestId: string; callId: string };
    }[];
    const byCall = Object.fromEntries(asks.map((a) => [a.request.callId, a]));
    return { a: byCall.call_a, b: byCall.call_b };
  }

  /** Where the first frame matching `pred` is in what the server wrote (-1: none). */
  const at = (server: RawServer, pred: (f: ServerFrame) => boolean) =>
    server.frames.findIndex(pred);
  const withdrawalOf = (id: string) => (f: ServerFrame) => f.type === "cancel" && f.id === id;
  const settledCall = (callId: string) => (f: ServerFrame) =>
    f.type === "event" && f.event.type === "call.settled" && f.event.callId === callId;

  const cancels = (server: RawServer) => server.frames.filter((f) => f.type === "cancel");
  const decided = (server: RawServer) =>
    eventsOf(server, "p").flatMap((e) =>
      e.type === "permission.decided"
        ? [{ callId: e.callId, decision: e.decision.type, source: e.source }]
        : [],
    );

  it("a deny answered to one request reaches the other: its permission.request is withdrawn and a late reply to it changes nothing", async () => {
    const server = await start(twoDeletes());
    const { a, b } = await twoAsks(server);
    server.send({ type: "ok", id: a.id, result: { type: "deny" } });
    const withdrawn = await server.waitFor(
      (f) => f.type === "cancel" && f.id === b.id,
      "b withdrawn",
    );
    expect(withdrawn).toMatchObject({ reason: expect.stringContaining("decided") });
    expect(await server.waitFor(responseTo("go"))).toMatchObject({
      type: "ok",
      result: { status: "cancelled" },
    });
    expect(decided(server)).toEqual([
      { callId: "call_a", decision: "declined", source: { type: "reply", reply: "deny" } },
      {
        callId: "call_b",
        decision: "declined",
        source: { type: "spread", reply: "deny", by: a.request.requestId },
      },
    ]);
    server.send({ type: "ok", id: b.id, result: { type: "allow_once" } });
    expect(
      await server.waitFor((f) => f.type === "error" && "ref" in f && f.ref === b.id),
    ).toMatchObject({
      code: "LATE_REPLY",
    });
    expect(server.frames.some((f) => f.type === "tool.execute")).toBe(false);
    expect(cancels(server).map((c) => c.id)).toEqual([b.id]);
    // Withdrawn as soon as decided: before the call it decided settles.
    expect(at(server, withdrawalOf(b.id))).toBeLessThan(at(server, settledCall("call_b")));
    await stop(server);
  });

  it("allow_always answered to one request allows the other calls of its tool: the other permission.request is withdrawn and both run", async () => {
    const server = await start(twoDeletes());
    const { a, b } = await twoAsks(server);
    server.send({ type: "ok", id: a.id, result: { type: "allow_always" } });
    await server.waitFor((f) => f.type === "cancel" && f.id === b.id, "b withdrawn");
    const answered = new Set<string>();
    for (let i = 0; i < 2; i++) {
      const exec = (await server.waitFor(
        (f) => f.type === "tool.execute" && !answered.has(f.id),
        "a tool.execute",
      )) as { id: string };
      answered.add(exec.id);
      server.send({ type: "ok", id: exec.id, result: "deleted" });
    }
    expect(await server.waitFor(responseTo("go"))).toMatchObject({
      type: "ok",
      result: { status: "completed" },
    });
    expect(decided(server)).toEqual([
      { callId: "call_a", decision: "allow", source: { type: "reply", reply: "allow_always" } },
      {
        callId: "call_b",
        decision: "allow",
        source: { type: "spread", reply: "allow_always", by: a.request.requestId },
      },
    ]);
    // The client is never asked to run a call it is still asked to permit.
    const runB = (f: ServerFrame) => f.type === "tool.execute" && f.callId === "call_b";
    expect(at(server, withdrawalOf(b.id))).toBeLessThan(at(server, runB));
    expect(cancels(server).map((c) => c.id)).toEqual([b.id]);
    await stop(server);
  });

  it("allow_once decides only its own request: the other permission.request keeps waiting for its reply", async () => {
    const server = await start(twoDeletes());
    const { a, b } = await twoAsks(server);
    server.send({ type: "ok", id: a.id, result: { type: "allow_once" } });
    await server.waitFor(isEvent("permission.decided"));
    // The batch runs once every call is decided: b's request is still waiting, not withdrawn.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(cancels(server)).toEqual([]);
    expect(server.frames.some((f) => f.type === "tool.execute")).toBe(false);
    server.send({
      type: "ok",
      id: b.id,
      result: { type: "deny_with_feedback", feedback: "keep b" },
    });
    const exec = (await server.waitFor((f) => f.type === "tool.execute")) as { id: string };
    expect(exec).toMatchObject({ callId: "call_a" });
    server.send({ type: "ok", id: exec.id, result: "deleted a" });
    expect(await server.waitFor(responseTo("go"))).toMatchObject({
      type: "ok",
      result: { status: "completed" },
    });
    expect(cancels(server)).toEqual([]);
    expect(decided(server).map((d) => [d.callId, d.source])).toEqual([
      ["call_a", { type: "reply", reply: "allow_once" }],
      ["call_b", { type: "reply", reply: "deny_with_feedback" }],
    ]);
    await stop(server);
  });

  it("a permission.reply request decides every pending request: each permission.request is withdrawn", async () => {
    const server = await start(twoDeletes());
    const { a, b } = await twoAsks(server);
    const replied = await ask(server, {
      type: "permission.reply",
      id: "r",
      sessionId: "p",
      requestId: b.request.requestId,
      reply: { type: "deny" },
    });
    expect(replied).toEqual({ type: "ok", id: "r", result: {} });
    await server.waitFor(responseTo("go"));
    expect(
      cancels(server)
        .map((c) => c.id)
        .sort(),
    ).toEqual([a.id, b.id].sort());
    for (const [ask, call] of [
      [a, "call_a"],
      [b, "call_b"],
    ] as const) {
      expect(at(server, withdrawalOf(ask.id))).toBeLessThan(at(server, settledCall(call)));
    }
    expect(decided(server)).toEqual([
      {
        callId: "call_b",
        decision: "declined",
        source: { type: "reply", reply: "deny" },
      },
      {
        callId: "call_a",
        decision: "declined",
        source: { type: "spread", reply: "deny", by: b.request.requestId },
      },
    ]);
    await stop(server);
  });

  it("permissions.pending lists the requests from the log; the first permission.reply decides, a second is refused ALREADY_DECIDED", async () => {
    const server = await start(twoDeletes());
    const { a, b } = await twoAsks(server);
    const pending = (await ask(server, {
      type: "permissions.pending",
      id: "l",
      sessionId: "p",
    })) as {
      result: { requests: { requestId: string }[] };
    };
    expect(pending.result.requests.map((r) => r.requestId).sort()).toEqual(
      [a.request.requestId, b.request.requestId].sort(),
    );
    const reply = (id: string, requestId: string) =>
      ask(server, {
        type: "permission.reply",
        id,
        sessionId: "p",
        requestId,
        reply: { type: "deny" },
      });
    expect(await reply("r1", a.request.requestId)).toEqual({ type: "ok", id: "r1", result: {} });
    expect(await reply("r2", a.request.requestId)).toMatchObject({
      type: "error",
      id: "r2",
      refusal: "ALREADY_DECIDED",
    });
    await server.waitFor(responseTo("go"));
    const after = (await ask(server, {
      type: "permissions.pending",
      id: "l2",
      sessionId: "p",
    })) as {
      result: { requests: unknown[] };
    };
    expect(after.result.requests).toEqual([]);
    await stop(server);
  });

  it("an interrupt withdraws the permission.requests of the turn it cancels", async () => {
    const server = await start(twoDeletes());
    const { a, b } = await twoAsks(server);
    await ask(server, { type: "interrupt", id: "stop", sessionId: "p" });
    expect(await server.waitFor(responseTo("go"))).toMatchObject({
      result: { status: "cancelled" },
    });
    await server.waitFor(() => cancels(server).length === 2, "both withdrawn");
    expect(
      cancels(server)
        .map((c) => c.id)
        .sort(),
    ).toEqual([a.id, b.id].sort());
    expect(decided(server).map((d) => d.source)).toEqual([
      { type: "turn_ended" },
      { type: "turn_ended" },
    ]);
    await stop(server);
  });
});
