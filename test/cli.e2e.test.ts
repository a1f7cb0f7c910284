import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import type { AgentEvent } from "../contracts/events.ts";
import {
  type FakeOpenAIServer,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";
import { KEEL_BIN, runKeel } from "./support/run-keel.ts";

/** The parent's variables a run sees only when a test sets them. */
const UNSET = ["OPENAI_API_KEY", "OPENAI_BASE_URL", "KEEL_DEBUG", "NO_COLOR"];

const keel = (args: string[], options: { cwd: string; env?: Record<string, string> }) =>
  runKeel(args, { ...options, unset: UNSET });

/** Starts `keel inspect --json …`, reads its first line ({ url }), and stops it with SIGINT. */
async function inspectServer(args: string[], cwd: string) {
  const child = spawn(process.execPath, [KEEL_BIN, "inspect", "--json", ...args], {
    cwd,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
  const first = await new Promise<string>((resolve, reject) => {
    let buffer = "";
    child.stdout.on("data", (d) => {
      buffer += d;
      if (buffer.includes("\n")) resolve(buffer.split("\n")[0]);
    });
    child.on("close", () => reject(new Error(`keel inspect exited early: ${buffer}`)));
  });
  const { url } = JSON.parse(first) as { url: string };
  return {
    url,
    stop: () => {
      child.kill("SIGINT");
      return exited;
    },
  };
}

/** The inspector's first WebSocket message for `pageUrl` (its token and replay parameters). */
function firstMessage(
  pageUrl: string,
): Promise<{ mode: string; records: { k: string; e?: AgentEvent }[] }> {
  const url = new URL(pageUrl);
  const ws = new WebSocket(`ws://${url.host}/ws${url.search}`);
  return new Promise((resolve, reject) => {
    ws.once("message", (data) => {
      ws.close();
      resolve(JSON.parse(String(data)));
    });
    ws.once("error", reject);
  });
}

const lines = (text: string) => text.split("\n").filter((l) => l.trim());
const noStack = (text: string) => expect(text).not.toMatch(/\n\s+at .+:\d+:\d+/);

let cwd: string;
let fake: FakeOpenAIServer;

beforeAll(async () => {
  cwd = mkdtempSync(join(tmpdir(), "keel-cli-"));
  writeFileSync(join(cwd, "notes.txt"), "alpha\nbeta\n");
  fake = await startFakeOpenAIServer();
});
afterAll(async () => {
  await fake?.close();
  if (cwd) rmSync(cwd, { recursive: true, force: true });
});

// Each case spawns real processes; they are independent, so they run side by side.
// Each test spawns the `keel` command through tsx (a compile per process): slow on a loaded machine.
describe.concurrent("keel binary", { timeout: 90_000 }, () => {
  it("--help lists every command and documents the exit codes", async () => {
    const r = await keel(["--help"], { cwd });
    expect(r.code).toBe(0);
    for (const command of ["demo", "run", "resume", "sessions", "show", "inspect"]) {
      expect(r.stdout).toContain(command);
    }
    expect(r.stdout).toMatch(/Exit codes:[\s\S]*2\s+usage error[\s\S]*3\s+configuration error/);
    const sub = await keel(["inspect", "--help"], { cwd });
    expect(sub.code).toBe(0);
    expect(sub.stdout).toContain("--replay <id>");
  });

  it("a bad command or argument is one clear line on stderr and exit code 2", async () => {
    const unknown = await keel(["frobnicate"], { cwd });
    expect(unknown.code).toBe(2);
    expect(lines(unknown.stderr)).toHaveLength(1);
    expect(unknown.stderr).toContain("unknown command 'frobnicate'");
    const port = await keel(["inspect", "--port", "http"], { cwd });
    expect(port.code).toBe(2);
    expect(lines(port.stderr)).toEqual([expect.stringContaining("--port must be an integer")]);
    noStack(port.stderr);
  });

  it("run without an API key fails with exit code 3 and says which variable to set", async () => {
    const r = await keel(["run", "hello"], { cwd });
    expect(r.code).toBe(3);
    expect(lines(r.stderr)).toHaveLength(1);
    expect(r.stderr).toContain("OPENAI_API_KEY");
    noStack(r.stderr);
  });

  it("sessions with no store says so, exits 0 and creates nothing", async () => {
    const empty = mkdtempSync(join(tmpdir(), "keel-cli-empty-"));
    try {
      const r = await keel(["sessions"], { cwd: empty });
      expect(r.code).toBe(0);
      expect(r.stdout).toContain("no sessions yet");
      expect((await keel(["sessions", "--json"], { cwd: empty })).stdout.trim()).toBe("[]");
      expect(existsSync(join(empty, ".keel"))).toBe(false);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it("demo --json runs the scripted session: one JSON event per line, every hard case, exit 0", async () => {
    const demoDir = mkdtempSync(join(tmpdir(), "keel-cli-demo-"));
    const r = await keel(["demo", "--json"], { cwd: demoDir });
    // The session is logged in the project's store, ./.keel/keel.db.
    const stored = JSON.parse((await keel(["sessions", "--json"], { cwd: demoDir })).stdout);
    expect(stored).toHaveLength(1);
    // The demo sends instructions too: where the model works and what its tools do.
    const shown = await keel(["show", stored[0].sessionId], { cwd: demoDir });
    rmSync(demoDir, { recursive: true, force: true });
    expect(shown.stdout).toContain("instructions (sent before the tools and the history):");
    expect(shown.stdout).toContain("You are a coding agent working in one workspace directory");
    expect(shown.stdout).toMatch(/- read_file: /);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const events = lines(r.stdout).map((l) => JSON.parse(l)) as (AgentEvent | { type: "result" })[];
    const settled = events.filter((e) => e.type === "call.settled") as Extract<
      AgentEvent,
      { type: "call.settled" }
    >[];
    const codes = settled.map((e) => (e.result.ok ? `${e.name}:ok` : `${e.name}:${e.result.code}`));
    expect(codes).toEqual(
      expect.arrayContaining([
        "list_dir:ok",
        "read_file:ok",
        "fetch_url:UNKNOWN_TOOL",
        "grep:ok",
        "edit_file:TRUNCATED_CALL",
        "edit_file:ok",
      ]),
    );
    // The double-encoded read_file arguments were repaired: both reads ran.
    expect(codes.filter((c) => c === "read_file:ok")).toHaveLength(2);
    expect(events.some((e) => e.type === "retry.scheduled")).toBe(true);
    // The steer sent during the first batch is read after it commits, before the next model call.
    const types = events.map((e) => (e.type === "inbox.consumed" ? `${e.type}:${e.lane}` : e.type));
    const steer = types.indexOf("inbox.consumed:next-step");
    expect(steer).toBeGreaterThan(types.indexOf("batch.committed"));
    expect(steer).toBeLessThan(types.indexOf("attempt.started", types.indexOf("batch.committed")));
    const committed = events.find(
      (e) => e.type === "batch.committed" && e.calls.length === 3,
    ) as Extract<AgentEvent, { type: "batch.committed" }>;
    expect(committed.calls.map((c) => c.callId)).toEqual(["call_ls", "call_greet", "call_readme"]);
    expect(events.at(-1)).toMatchObject({ type: "result", status: "completed", edited: true });
  });

  it("run stores a session; high-risk tools are denied without a TTY; sessions, show and resume read it", async () => {
    fake.enqueue(
      streamReply({
        text: "Reading and running.",
        calls: [
          { id: "call_read", name: "read_file", args: '{"path":"notes.txt"}' },
          { id: "call_sh", name: "shell", args: '{"command":"touch pwned"}' },
        ],
      }),
      streamReply({ text: "notes.txt has two lines." }),
    );
    const env = {
      OPENAI_BASE_URL: fake.baseURL,
      KEEL_MODEL: "fake-model",
      KEEL_CONTEXT_WINDOW: "32768",
    };
    const run = await keel(["run", "--json", "what is in notes.txt?"], { cwd, env });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const events = lines(run.stdout).map((l) => JSON.parse(l));
    const shell = events.find((e) => e.type === "call.settled" && e.callId === "call_sh");
    expect(shell.result).toMatchObject({ ok: false, code: "DENIED" });
    expect(existsSync(join(cwd, "pwned"))).toBe(false);
    const result = events.at(-1);
    expect(result).toMatchObject({ type: "result", status: "completed" });
    const id: string = result.sessionId;

    const [list, listJson, show, showJson] = await Promise.all([
      keel(["sessions"], { cwd }),
      keel(["sessions", "--json"], { cwd }),
      keel(["show", id], { cwd }),
      keel(["show", "--json", id], { cwd }),
    ]);
    expect(list.code).toBe(0);
    expect(list.stdout).toContain(id);
    expect(JSON.parse(listJson.stdout)).toEqual([expect.objectContaining({ sessionId: id })]);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain(`session ${id}`);
    expect(show.stdout).toMatch(/● user "what is in notes.txt\?"/);
    expect(show.stdout).toContain("✗ shell");
    expect(show.stdout).toMatch(/projection \(what the model sees next, \d+ messages\)/);
    // The instructions say where the model works and what the tools do; show prints them.
    const system = fake.requests[0].body.messages?.[0];
    expect(system).toMatchObject({ role: "system" });
    expect(String(system?.content)).toContain(`The workspace is ${realpathSync(cwd)}`);
    expect(String(system?.content)).toMatch(/- read_file: /);
    expect(show.stdout).toContain("instructions (sent before the tools and the history):");
    expect(show.stdout).toContain("You are a coding agent working in one workspace directory");
    const shown = JSON.parse(showJson.stdout);
    expect(shown.messages.map((m: { role: string }) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "tool",
      "assistant",
    ]);

    const inspect = await inspectServer(["--replay", id], cwd);
    expect(inspect.url).toMatch(
      new RegExp(`^http://127\\.0\\.0\\.1:\\d+/\\?token=[\\w-]+&replay=${id}$`),
    );
    expect((await fetch(inspect.url)).status).toBe(200);
    const hello = await firstMessage(inspect.url);
    expect(hello.mode).toBe("replay");
    expect(hello.records.filter((r) => r.e?.type === "call.settled")).toHaveLength(2);
    expect(await inspect.stop()).toBe(0);

    fake.enqueue(streamReply({ text: "Still two lines." }));
    const resumed = await keel(["resume", "--json", id, "and now?"], { cwd, env });
    expect(resumed.code).toBe(0);
    expect(JSON.parse(lines(resumed.stdout).at(-1)!)).toMatchObject({
      sessionId: id,
      status: "completed",
    });
    const after = JSON.parse((await keel(["show", "--json", id], { cwd })).stdout);
    expect(after.messages.length).toBe(7);
  });

  it("run --store memory keeps nothing: no file named memory, no .keel/", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-cli-memory-"));
    const own = await startFakeOpenAIServer(); // the shared one's queue belongs to another case
    try {
      writeFileSync(join(dir, "notes.txt"), "alpha\n");
      own.enqueue(streamReply({ text: "Nothing to do." }));
      const env = {
        OPENAI_BASE_URL: own.baseURL,
        KEEL_MODEL: "fake-model",
        KEEL_CONTEXT_WINDOW: "32768",
      };
      const run = await keel(["run", "--store", "memory", "hello"], { cwd: dir, env });
      expect(run.code).toBe(0);
      expect(run.stderr).toContain("not kept (--store memory)");
      expect(readdirSync(dir)).toEqual(["notes.txt"]);
    } finally {
      await own.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("run keeps its store out of the tools' reach: list_dir shows neither .keel/ nor a --store file, and a write there is refused", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-cli-reach-"));
    const own = await startFakeOpenAIServer();
    try {
      writeFileSync(join(dir, "notes.txt"), "alpha\n");
      const env = {
        OPENAI_BASE_URL: own.baseURL,
        KEEL_MODEL: "fake-model",
        KEEL_CONTEXT_WINDOW: "32768",
      };
      const look = (store: string) =>
        own.enqueue(
          streamReply({
            calls: [
              { id: "call_ls", name: "list_dir", args: "{}" },
              {
                id: "call_w",
                name: "write_file",
                args: JSON.stringify({ path: store, content: "x" }),
              },
            ],
          }),
          streamReply({ text: "Seen." }),
        );
      const settled = (stdout: string) =>
        Object.fromEntries(
          lines(stdout)
            .map((l) => JSON.parse(l))
            .filter((e) => e.type === "call.settled")
            .map((e) => [e.callId, e.result]),
        );
      look(".keel/keel.db");
      const first = settled((await keel(["run", "--json", "look"], { cwd: dir, env })).stdout);
      expect(first.call_ls).toEqual({ ok: true, content: "notes.txt" });
      expect(first.call_w).toMatchObject({ ok: false, code: "PATH_OUTSIDE_WORKSPACE" });
      look("sessions.db");
      const second = settled(
        (await keel(["run", "--json", "--store", "sessions.db", "look"], { cwd: dir, env })).stdout,
      );
      expect(second.call_ls.content.split("\n")).toEqual(["notes.txt"]);
      expect(second.call_w).toMatchObject({ ok: false, code: "PATH_OUTSIDE_WORKSPACE" });
      expect(readdirSync(dir).sort()).toEqual([".keel", "notes.txt", "sessions.db"]);
    } finally {
      await own.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("demo off a terminal says its inspector closed when it ends; with --keep-open it serves until Ctrl-C, then says so", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-cli-open-"));
    try {
      const once = await keel(["demo", "--store", "memory"], { cwd: dir });
      expect(once.code).toBe(0);
      const url = /inspector: (http:\S+)/.exec(once.stdout)?.[1];
      expect(url).toBeDefined();
      expect(lines(once.stdout).at(-1)).toBe(
        "inspector closed: the demo ended (keel demo --keep-open keeps it open until Ctrl-C)",
      );
      await expect(fetch(url!)).rejects.toThrow();

      const child = spawn(
        process.execPath,
        [KEEL_BIN, "demo", "--store", "memory", "--keep-open"],
        {
          cwd: dir,
          stdio: ["ignore", "pipe", "pipe"],
        },
      );
      let stdout = "";
      const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
      const open = await new Promise<string>((resolve, reject) => {
        child.stdout.on("data", (d) => {
          stdout += d;
          const m = /inspector still open at (http:\S+)/.exec(stdout);
          if (m) resolve(m[1]);
        });
        child.on("close", () => reject(new Error(`demo exited early: ${stdout}`)));
      });
      expect((await fetch(open)).status).toBe(200);
      child.kill("SIGINT");
      expect(await exited).toBe(0);
      expect(lines(stdout).at(-1)).toBe("inspector closed");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("show and resume of an unknown session exit 4 with one line naming keel sessions", async () => {
    const show = await keel(["show", "nope"], { cwd });
    expect(show.code).toBe(4);
    expect(lines(show.stderr)).toEqual([expect.stringContaining("keel sessions")]);
    const resume = await keel(["resume", "nope", "hi"], {
      cwd,
      env: { OPENAI_API_KEY: "sk-test" },
    });
    expect(resume.code).toBe(4);
    noStack(resume.stderr);
  });
});
