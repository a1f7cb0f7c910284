// The ends of a `keel serve --stdio` connection with real processes: its client killed with
// SIGKILL mid-turn (the server settles, flushes and exits; the SQLite log is whole), and the
// Python example (standard library only) run against the server.
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { LogEntry } from "../session/entries.ts";
import { sqliteStore } from "../session/sqlite-store.ts";

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

describe("examples/weather.py", () => {
  it("opens a session, runs its Python tool through Keel and prints the answer", async () => {
    const { stdout, stderr } = await new Promise<{ stdout: string; stderr: string }>(
      (resolve, reject) =>
        execFile(
          "python3",
          [join(ROOT, "examples", "weather.py")],
          { cwd: ROOT, env: { ...process.env, KEEL_LOG: "" }, timeout: 30_000 },
          (error, stdout, stderr) => (error ? reject(error) : resolve({ stdout, stderr })),
        ),
    );
    expect(stdout.trim().split("\n")).toEqual([
      '[get_weather] {"city": "Lisbon"} -> Lisbon: sunny, 24 °C',
      "It is sunny in Lisbon, 24 °C.",
    ]);
    expect(stderr).toBe("");
  });
});
