// The ends of a `keel serve --stdio` connection with real processes: its client killed with
// SIGKILL mid-turn (the server settles, flushes and exits; the SQLite log is whole), and the
// Python example (standard library only) run against the server.
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { LogEntry } from "../session/entries.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";

const ROOT = join(import.meta.dirname, "..");
const dir = mkdtempSync(join(tmpdir(), "keel-serve-ends-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("keel serve --stdio when its client dies", () => {
  it("settles the running turn, flushes the store and exits when the client is killed with SIGKILL", async () => {
    const store = join(dir, "crash.db");
    const script = join(dir, "crash.json");
    writeFileSync(
      script,
      JSON.stringify([
        {
          toolCalls: [
            { id: "call_oslo", name: "get_weather", arguments: '{"city":"Oslo"}' },
            { id: "call_rome", name: "get_weather", arguments: '{"city":"Rome"}' },
          ],
        },
        { text: "never reached" },
      ]),
    );
    const client = spawn(
      process.execPath,
      ["--import", "tsx", join(ROOT, "test", "support", "serve-client-child.ts"), store, script],
      { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, KEEL_LOG: "" } },
    );
    const serverPid = await new Promise<number>((resolve, reject) => {
      let buffer = "";
      client.stdout.on("data", (d) => {
        buffer += d;
        const line = buffer.split("\n")[0];
        if (buffer.includes("\n")) resolve(JSON.parse(line).serverPid);
      });
      client.on("exit", (code) => reject(new Error(`the client exited early (${code})`)));
    });
    // Mid-turn: call_oslo's tool.execute is at the client, call_rome waits its turn.
    client.kill("SIGKILL");
    for (let i = 0; i < 300 && alive(serverPid); i++) await new Promise((r) => setTimeout(r, 50));
    expect(alive(serverPid)).toBe(false);

    const reopened = sqliteStore(store);
    const entries: LogEntry[] = await reopened.load("crash");
    await reopened.close();
    const results = entries.filter((e) => e.type === "call_result");
    const started = entries.filter((e) => e.type === "call_started");
    expect(started.map((e) => e.callId)).toEqual(["call_oslo"]);
    // Every call of the assistant message has exactly one result.
    expect(results.map((e) => e.callId).sort()).toEqual(["call_oslo", "call_rome"]);
    const byCall = Object.fromEntries(results.map((e) => [e.callId, e.result]));
    expect(byCall.call_oslo).toMatchObject({ ok: false, code: "OUTCOME_UNKNOWN" });
    expect(byCall.call_rome).toMatchObject({ ok: false, code: "CANCELLED" });
    // The acknowledged prompt is in the log, and the turn's end with it.
    expect(entries.some((e) => e.type === "inbox" && e.body === "Weather in Oslo and Rome?")).toBe(
      true,
    );
    expect(entries.filter((e) => e.type === "turn_end")).toMatchObject([{ status: "cancelled" }]);
  });
});

/** Runs examples/weather.py with `env` over a clean one (no provider variables). */
function weather(env: Record<string, string> = {}) {
  const clean: NodeJS.ProcessEnv = { ...process.env, KEEL_LOG: "" };
  for (const key of ["OPENAI_API_KEY", "OPENAI_BASE_URL", "KEEL_PROVIDER", "KEEL_SERVE"]) {
    delete clean[key];
  }
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile(
      "python3",
      [join(ROOT, "examples", "weather.py")],
      { cwd: ROOT, env: { ...clean, ...env }, timeout: 30_000 },
      (error, stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

describe("examples/weather.py", () => {
  it("opens a session, runs its Python tool through Keel and prints the answer", async () => {
    const { stdout, stderr } = await weather();
    expect(stdout.trim().split("\n")).toEqual([
      '[get_weather] {"city": "Lisbon"} -> Lisbon: sunny, 24 °C',
      "It is sunny in Lisbon, 24 °C.",
    ]);
    expect(stderr).toBe("");
  });

  it("without the provider's key, ends with the server's one line and its own, exit 1, no traceback", async () => {
    const r = await weather({ KEEL_PROVIDER: "openai-compatible" });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("OPENAI_API_KEY is not set");
    expect(r.stderr).toContain("weather.py: the Keel server exited (code 3) before answering");
    expect(r.stderr).not.toContain("Traceback");
  });

  it("a turn that fails is one line saying how it ended and why, exit 1, no traceback", async () => {
    const script = join(dir, "weather-fails.json");
    writeFileSync(
      script,
      JSON.stringify([
        { error: { status: 401, message: "invalid api key", code: "invalid_api_key" } },
      ]),
    );
    const bin = join(ROOT, "cli", "bin.js");
    const r = await weather({
      KEEL_SERVE: `${process.execPath} ${bin} serve --stdio --store memory --provider scripted --script ${script}`,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^weather\.py: the turn ended failed: .*invalid api key/m);
    expect(r.stderr).not.toContain("Traceback");
  });
});

/**
 * `keel serve --stdio --provider scripted --script <steps>` as a real child: hello, one session,
 * one prompt; then stdin ends. The prompt's result and everything the server wrote on stderr.
 */
async function promptOnce(steps: unknown[], env: Record<string, string> = {}) {
  const script = join(dir, `steps-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(script, JSON.stringify(steps));
  const clean: NodeJS.ProcessEnv = { ...process.env };
  delete clean.KEEL_LOG;
  const child = spawn(
    process.execPath,
    [
      ...[join(ROOT, "cli", "bin.js"), "serve", "--stdio", "--store", "memory"],
      ...["--provider", "scripted", "--script", script],
    ],
    { stdio: ["pipe", "pipe", "pipe"], env: { ...clean, ...env } },
  );
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  let buffer = "";
  const send = (frame: unknown) => child.stdin.write(`${JSON.stringify(frame)}\n`);
  const result = await new Promise<Record<string, unknown>>((resolve) => {
    child.stdout.on("data", (d) => {
      buffer += d;
      for (let i = buffer.indexOf("\n"); i >= 0; i = buffer.indexOf("\n")) {
        const frame = JSON.parse(buffer.slice(0, i));
        buffer = buffer.slice(i + 1);
        if (frame.type === "hello") {
          send({ type: "hello", protocol: "1.0" });
          send({ type: "session.open", id: 1 });
        }
        if (frame.type === "ok" && frame.id === 1) {
          send({ type: "prompt", id: 2, sessionId: frame.result.sessionId, text: "hi" });
        }
        if (frame.type === "ok" && frame.id === 2) resolve(frame.result);
      }
    });
  });
  child.stdin.end();
  const code = await new Promise((resolve) => child.on("close", resolve));
  return { result, stderr, code };
}

describe("keel serve --stdio's stderr", () => {
  it("is quiet by default: a failed turn's warnings are logged only when KEEL_LOG asks", async () => {
    const failing = [{ error: { status: 400, message: "bad request (test)" } }];
    const quiet = await promptOnce(failing);
    expect(quiet.result).toMatchObject({ status: "failed" });
    expect(quiet.stderr).toBe("");
    expect(quiet.code).toBe(0);
    const loud = await promptOnce(failing, { KEEL_LOG: "warn" });
    expect(loud.stderr).toContain("bad request (test)");
  });
});

describe("docs/protocol.md", () => {
  it("the prompt response it documents names every field a real prompt response has", async () => {
    const { result } = await promptOnce([
      { text: "Hi.", usage: { inputTokens: 5, outputTokens: 2 } },
    ]);
    const doc = readFileSync(join(ROOT, "docs", "protocol.md"), "utf8");
    const row = doc.split("\n").find((l) => l.startsWith("| `prompt` |")) ?? "";
    const documented = /`\{([^`]*)\}`/.exec(row)?.[1] ?? "";
    for (const field of Object.keys(result)) {
      expect(documented, `docs/protocol.md's prompt row names "${field}"`).toMatch(
        new RegExp(`\\b${field}\\b`),
      );
    }
    expect(Object.keys(result)).toEqual(
      expect.arrayContaining(["inboxId", "status", "text", "usage", "steps"]),
    );
  });
});
