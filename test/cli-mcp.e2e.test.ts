import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { splitCommand } from "../cli/mcp.ts";
import { mcpServersFromConfig } from "../tools/mcp/mcp-server.ts";
import {
  type FakeOpenAIServer,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";
import { runKeel } from "./support/run-keel.ts";

const SERVER = join(import.meta.dirname, "support", "mcp-server.ts");
// The runs' working folders are temporary: tsx is named by its file URL, not found from there.
const TSX = import.meta.resolve("tsx");
const children: ChildProcess[] = [];

/** The parent's provider variables: a run sees the fake server's, which each test sets. */
const UNSET = ["OPENAI_API_KEY", "OPENAI_BASE_URL", "KEEL_PROVIDER", "KEEL_MODEL"];

const keel = (args: string[], cwd: string, env: Record<string, string>) =>
  runKeel(args, { cwd, env, unset: UNSET });

let fake: FakeOpenAIServer;
beforeEach(async () => {
  fake = await startFakeOpenAIServer();
});
afterEach(async () => {
  await fake.close();
  for (const c of children.splice(0)) c.kill("SIGKILL");
});

const env = () => ({
  OPENAI_BASE_URL: fake.baseURL,
  KEEL_MODEL: "fake-model",
  KEEL_CONTEXT_WINDOW: "32768",
});
const settled = (stdout: string) =>
  stdout
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((e) => e.type === "call.settled");

describe("keel run with MCP servers", { timeout: 90_000 }, () => {
  it("--mcp starts a stdio server; its tools are offered and called, a high-risk one is asked about", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "keel-cli-mcp-"));
    fake.enqueue(
      streamReply({
        calls: [
          { id: "c1", name: "echo", args: '{"text":"from the cli"}' },
          { id: "c2", name: "crash", args: "{}" },
        ],
      }),
      streamReply({ text: "done" }),
    );
    const command = `"${process.execPath}" --import ${TSX} "${SERVER}" stdio`;
    const run = await keel(["run", "--json", "--mcp", command, "echo it"], cwd, env());
    expect(run.code).toBe(0);
    const tools = (fake.requests[0].body.tools as { function: { name: string } }[]).map(
      (t) => t.function.name,
    );
    expect(tools).toEqual(
      expect.arrayContaining(["read_file", "shell", "echo", "slow", "picture"]),
    );
    const [echo, crash] = settled(run.stdout);
    expect(echo.result).toEqual({ ok: true, content: "echo: from the cli" });
    // `crash` declares no hints: high risk, and without a terminal it is denied, never sent.
    expect(crash.result).toMatchObject({ ok: false, code: "DENIED" });
  });

  it("--mcp-url with --mcp-header reaches a Streamable HTTP server with auth", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "keel-cli-mcp-"));
    const child = spawn(process.execPath, ["--import", "tsx", SERVER, "http"], {
      env: { ...process.env, MCP_TOKEN: "t0k" },
      stdio: ["ignore", "pipe", "inherit"],
    });
    children.push(child);
    const port = await new Promise<number>((r) =>
      child.stdout!.once("data", (d) => r(JSON.parse(String(d)).port)),
    );
    const url = `http://127.0.0.1:${port}/mcp`;
    fake.enqueue(
      streamReply({ calls: [{ id: "c1", name: "echo", args: '{"text":"http"}' }] }),
      streamReply({ text: "ok" }),
    );
    const run = await keel(
      ["run", "--json", "--mcp-url", url, "--mcp-header", "Authorization: Bearer t0k", "go"],
      cwd,
      env(),
    );
    expect(run.code).toBe(0);
    expect(settled(run.stdout)[0].result).toEqual({ ok: true, content: "echo: http" });

    const refused = await keel(["run", "--mcp-url", url, "go"], cwd, env());
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain(`could not connect to MCP server "127_0_0_1" (${url})`);
  });

  it("--mcp-config reads the mcpServers shape other clients use", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "keel-cli-mcp-"));
    const file = join(cwd, "mcp.json");
    writeFileSync(
      file,
      JSON.stringify({
        mcpServers: {
          tester: {
            command: process.execPath,
            args: ["--import", TSX, SERVER, "stdio"],
            env: { MCP_HOSTILE: "1" },
          },
        },
      }),
    );
    fake.enqueue(
      streamReply({ calls: [{ id: "c1", name: "read_file", args: '{"path":"x.txt"}' }] }),
      streamReply({ text: "ok" }),
    );
    writeFileSync(join(cwd, "x.txt"), "the real file\n");
    const run = await keel(["run", "--json", "--mcp-config", file, "read"], cwd, env());
    expect(run.stderr).not.toContain("could not connect");
    expect(run.code).toBe(0);
    // The server's read_file cannot take the built-in's name: it is offered as tester_read_file.
    expect(run.stderr).toContain('tool "read_file" of "tester" is offered as "tester_read_file"');
    const names = (fake.requests[0].body.tools as { function: { name: string } }[]).map(
      (t) => t.function.name,
    );
    expect(names.filter((n) => n === "read_file")).toHaveLength(1);
    expect(names).toContain("tester_read_file");
    expect(settled(run.stdout)[0].result.content).toContain("the real file");
    expect(readFileSync(file, "utf8")).toContain("tester");
  });

  it("a bad config or command is a usage error that says what is wrong", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "keel-cli-mcp-"));
    const file = join(cwd, "bad.json");
    writeFileSync(file, JSON.stringify({ mcpServers: { s: { args: ["x"] } } }));
    const run = await keel(["run", "--mcp-config", file, "go"], cwd, env());
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('mcpServers.s needs "command" (a stdio server) or "url"');
    expect(() =>
      mcpServersFromConfig({ mcpServers: { s: { url: "http://x", type: "sse" } } }),
    ).toThrow(/SSE transport is not supported/);
    expect(splitCommand(`npx -y "my server" 'a b' c\\ d`)).toEqual([
      "npx",
      "-y",
      "my server",
      "a b",
      "c d",
    ]);
    expect(() => splitCommand('npx "open')).toThrow(/unclosed "/);
  });
});
