import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";
import { traitsFromAnnotations } from "../tools/mcp/annotations.ts";
import { type McpToolSet, mcpTools } from "../tools/mcp/mcp-tools.ts";
import { createRegistry } from "../tools/registry.ts";
import { createToolSet } from "../tools/tool-set.ts";

// Real MCP servers written with the same SDK (test/support/mcp-server.ts): a stdio child, and
// an HTTP server on loopback in a child process (so a crash is a real process exit).

const SERVER = join(import.meta.dirname, "support", "mcp-server.ts");
const TSX = ["--import", "tsx"];
const opened: McpToolSet[] = [];
const children: ChildProcess[] = [];

afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
  for (const c of children.splice(0)) c.kill("SIGKILL");
});

function eventsFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), "keel-mcp-")), "events.jsonl");
  writeFileSync(file, "");
  return file;
}
const eventsIn = (file: string) =>
  readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

async function stdioServer(env: Record<string, string> = {}, problems: string[] = []) {
  const set = await mcpTools(
    { command: process.execPath, args: [...TSX, SERVER, "stdio"], env },
    { name: "test", onProblem: (m) => problems.push(m) },
  );
  opened.push(set);
  return set;
}

/** Starts the HTTP server in a child; resolves to its URL once it listens. */
async function httpServer(
  env: Record<string, string> = {},
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [...TSX, SERVER, "http"], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once("data", (d) => resolve(JSON.parse(String(d)).port));
    child.once("exit", (code) => reject(new Error(`the HTTP MCP server exited (${code})`)));
  });
  return { url: `http://127.0.0.1:${port}/mcp`, child };
}

/** These tests call the servers' high-risk tools: an agent without permissions would refuse them. */
const ALLOW_HIGH = { defaults: { high: "allow" } } as const;

const resultsOf = (entries: readonly LogEntry[]) =>
  entries.filter((e) => e.type === "call_result") as Extract<LogEntry, { type: "call_result" }>[];

describe("an MCP server's tools (stdio)", { timeout: 60_000 }, () => {
  it("are listed with their schemas, and their annotations become traits conservatively", async () => {
    const set = await stdioServer();
    const byName = new Map(set.tools().map((t) => [t.name, t]));
    expect([...byName.keys()]).toEqual([
      "echo",
      "tag",
      "slow",
      "crash",
      "crash_idempotent",
      "grow",
      "picture",
    ]);
    expect(byName.get("echo")!.resolvedTraits).toMatchObject({
      readOnly: true,
      concurrencySafe: true,
      idempotent: true,
      risk: "low",
    });
    // destructiveHint false but open-world (no openWorldHint: MCP's default): high, as with no
    // hints at all (the riskiest reading); only closed-world and non-destructive is medium.
    expect(byName.get("tag")!.resolvedTraits).toMatchObject({ readOnly: false, risk: "high" });
    expect(traitsFromAnnotations({ destructiveHint: false, openWorldHint: false }).risk).toBe(
      "medium",
    );
    expect(traitsFromAnnotations({ destructiveHint: false, openWorldHint: true }).risk).toBe(
      "high",
    );
    expect(byName.get("slow")!.resolvedTraits).toMatchObject({
      readOnly: false,
      concurrencySafe: false,
      idempotent: false,
      risk: "high",
    });
    expect(byName.get("crash_idempotent")!.resolvedTraits.idempotent).toBe(true);
    // read-only but not declared closed-world: it may reach outside, so not low.
    expect(byName.get("picture")!.resolvedTraits.risk).toBe("medium");
    expect(byName.get("echo")!.jsonSchema).toMatchObject({
      type: "object",
      properties: { text: { type: "string" } },
      required: ["text"],
    });
  });

  it("a session calls them: the model's call reaches the server and its result the model", async () => {
    const set = await stdioServer();
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"hi"}' }] },
      { text: "done" },
    ]);
    const session = createAgent({ model, tools: [set], permissions: ALLOW_HIGH }).session();
    const out = await session.prompt("echo hi");
    expect(out.status).toBe("completed");
    expect(resultsOf(session.entries())[0].result).toEqual({ ok: true, content: "echo: hi" });
    expect(model.requests[0].tools?.map((t) => t.function.name)).toContain("echo");
  });

  it("arguments are repaired and validated as for every tool: a JSON string for an array is read as one", async () => {
    const events = eventsFile();
    const set = await stdioServer({ MCP_EVENTS: events });
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "tag", arguments: '{"tags":"[\\"a\\",\\"b\\"]"}' }] },
      { toolCalls: [{ id: "c2", name: "tag", arguments: '{"tags":5}' }] },
      { text: "done" },
    ]);
    const session = createAgent({ model, tools: [set], permissions: ALLOW_HIGH }).session();
    await session.prompt("tag");
    const [first, second] = resultsOf(session.entries());
    expect(first.result.ok).toBe(true);
    expect(eventsIn(events).filter((e) => e.event === "call")).toEqual([
      { event: "call", tool: "tag", args: { tags: ["a", "b"] } },
    ]);
    expect(second.result).toMatchObject({ ok: false, code: "INVALID_ARGS" });
  });

  it("a cancel sends notifications/cancelled, and progress notifications become call.updated", async () => {
    const events = eventsFile();
    const set = await stdioServer({ MCP_EVENTS: events });
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "slow", arguments: '{"steps":50}' }] },
      { text: "unreached" },
    ]);
    const session = createAgent({
      model,
      tools: [set],
      stopDeadlineMs: 2000,
      permissions: ALLOW_HIGH,
    }).session();
    const updates: unknown[] = [];
    session.subscribe((e: AgentEvent) => {
      if (e.type !== "call.updated") return;
      updates.push(e.progress);
      if (updates.length === 2) void session.interrupt("stop");
    });
    const out = await session.prompt("work");
    expect(out.status).toBe("cancelled");
    expect(updates.slice(0, 2)).toEqual([
      { progress: 1, total: 50, message: "step 1" },
      { progress: 2, total: 50, message: "step 2" },
    ]);
    // The server saw the cancel: its handler's signal was aborted by notifications/cancelled.
    await expect
      .poll(() => eventsIn(events).some((e) => e.event === "cancelled"), { timeout: 5000 })
      .toBe(true);
    const [result] = resultsOf(session.entries());
    // Not read-only: MCP does not confirm a stop, so whether it acted is unknown.
    expect(result.result).toMatchObject({ ok: false, code: "OUTCOME_UNKNOWN" });
    expect(eventsIn(events).filter((e) => e.event === "progress").length).toBeLessThan(50);
  });

  it("structured content and images are kept beside the text the model reads", async () => {
    const set = await stdioServer();
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "picture", arguments: "{}" }] },
      { text: "done" },
    ]);
    const session = createAgent({ model, tools: [set], permissions: ALLOW_HIGH }).session();
    await session.prompt("draw");
    const [{ result }] = resultsOf(session.entries());
    expect(result).toMatchObject({
      ok: true,
      structured: { width: 1, height: 1 },
      images: [{ mediaType: "image/png" }],
    });
    expect(result.ok && result.content).toMatch(/^a 1×1 picture\n\[image image\/png, \d+ bytes/);
    expect(result.ok && result.images![0].base64.startsWith("iVBOR")).toBe(true);
  });

  it("a server crash mid-call ends the call unknown, is reported once, and the server is reconnected on the next turn", async () => {
    const problems: string[] = [];
    const events = eventsFile();
    const set = await stdioServer({ MCP_EVENTS: events }, problems);
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "crash", arguments: "{}" }] },
      {
        toolCalls: [
          { id: "c2", name: "echo", arguments: '{"text":"a"}' },
          { id: "c3", name: "echo", arguments: '{"text":"b"}' },
        ],
      },
      { text: "the server is down" },
      { toolCalls: [{ id: "c4", name: "echo", arguments: '{"text":"back"}' }] },
      { text: "done" },
    ]);
    const session = createAgent({ model, tools: [set], permissions: ALLOW_HIGH }).session();
    await session.prompt("crash it");
    const [crashed, a, b] = resultsOf(session.entries());
    expect(crashed.result).toMatchObject({ ok: false, code: "OUTCOME_UNKNOWN" });
    expect(crashed.result.ok === false && crashed.result.message).toContain(
      "whether crash ran is unknown",
    );
    // Calls while it is down fail at once, not sent, and the loss was reported once, not per call.
    for (const r of [a, b]) {
      expect(r.result).toMatchObject({ ok: false, retryable: true });
      expect(r.result.ok === false && r.result.message).toContain("not sent");
    }
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain('MCP server "test" was lost');
    expect(set.status).toBe("down");

    // The next turn's start refreshes the set (the session's call: see docs/tools.md): reconnected.
    await set.refresh();
    expect(set.status).toBe("up");
    await session.prompt("again");
    expect(resultsOf(session.entries())[3].result).toEqual({ ok: true, content: "echo: back" });
    expect(problems).toHaveLength(1);
  });

  it("a crash mid-call of an idempotent tool says calling it again is safe, not unknown", async () => {
    const set = await stdioServer();
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "crash_idempotent", arguments: "{}" }] },
      { text: "done" },
    ]);
    const session = createAgent({ model, tools: [set], permissions: ALLOW_HIGH }).session();
    await session.prompt("crash it");
    const [r] = resultsOf(session.entries());
    expect(r.result).toMatchObject({ ok: false, code: "EXECUTION_FAILED", retryable: true });
    expect(r.result.ok === false && r.result.message).toContain("calling it again is safe");
  });
});

describe("a list change", { timeout: 60_000 }, () => {
  it("lands between turns, never mid-batch: the turn keeps the set it started with", async () => {
    const set = await stdioServer();
    const tools = createToolSet({ base: createRegistry(), sources: [set] });
    const before = tools.modelTools();
    const grow = tools.get("grow")!;
    await grow.execute({}, ctx());
    // The server said its list changed: nothing changes until the set is refreshed.
    await new Promise((r) => setTimeout(r, 200));
    expect(tools.modelTools()).toBe(before);
    expect(tools.get("late")).toBeUndefined();
    const seen = tools.snapshot();
    await tools.refresh();
    expect(tools.get("late")).toBeDefined();
    expect(tools.snapshot().tools).toContain("late");
    expect(tools.snapshot().version).toBeGreaterThan(seen.version);
    expect(seen.tools).not.toContain("late");
  });
});

describe("a hostile MCP server", { timeout: 60_000 }, () => {
  it("cannot take a built-in's name or an alias, its bad schema is left out and said once, and a huge result is cut to the budget", async () => {
    const problems: string[] = [];
    const set = await stdioServer({ MCP_HOSTILE: "1" }, problems);
    expect(set.tools().map((t) => t.name)).not.toContain("bad_schema");
    expect(problems.join("\n")).toContain('tool "bad_schema" is left out');
    expect(problems.join("\n")).toContain("Unsupported type: frobnicate");

    const readFile = defineTool({
      name: "read_file",
      description: "The real one.",
      parameters: z.object({ path: z.string() }),
      execute: () => "the real read_file",
    });
    const shell = defineTool({
      name: "shell",
      description: "The real shell.",
      parameters: z.object({ command: z.string() }),
      execute: () => "the real shell",
    });
    const warnings: string[] = [];
    const tools = createToolSet({
      base: createRegistry([readFile, shell]),
      sources: [set],
      onWarning: (w) => warnings.push(w),
    });
    expect(tools.get("read_file")).toBe(readFile);
    expect(tools.resolve("Bash")).toMatchObject({ ok: true, tool: shell, via: "alias" });
    expect(tools.names()).toContain("test_read_file");
    expect(tools.names()).toContain("test_Bash");
    expect(warnings).toEqual([
      'tool "read_file" of "test" is offered as "test_read_file": its name is taken (or is an alias of a built-in tool)',
      'tool "Bash" of "test" is offered as "test_Bash": its name is taken (or is an alias of a built-in tool)',
    ]);

    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "huge", arguments: '{"bytes":3000000}' }] },
      { text: "done" },
    ]);
    const session = createAgent({ model, tools: [set], permissions: ALLOW_HIGH }).session();
    await session.prompt("huge");
    const [{ result }] = resultsOf(session.entries());
    expect(result).toMatchObject({ ok: true, truncated: true });
    expect(result.ok && result.content.length).toBeLessThanOrEqual(32 * 1024);
  });
});

describe("an MCP server over Streamable HTTP", { timeout: 60_000 }, () => {
  it("is reached with auth headers: list, call, progress and cancel", async () => {
    const events = eventsFile();
    const { url } = await httpServer({ MCP_TOKEN: "s3cret", MCP_EVENTS: events });
    await expect(mcpTools({ url })).rejects.toThrow(/could not connect to MCP server/);
    const set = await mcpTools(
      { url, headers: { Authorization: "Bearer s3cret" } },
      { name: "web" },
    );
    opened.push(set);
    expect(set.tools().map((t) => t.name)).toContain("slow");
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"over http"}' }] },
      { toolCalls: [{ id: "c2", name: "slow", arguments: '{"steps":50}' }] },
      { text: "unreached" },
    ]);
    const session = createAgent({
      model,
      tools: [set],
      stopDeadlineMs: 2000,
      permissions: ALLOW_HIGH,
    }).session();
    const updates: unknown[] = [];
    session.subscribe((e: AgentEvent) => {
      if (e.type !== "call.updated") return;
      updates.push(e.progress);
      if (updates.length === 2) void session.interrupt("stop");
    });
    const out = await session.prompt("go");
    expect(out.status).toBe("cancelled");
    const [echo, slow] = resultsOf(session.entries());
    expect(echo.result).toEqual({ ok: true, content: "echo: over http" });
    expect(updates[0]).toEqual({ progress: 1, total: 50, message: "step 1" });
    expect(slow.result).toMatchObject({ ok: false, code: "OUTCOME_UNKNOWN" });
    await expect
      .poll(() => eventsIn(events).some((e) => e.event === "cancelled"), { timeout: 5000 })
      .toBe(true);
  });

  it("a server that dies mid-call is reported once and reconnected at the next refresh", async () => {
    const probe = await httpServer();
    const port = new URL(probe.url).port;
    probe.child.kill("SIGKILL");
    const { url } = await httpServer({ MCP_PORT: port });
    const problems: string[] = [];
    const set = await mcpTools(
      { url },
      { name: "web", onProblem: (m) => problems.push(m), callTimeoutMs: 60_000 },
    );
    opened.push(set);
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "crash", arguments: "{}" }] },
      { toolCalls: [{ id: "c2", name: "echo", arguments: '{"text":"a"}' }] },
      { text: "down" },
    ]);
    const session = createAgent({ model, tools: [set], permissions: ALLOW_HIGH }).session();
    await session.prompt("crash");
    const [crashed, echo] = resultsOf(session.entries());
    // The broken stream made Keel ask the server (a ping): no answer, so it is lost and the
    // call cut by it ends unknown, well before the call's own timeout.
    expect(crashed.result).toMatchObject({ ok: false, code: "OUTCOME_UNKNOWN" });
    expect(echo.result).toMatchObject({ ok: false, retryable: true });
    expect(echo.result.ok === false && echo.result.message).toContain("not sent");
    expect(problems).toHaveLength(1);
    expect(set.status).toBe("down");

    await httpServer({ MCP_PORT: port });
    await set.refresh();
    expect(set.status).toBe("up");
    const r = await set
      .tools()
      .find((t) => t.name === "echo")!
      .execute({ text: "back" }, ctx());
    expect(r).toEqual({ ok: true, content: "echo: back" });
  });
});

function ctx() {
  return {
    callId: "x",
    sessionId: "s",
    signal: new AbortController().signal,
    idempotencyKey: "k",
    onUpdate: () => {},
    log: undefined as never,
  };
}

describe("a session's tool set", () => {
  const tool = (name: string) =>
    defineTool({
      name,
      description: `Tool ${name}.`,
      parameters: z.object({}),
      execute: () => name,
    });

  it("agent.session(id, { tools }) adds to the agent's tools, or narrows them, for that session only", async () => {
    const model = scriptedModel([{ text: "a" }, { text: "b" }, { text: "c" }, { text: "d" }]);
    const agent = createAgent({
      model,
      tools: [tool("alpha"), tool("beta"), tool("gamma")],
      context: { readResultTool: true },
    });
    const offered = () => model.requests.at(-1)!.tools!.map((t) => t.function.name);
    await agent.session("plain").prompt("x");
    expect(offered()).toEqual(["alpha", "beta", "gamma", "read_result"]);
    await agent.session("more", { tools: [tool("delta")] }).prompt("x");
    expect(offered()).toEqual(["delta", "alpha", "beta", "gamma", "read_result"]);
    // Narrowed: only alpha of the agent's, and read_result (which cleared results need) stays.
    await agent.session("less", { tools: { only: ["alpha"] } }).prompt("x");
    expect(offered()).toEqual(["alpha", "read_result"]);
    await agent
      .session("fewer", { tools: { exclude: ["beta"], add: [tool("omega")] } })
      .prompt("x");
    expect(offered()).toEqual(["omega", "alpha", "gamma", "read_result"]);
    expect(agent.registry.names()).toEqual(["alpha", "beta", "gamma", "read_result"]);
  });

  it("a narrowed session cannot call a tool it was not given", async () => {
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "beta", arguments: "{}" }] },
      { text: "done" },
    ]);
    const agent = createAgent({ model, tools: [tool("alpha"), tool("beta")] });
    const session = agent.session("s", { tools: { only: ["alpha"] } });
    await session.prompt("x");
    expect(resultsOf(session.entries())[0].result).toMatchObject({
      ok: false,
      code: "UNKNOWN_TOOL",
    });
  });

  it("bad options are refused naming the option", () => {
    const agent = createAgent({ model: scriptedModel([]), tools: [tool("alpha")] });
    expect(() => agent.session("s", { tools: { only: "alpha" as never } })).toThrow(
      /tools.only must be an array of tool names/,
    );
  });
});
