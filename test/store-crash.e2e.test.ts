import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { seededIds } from "../actors/ids.ts";
import { SessionLog } from "../session/log.ts";
import { recoverSession } from "../session/recovery.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { countingClock } from "./session-fixtures.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-crash-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const root = resolve(import.meta.dirname, "..");

/**
 * A child process that writes through a real SessionLog on SQLite and prints `ack <seq>` after
 * each flush resolves; in "tool" mode it writes a call's start record, acks, then hangs as if
 * the tool were running. The parent kills it with SIGKILL.
 */
const CHILD = `
import { sqliteStore } from ${JSON.stringify(join(root, "session/stores/sqlite-store.ts"))};
import { SessionLog } from ${JSON.stringify(join(root, "session/log.ts"))};
import { seededIds } from ${JSON.stringify(join(root, "actors/ids.ts"))};
const [path, mode] = process.argv.slice(2);
let t = 0;
const clock = { now: () => ++t, setTimeout, clearTimeout };
const log = await SessionLog.open({ sessionId: "s", store: sqliteStore(path), clock, ids: seededIds(1) });
if (mode === "tool") {
  log.append({ type: "turn_start", turnId: "t1" });
  log.append({ type: "attempt_start", turnId: "t1", attemptId: "a1", step: 0 });
  log.append({ type: "assistant_message", turnId: "t1", attemptId: "a1", finishReason: "tool_calls",
    content: [{ type: "tool-call", id: "c1", name: "deploy", arguments: "{}" }] });
  log.append({ type: "attempt_end", attemptId: "a1", status: "completed" });
  log.append({ type: "call_started", callId: "c1", name: "deploy", args: {}, idempotencyKey: "k1", idempotent: false });
  await log.flush();
  process.stdout.write("ack started\\n");
  setInterval(() => {}, 1000); // the tool is "running"
} else {
  for (let i = 0; ; i++) {
    for (let k = 0; k < 5; k++) log.append({ type: "user_message", text: "m" + i + "." + k });
    await log.flush();
    process.stdout.write("ack " + log.entries().at(-1).seq + "\\n");
  }
}
`;

function runChild(
  path: string,
  mode: string,
  until: (line: string) => boolean,
): Promise<{ lastAck: string; child: ChildProcess }> {
  const script = join(dir, "child.mts");
  writeFileSync(script, CHILD);
  const child = spawn(process.execPath, ["--import", "tsx", script, path, mode], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
  });
  return new Promise((resolvePromise, reject) => {
    let buffer = "";
    let stderr = "";
    child.stderr!.on("data", (d) => {
      stderr += d;
    });
    child.on("exit", (code, signal) => {
      if (signal !== "SIGKILL")
        reject(new Error(`child exited (${code ?? signal}) before the kill: ${stderr}`));
    });
    child.stdout!.on("data", (d) => {
      buffer += d;
      const lines = buffer.split("\n");
      buffer = lines.pop()!;
      for (const line of lines) {
        if (until(line)) {
          child.kill("SIGKILL");
          child.on("exit", () => resolvePromise({ lastAck: line, child }));
          return;
        }
      }
    });
  });
}

describe("SQLite store under kill -9", () => {
  it("every entry whose flush was acknowledged survives SIGKILL, contiguous and in order (durability: process)", async () => {
    const path = join(dir, "acks.db");
    let last = 0;
    await runChild(path, "acks", (line) => {
      last = Number(line.split(" ")[1]);
      return last >= 400;
    });
    const store = sqliteStore(path);
    const entries = await store.load("s");
    expect(entries.length).toBeGreaterThanOrEqual(last);
    expect(entries.map((e) => e.seq)).toEqual(entries.map((_, i) => i + 1));
    await store.close();
  });

  it("a tool call whose start record was acknowledged before SIGKILL is reported unknown on reopening, not re-run", async () => {
    const path = join(dir, "tool.db");
    await runChild(path, "tool", (line) => line === "ack started");
    const store = sqliteStore(path);
    const log = await SessionLog.open({
      sessionId: "s",
      store,
      clock: countingClock(),
      ids: seededIds(2),
    });
    const report = await recoverSession(log, { isIdempotent: () => false });
    expect(report.retry).toEqual([]);
    expect(report.unknown.map((e) => [e.callId, e.outcome])).toEqual([["c1", "unknown"]]);
    expect(log.messages().find((m) => m.role === "tool")?.content).toMatch(/outcome is unknown/);
    await store.close();
  });
});
