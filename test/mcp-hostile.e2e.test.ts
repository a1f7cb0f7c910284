// Issue 41, "MCP as documented": a hostile MCP server written by hand over stdio
// (test/support/mcp-raw-server.ts) sends what the SDK's own server never would. Each test names
// the finding it covers; each failed on the code before the fix.
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { ToolResult } from "../contracts/tool-result.ts";
import { patternRunner } from "../tools/builtin/pattern-runner.ts";
import { describeServer, serverName } from "../tools/mcp/mcp-server.ts";
import {
  McpConnectError,
  type McpToolSet,
  type McpToolsOptions,
  mcpTools,
} from "../tools/mcp/mcp-tools.ts";
import type { ToolContext } from "../tools/types.ts";

const RAW = join(import.meta.dirname, "support", "mcp-raw-server.ts");
const opened: McpToolSet[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
});
afterAll(() => patternRunner.close());

async function rawServer(options: McpToolsOptions = {}, env: Record<string, string> = {}) {
  const problems: string[] = [];
  const set = await mcpTools(
    { command: process.execPath, args: ["--import", "tsx", RAW], env },
    { name: "raw", onProblem: (m) => problems.push(m), ...options },
  );
  opened.push(set);
  return { set, problems };
}

const ctx = (signal = new AbortController().signal) =>
  ({
    callId: "c",
    signal,
    idempotencyKey: "k",
    onUpdate: () => {},
    log: { debug() {}, info() {}, warn() {}, error() {} },
  }) as unknown as ToolContext;

async function run(set: McpToolSet, name: string, args: unknown = {}): Promise<ToolResult> {
  const tool = set.tools().find((t) => t.name === name);
  if (!tool) throw new Error(`no tool ${name} in ${set.tools().map((t) => t.name)}`);
  return (await tool.execute(args as never, ctx())) as ToolResult;
}

/** The longest event-loop stall (ms) while `work` runs. */
async function longestStall<T>(work: () => Promise<T>): Promise<{ result: T; stallMs: number }> {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  await new Promise((r) => setTimeout(r, 30));
  try {
    const result = await work();
    await new Promise((r) => setTimeout(r, 20));
    return { result, stallMs: h.max / 1e6 };
  } finally {
    h.disable();
  }
}

describe("a hostile MCP server (issue 41)", { timeout: 60_000 }, () => {
  it("a JSON-RPC error -32000 is the call's error result with the server's message, and the server stays up", async () => {
    const { set, problems } = await rawServer();
    const result = await run(set, "fail32000");
    expect(result).toMatchObject({ ok: false, code: "EXECUTION_FAILED" });
    expect(result.ok || result.message).toContain("database is locked: try again later");
    expect(result.ok || result.message).not.toMatch(/lost|unknown/);
    expect(set.status).toBe("up");
    expect(await run(set, "echo", { text: "still here" })).toMatchObject({ ok: true });
    expect(problems.filter((p) => p.includes("was lost"))).toEqual([]);
  });

  it("a malformed result is the call's error result saying what arrived, and the server stays up", async () => {
    const { set } = await rawServer();
    const result = await run(set, "malformed");
    expect(result).toMatchObject({ ok: false, code: "EXECUTION_FAILED" });
    expect(result.ok || result.message).toMatch(/not a tool result.*"content" is a string/);
    expect(set.status).toBe("up");
    expect(await run(set, "echo", { text: "x" })).toMatchObject({ ok: true });
  });

  it("a non-object inputSchema or an outputSchema that cannot compile leaves that tool out, not the server", async () => {
    const { set, problems } = await rawServer();
    const names = set.tools().map((t) => t.name);
    expect(names).toContain("echo");
    expect(names).not.toContain("not_object");
    expect(names).not.toContain("bad_output");
    expect(problems.join("\n")).toMatch(
      /tool "not_object" is left out: "inputSchema" must describe an object/,
    );
    expect(problems.join("\n")).toMatch(
      /tool "bad_output" is left out: its outputSchema cannot be used/,
    );
  });

  it("names that collide once sanitised get a suffix and an onProblem line, and each reaches its own tool", async () => {
    const { set, problems } = await rawServer();
    const names = set.tools().map((t) => t.name);
    expect(names).toContain("dup_name");
    expect(names).toContain("dup_name_2");
    expect(problems).toContain(
      'MCP server "raw": tool "dup_name" is offered as "dup_name_2": "dup_name" is the name of another of its tools once sanitised',
    );
    expect(await run(set, "dup_name")).toMatchObject({ ok: true, content: "dup.name: {}" });
    expect(await run(set, "dup_name_2")).toMatchObject({ ok: true, content: "dup_name: {}" });
  });

  it("a server listing 10 000 tools has only maxTools offered (default 128), with one warning", async () => {
    const { set, problems } = await rawServer({}, { RAW_MANY: "10000" });
    expect(set.tools()).toHaveLength(128);
    expect(problems.filter((p) => p.includes("maxTools"))).toEqual([
      'MCP server "raw" lists more tools than the 128 offered (option maxTools): 9880 are left out',
    ]);
    const few = await rawServer({ maxTools: 3 });
    expect(few.set.tools()).toHaveLength(3);
  });

  it("progress keeps a call alive only up to maxCallMs", async () => {
    const { set } = await rawServer({ callTimeoutMs: 300, maxCallMs: 1000 });
    const started = performance.now();
    const result = await run(set, "progress_forever");
    const took = performance.now() - started;
    expect(result).toMatchObject({ ok: false, code: "TIMEOUT" });
    expect(took).toBeGreaterThan(900);
    expect(took).toBeLessThan(5000);
  });

  it("callTimeoutMs: Infinity waits (clamped to 2^31 − 1 ms) instead of timing every call out at once", async () => {
    const { set } = await rawServer({ callTimeoutMs: Number.POSITIVE_INFINITY });
    expect(await run(set, "echo", { text: "x" })).toMatchObject({ ok: true });
  });

  it("a duration option out of range is refused naming it; a finite one over 2^31 − 1 is clamped with a warning", async () => {
    await expect(mcpTools({ command: "true" }, { connectTimeoutMs: -1 })).rejects.toThrow(
      /mcpTools: `connectTimeoutMs` must be a number of milliseconds/,
    );
    await expect(mcpTools({ command: "true" }, { callTimeoutMs: Number.NaN })).rejects.toThrow(
      RangeError,
    );
    const { set, problems } = await rawServer({ callTimeoutMs: 1e10 });
    expect(problems.join("\n")).toContain(
      "mcpTools: `callTimeoutMs` of 10000000000 ms is over 2147483647 ms",
    );
    expect(await run(set, "echo", { text: "x" })).toMatchObject({ ok: true });
  });

  it("a catastrophic pattern in an inputSchema is matched in the worker: the call is refused, not sent, and the loop never stalls over 100 ms", async () => {
    const { set } = await rawServer();
    expect(await run(set, "pattern_in", { s: "aaa" })).toMatchObject({ ok: true });
    const bad = await run(set, "pattern_in", { s: "aab" });
    expect(bad).toMatchObject({ ok: false, code: "INVALID_ARGS" });
    expect(bad.ok || bad.message).toContain('s: "aab" does not match the pattern "^(a+)+$"');
    const { result, stallMs } = await longestStall(() =>
      run(set, "pattern_in", { s: `${"a".repeat(30)}b` }),
    );
    expect(result).toMatchObject({ ok: false, code: "INVALID_ARGS" });
    expect(result.ok || result.message).toMatch(/backtracks catastrophically/);
    expect(stallMs).toBeLessThan(100);
    // The model still sees the pattern in the tool's schema.
    const tool = set.tools().find((t) => t.name === "pattern_in")!;
    expect(tool.jsonSchema).toMatchObject({ properties: { s: { pattern: "^(a+)+$" } } });
  });

  it("a catastrophic pattern in an outputSchema (9.3 s frozen before) fails the call and the loop never stalls over 100 ms", async () => {
    const { set } = await rawServer();
    const { result, stallMs } = await longestStall(() => run(set, "pattern_out"));
    expect(result).toMatchObject({ ok: false, code: "EXECUTION_FAILED" });
    expect(result.ok || result.message).toMatch(/does not match its outputSchema.*backtracks/);
    expect(stallMs).toBeLessThan(100);
    expect(set.status).toBe("up");
  });

  it("connect errors do not print a URL's credentials or query string", async () => {
    const url = "http://user:hunter2@127.0.0.1:9/mcp?api_key=SECRET123#frag";
    const err = await mcpTools({ url }, { connectTimeoutMs: 2000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(McpConnectError);
    const message = (err as Error).message;
    expect(message).toContain("http://127.0.0.1:9/mcp?…");
    expect(message).not.toMatch(/hunter2|SECRET123|frag/);
    expect(describeServer({ url })).toBe("http://127.0.0.1:9/mcp?…");
  });

  it("servers started with npx or uvx are named after their package", () => {
    expect(
      serverName({
        command: "npx",
        args: ["-y", "@modelcontextprotocol/server-filesystem@1.2", "."],
      }),
    ).toBe("server-filesystem");
    expect(serverName({ command: "/usr/bin/uvx", args: ["mcp-server-fetch"] })).toBe(
      "mcp-server-fetch",
    );
    expect(serverName({ command: "uvx", args: ["--from", "git+https://x/y", "tool-cmd"] })).toBe(
      "tool-cmd",
    );
    expect(serverName({ command: "npx", args: ["-y"] })).toBe("npx");
    expect(serverName({ command: "/opt/bin/my-server" })).toBe("my-server");
  });
});
