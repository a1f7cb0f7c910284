// `keel serve --stdio` as a real child process: the protocol's frames, requests, control
// requests and ends (docs/protocol.md), spoken raw or through keel/client.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { connect, KeelConnectionError } from "../client/index.ts";
import type { AgentEvent } from "../contracts/events.ts";
import type { ScriptStep } from "../providers/scripted-model.ts";
import {
  BIN,
  type RawServer,
  responseTo,
  spawnServer,
  weatherTool,
} from "./support/serve-child.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-serve-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let scripts = 0;

function script(steps: ScriptStep[]): string {
  const file = join(dir, `script-${++scripts}.json`);
  writeFileSync(file, JSON.stringify(steps));
  return file;
}

const scripted = (file: string) => [
  "--store",
  "memory",
  "--provider",
  "scripted",
  "--script",
  file,
];

async function hello(server: RawServer) {
  await server.waitFor((f) => f.type === "hello", "the server's hello");
  server.send({ type: "hello", protocol: "1.0" });
}

describe("keel serve --stdio: a session driven by keel/client", () => {
  it("runs a scripted turn whose tool the client executes; bad arguments never reach the client", async () => {
    const file = script([
      {
        toolCalls: [
          { id: "call_ok", name: "get_weather", arguments: '{"city":"Lisbon"}' },
          { id: "call_bad", name: "get_weather", arguments: '{"city":42}' },
        ],
      },
      { text: "Sunny in Lisbon." },
    ]);
    const client = await connect({ args: scripted(file) });
    const executed: unknown[] = [];
    const session = await client.openSession({
      tools: [
        {
          ...weatherTool,
          execute: (args) => {
            executed.push(args);
            return "sunny, 24 °C";
          },
        },
      ],
    });
    const events: AgentEvent[] = [];
    await session.subscribe((e) => events.push(e), ["call.settled", "turn.ended"]);
    const result = await session.prompt("Weather in Lisbon?");
    expect(result.status).toBe("completed");
    expect(executed).toEqual([{ city: "Lisbon" }]);
    const settled = events.filter((e) => e.type === "call.settled");
    expect(
      Object.fromEntries(settled.map((e) => [e.callId, e.result.ok ? e.result : e.result.code])),
    ).toEqual({ call_ok: { ok: true, content: "sunny, 24 °C" }, call_bad: "INVALID_ARGS" });
    // Write-ahead: the start record precedes the client's result in the log.
    const entries = await session.entries();
    const kinds = entries
      .filter((e) => e.callId === "call_ok")
      .map((e) => e.type)
      .filter((t) => t === "call_started" || t === "call_result");
    expect(kinds).toEqual(["call_started", "call_result"]);
    expect((await session.messages()).at(-1)).toMatchObject({
      role: "assistant",
      content: "Sunny in Lisbon.",
    });
    expect(await client.close()).toBe("the server closed the connection: stdin ended");
  });

  it("rejects every pending request at once with one terminal reason when the server is killed", async () => {
    const file = script([{ hang: true }]);
    const client = await connect({ args: scripted(file) });
    const a = await client.openSession();
    const b = await client.openSession();
    const pending = [a.prompt("one"), b.prompt("two")].map((p) => p.catch((e: unknown) => e));
    // Both prompts are in flight once their turns started.
    await new Promise((resolve) => setTimeout(resolve, 300));
    client.process!.kill("SIGKILL");
    const [ea, eb] = await Promise.all(pending);
    expect(ea).toBeInstanceOf(KeelConnectionError);
    expect((ea as KeelConnectionError).reason).toBe("the server was killed by SIGKILL");
    expect(eb).toBe(ea);
    await expect(a.messages()).rejects.toBe(ea);
    expect(await client.closed).toBe("the server was killed by SIGKILL");
  });
});

describe("keel serve --stdio: keel/client's permission handler and attach mode", () => {
  it("asks the session's onPermission handler: an allow runs the call, a deny stops the turn before it runs", async () => {
    const file = script([
      { toolCalls: [{ id: "call_lis", name: "get_weather", arguments: '{"city":"Lisbon"}' }] },
      { text: "Sunny in Lisbon." },
      { toolCalls: [{ id: "call_osl", name: "get_weather", arguments: '{"city":"Oslo"}' }] },
      { text: "never reached" },
    ]);
    const client = await connect({ args: scripted(file) });
    const asked: unknown[] = [];
    const executed: unknown[] = [];
    const session = await client.openSession({
      tools: [
        {
          ...weatherTool,
          traits: { risk: "high" },
          execute: (args) => {
            executed.push(args);
            return "sunny";
          },
        },
      ],
      permissions: {},
      onPermission: (request) => {
        asked.push(request);
        const { city } = request.args as { city: string };
        return city === "Lisbon" ? { type: "allow_once" } : { type: "deny" };
      },
    });
    const decided: AgentEvent[] = [];
    await session.subscribe((e) => decided.push(e), ["permission.decided"]);
    expect(await session.prompt("Lisbon?")).toMatchObject({ status: "completed" });
    expect(await session.prompt("Oslo?")).toMatchObject({ status: "cancelled" });
    expect(asked).toMatchObject([
      { callId: "call_lis", tool: "get_weather", args: { city: "Lisbon" }, risk: "high" },
      { callId: "call_osl", tool: "get_weather", args: { city: "Oslo" }, risk: "high" },
    ]);
    expect(executed).toEqual([{ city: "Lisbon" }]);
    expect(
      decided.map((e) => (e.type === "permission.decided" ? [e.callId, e.source] : e.type)),
    ).toEqual([
      ["call_lis", { type: "reply", reply: "allow_once" }],
      ["call_osl", { type: "reply", reply: "deny" }],
    ]);
    await client.close();
  });

  it("attaches to a server it did not spawn (streams) and ends it by closing its stdin", async () => {
    const file = script([
      { toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Rome"}' }] },
      { text: "Warm in Rome." },
    ]);
    const child = spawn(process.execPath, [BIN, "serve", "--stdio", ...scripted(file)], {
      env: { ...process.env, KEEL_LOG: "" },
      stdio: ["pipe", "pipe", "inherit"],
    });
    const exited = new Promise<[number | null, string | null]>((resolve) =>
      child.on("exit", (code, signal) => resolve([code, signal])),
    );
    const client = await connect({ streams: { input: child.stdout, output: child.stdin } });
    expect(client.process).toBeUndefined();
    expect(client.server).toMatchObject({ protocol: "1.0", server: { name: "keel" } });
    const session = await client.openSession({
      tools: [{ ...weatherTool, execute: () => "warm" }],
    });
    expect(await session.prompt("Rome?")).toMatchObject({ status: "completed" });
    expect((await session.messages()).at(-1)).toMatchObject({ content: "Warm in Rome." });
    expect(await client.close()).toBe("the server closed the connection: stdin ended");
    expect(await exited).toEqual([0, null]);
  });
});

describe("keel serve --stdio: frames", () => {
  it("refuses another major version with an error frame and serves a 1.x hello after it", async () => {
    const server = spawnServer([
      "--store",
      "memory",
      "--provider",
      "scripted",
      "--script",
      script([]),
    ]);
    const first = await server.waitFor((f) => f.type === "hello");
    expect(first).toMatchObject({ protocol: "1.0", limits: { maxFrameBytes: 8 * 1024 * 1024 } });
    server.send({ type: "sessions.list", id: "early" });
    expect(await server.waitFor(responseTo("early"))).toMatchObject({
      type: "error",
      code: "HELLO_REQUIRED",
    });
    server.send({ type: "hello", protocol: "2.0" });
    const refused = await server.waitFor(
      (f) => f.type === "error" && f.code === "UNSUPPORTED_VERSION",
    );
    expect(refused).toMatchObject({ message: expect.stringContaining("protocol 2.0") });
    server.send({ type: "hello", protocol: "1.7" });
    server.send({ type: "sessions.list", id: 1 });
    expect(await server.waitFor(responseTo(1))).toEqual({
      type: "ok",
      id: 1,
      result: { sessions: [] },
    });
    server.child.stdin.end();
    expect(await server.exited).toEqual({ code: 0, signal: null });
  });

  it("answers a garbage line, a 10 MiB line, invalid UTF-8 and bad requests with error frames and keeps serving", async () => {
    const server = spawnServer([
      "--store",
      "memory",
      "--provider",
      "scripted",
      "--script",
      script([]),
    ]);
    await hello(server);
    server.write("this is not json\n");
    server.write(`{"type":"sessions.list","id":"big","pad":"${"x".repeat(10 * 1024 * 1024)}"}\n`);
    server.write(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d, 0x0a])); // {"\xff\xfe"}
    server.send({ type: "teleport", id: "t1" });
    server.send({ type: "prompt", id: "p1", text: "no session id" });
    server.send({ type: "prompt", text: "no id" });
    server.send({ type: "sessions.list", id: "after" });
    expect(await server.waitFor(responseTo("after"))).toMatchObject({ type: "ok" });
    const errors = server.frames.filter((f) => f.type === "error");
    expect(errors.map((e) => [e.code, "id" in e ? e.id : undefined])).toEqual([
      ["INVALID_JSON", undefined],
      ["FRAME_TOO_LARGE", "big"], // its id is read from the head of the line
      ["INVALID_UTF8", undefined],
      ["UNKNOWN_TYPE", "t1"],
      ["INVALID_FRAME", "p1"],
      ["INVALID_FRAME", undefined],
    ]);
    expect(errors[4]?.message).toContain('"sessionId" must be a non-empty string');
    expect(server.junk).toEqual([]);
    // A last line without a newline: accepted when it is complete JSON.
    server.write('{"type":"sessions.list","id":"last"}');
    server.child.stdin.end();
    // Accepted and answered (lines read before the end are handled before the shutdown), not
    // reported as bad JSON.
    expect(await server.waitFor(responseTo("last"))).toMatchObject({ type: "ok" });
    expect(await server.exited).toEqual({ code: 0, signal: null });
  });

  it("reports an incomplete last line without a newline", async () => {
    const server = spawnServer([
      "--store",
      "memory",
      "--provider",
      "scripted",
      "--script",
      script([]),
    ]);
    await hello(server);
    server.write('{"type":"sessions.list","id":"cut"');
    server.child.stdin.end();
    await server.exited;
    expect(server.frames.find((f) => f.type === "error")).toMatchObject({
      code: "INVALID_JSON",
      message: expect.stringContaining("last line has no newline"),
    });
  });

  it("reads a frame split across writes at every byte boundary (and at random multi-cuts)", async () => {
    const server = spawnServer([
      "--store",
      "memory",
      "--provider",
      "scripted",
      "--script",
      script([]),
    ]);
    await hello(server);
    server.send({ type: "session.open", id: "open", sessionId: "ß" });
    await server.waitFor(responseTo("open"));
    const pause = () => new Promise((resolve) => setTimeout(resolve, 4));
    let n = 0;
    /** Writes one request in pieces cut at `cuts`, pausing between them; awaits its answer. */
    const roundTrip = async (cuts: number[]) => {
      const id = `é✓-${++n}`;
      const line = Buffer.from(`${JSON.stringify({ type: "messages", id, sessionId: "ß" })}\n`);
      const points = [
        0,
        ...[...new Set(cuts)].filter((c) => c > 0 && c < line.length).sort((a, b) => a - b),
        line.length,
      ];
      for (let i = 1; i < points.length; i++) {
        server.write(line.subarray(points[i - 1], points[i]));
        await pause();
      }
      expect(await server.waitFor(responseTo(id))).toEqual({
        type: "ok",
        id,
        result: { messages: [] },
      });
      return line.length;
    };
    const length = await roundTrip([]);
    for (let cut = 1; cut < length; cut++) await roundTrip([cut]);
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: length - 1 }), { minLength: 2, maxLength: 5 }),
        async (cuts) => {
          await roundTrip(cuts);
        },
      ),
      { numRuns: 25 },
    );
    expect(server.frames.filter((f) => f.type === "error")).toEqual([]);
    server.child.stdin.end();
    expect(await server.exited).toEqual({ code: 0, signal: null });
  });

  it("answers 200 pipelined requests with interleaved ids, each exactly once; a duplicate id in flight is refused", async () => {
    const file = script([
      { toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Oslo"}' }] },
      { text: "done" },
    ]);
    const server = spawnServer(scripted(file));
    await hello(server);
    const ids: (string | number)[] = [];
    let batch = "";
    for (let i = 0; i < 200; i++) {
      const id = i % 2 === 0 ? i : `r-${199 - i}`;
      ids.push(id);
      const session = `s${i % 4}`;
      const frame =
        i < 4
          ? { type: "session.open", id, sessionId: session, tools: [weatherTool] }
          : i % 5 === 0
            ? { type: "steer", id, sessionId: session, text: `steer ${i}` }
            : i % 5 === 1
              ? { type: "sessions.list", id }
              : { type: "entries", id, sessionId: session };
      batch += `${JSON.stringify(frame)}\n`;
    }
    // A prompt whose turn waits on a tool the test never answers: its id stays in flight.
    batch += `${JSON.stringify({ type: "prompt", id: "dup", sessionId: "s0", text: "go" })}\n`;
    server.write(batch);
    await server.waitFor((f) => f.type === "tool.execute");
    server.send({ type: "messages", id: "dup", sessionId: "s0" });
    for (const id of ids) await server.waitFor(responseTo(id), `the response to ${id}`);
    // Refused by `ref`: the prompt in flight under "dup" keeps the only response with that id.
    const dup = await server.waitFor((f) => f.type === "error" && f.ref === "dup");
    expect(dup).toMatchObject({ type: "error", code: "DUPLICATE_ID" });
    const responses = server.frames.filter((f) => f.type === "ok" || f.type === "error");
    const counted = new Map<string, number>();
    for (const r of responses) {
      const key = JSON.stringify((r as { id: unknown }).id);
      counted.set(key, (counted.get(key) ?? 0) + 1);
    }
    for (const id of ids) expect(counted.get(JSON.stringify(id))).toBe(1);
    expect(
      responses.filter((r) => r.type === "error").map((r) => (r as { id: unknown }).id),
    ).toEqual([undefined]);
    server.child.kill("SIGTERM");
    expect(await server.exited).toEqual({ code: 0, signal: null });
    // SIGTERM fails the prompt still in flight with the terminal reason, then says goodbye.
    expect(server.frames.filter(responseTo("dup")).at(-1)).toMatchObject({
      type: "error",
      code: "SHUTTING_DOWN",
      message: expect.stringContaining("SIGTERM received"),
    });
    expect(server.frames.at(-1)).toEqual({ type: "goodbye", reason: "SIGTERM received" });
  });
});

describe("keel serve --stdio: permission requests", () => {
  const gated = () =>
    script([
      { toolCalls: [{ id: "call_w", name: "get_weather", arguments: '{"city":"Rome"}' }] },
      { text: "It is warm in Rome." },
    ]);
  const open = (server: RawServer, timeoutMs: number) => {
    server.send({
      type: "session.open",
      id: "open",
      sessionId: "p",
      tools: [{ ...weatherTool, traits: { risk: "high" } }],
      permissions: { timeoutMs },
    });
    server.send({
      type: "subscribe",
      id: "sub",
      sessionId: "p",
      events: ["permission.decided", "call.settled"],
    });
    server.send({ type: "prompt", id: "go", sessionId: "p", text: "Rome?" });
  };

  it("runs the call when the client allows it", async () => {
    const server = spawnServer(scripted(gated()));
    await hello(server);
    open(server, 60_000);
    const ask = await server.waitFor((f) => f.type === "permission.request");
    expect(ask).toMatchObject({
      sessionId: "p",
      request: { tool: "get_weather", args: { city: "Rome" }, risk: "high" },
    });
    server.send({ type: "ok", id: (ask as { id: string }).id, result: { type: "allow_once" } });
    const exec = await server.waitFor((f) => f.type === "tool.execute");
    server.send({ type: "ok", id: (exec as { id: string }).id, result: "warm" });
    expect(await server.waitFor(responseTo("go"))).toMatchObject({
      type: "ok",
      result: { status: "completed" },
    });
    server.child.stdin.end();
    await server.exited;
  });

  it("denies when no reply comes in time, and ignores a reply after the timeout (one decision)", async () => {
    const server = spawnServer(scripted(gated()));
    await hello(server);
    open(server, 300);
    const ask = (await server.waitFor((f) => f.type === "permission.request")) as { id: string };
    expect(await server.waitFor(responseTo("go"))).toMatchObject({
      type: "ok",
      result: { status: "cancelled" },
    });
    expect(server.frames).toContainEqual({
      type: "cancel",
      id: ask.id,
      reason: "timed out after 300 ms",
    });
    server.send({ type: "ok", id: ask.id, result: { type: "allow_once" } });
    const late = await server.waitFor((f) => f.type === "error" && "ref" in f && f.ref === ask.id);
    expect(late).toMatchObject({ code: "LATE_REPLY" });
    server.send({ type: "entries", id: "log", sessionId: "p" });
    await server.waitFor(responseTo("log"));
    const decided = server.frames.filter(
      (f) => f.type === "event" && f.event.type === "permission.decided",
    );
    expect(decided).toHaveLength(1);
    expect(decided[0]).toMatchObject({ event: { decision: { type: "declined" } } });
    expect(server.frames.some((f) => f.type === "tool.execute")).toBe(false);
    server.child.stdin.end();
    await server.exited;
  });
});

describe("keel serve --stdio: ends", () => {
  it("exits 0 on its own when the reader of its stdout goes away (keel serve | head -1)", async () => {
    const out = join(dir, `head-${Date.now()}`);
    const serve = [process.execPath, BIN, "serve", "--stdio", ...scripted(script([]))]
      .map((a) => `'${a}'`)
      .join(" ");
    // stdin stays open: only the closed pipe can end the server.
    const shell = spawn(
      "bash",
      [
        "-c",
        `${serve} 2>'${out}.err' | head -1 > '${out}.head'; echo "\${PIPESTATUS[0]}" > '${out}.status'`,
      ],
      { stdio: ["pipe", "ignore", "inherit"], env: { ...process.env, KEEL_LOG: "" } },
    );
    shell.stdin.on("error", () => {});
    shell.stdin.write('{"type":"hello","protocol":"1.0"}\n');
    const timer = setInterval(() => shell.stdin.write('{"type":"sessions.list","id":1}\n'), 50);
    await new Promise((resolve) => shell.on("exit", resolve));
    clearInterval(timer);
    expect(JSON.parse(readFileSync(`${out}.head`, "utf8"))).toMatchObject({ type: "hello" });
    expect(readFileSync(`${out}.status`, "utf8").trim()).toBe("0");
    expect(readFileSync(`${out}.err`, "utf8")).toBe("");
  });
});
