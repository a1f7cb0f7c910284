// `keel serve --stdio` as a real child process: requests sent after SIGTERM, before the client
// could see `goodbye`, are each answered SHUTTING_DOWN (not dropped); a prompt whose input the
// store refuses (a real SQLite file locked past its busy timeout) is answered STORE_FAILED, not
// INTERNAL, and its turn never runs once the lock is gone.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { responseTo, spawnServer, weatherTool } from "./support/serve-child.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-serve-sd-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function script(name: string, steps: unknown[]): string {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(steps));
  return file;
}

describe("keel serve --stdio: the end of a connection", { timeout: 60_000 }, () => {
  it("answers SHUTTING_DOWN to every request sent between SIGTERM and goodbye", async () => {
    const file = script("sd.json", [
      { toolCalls: [{ id: "c1", name: "get_weather", arguments: '{"city":"Rome"}' }] },
      { text: "warm" },
    ]);
    const server = spawnServer(["--store", "memory", "--provider", "scripted", "--script", file]);
    await server.waitFor((f) => f.type === "hello");
    server.send({ type: "hello", protocol: "1.0" });
    server.send({ type: "session.open", id: "open", sessionId: "p", tools: [weatherTool] });
    await server.waitFor(responseTo("open"));
    server.send({ type: "prompt", id: "go", sessionId: "p", text: "Rome?" });
    // The client holds the tool call: the turn is running when SIGTERM arrives.
    await server.waitFor((f) => (f.type as string) === "tool.execute");
    server.child.kill("SIGTERM");
    await new Promise((resolve) => setTimeout(resolve, 20)); // the signal is handled
    const sent: string[] = [];
    for (let i = 0; i < 10; i++) {
      if (server.frames.some((f) => f.type === "goodbye")) break;
      server.send({ type: "sessions.list", id: `l${i}` });
      sent.push(`l${i}`);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(sent.length).toBeGreaterThan(0);
    for (const id of sent) {
      expect(server.frames.find(responseTo(id)), id).toMatchObject({
        type: "error",
        code: "SHUTTING_DOWN",
      });
    }
    expect(server.frames.at(-1)).toEqual({ type: "goodbye", reason: "SIGTERM received" });
  });

  it("a prompt the store refuses (SQLite locked past its busy timeout) is STORE_FAILED, and never runs", async () => {
    const file = script("store.json", [{ text: "first" }, { text: "second" }, { text: "third" }]);
    const db = join(dir, "keel.db");
    const server = spawnServer(["--store", db, "--provider", "scripted", "--script", file]);
    await server.waitFor((f) => f.type === "hello");
    server.send({ type: "hello", protocol: "1.0" });
    server.send({ type: "session.open", id: "open", sessionId: "p", tools: [] });
    await server.waitFor(responseTo("open"));
    server.send({ type: "prompt", id: "warm", sessionId: "p", text: "warm up" });
    await server.waitFor(responseTo("warm"));
    const holder = new Database(db);
    holder.exec("BEGIN IMMEDIATE");
    try {
      server.send({ type: "prompt", id: "refused", sessionId: "p", text: "deploy (refused)" });
      const answer = await server.waitFor(responseTo("refused"));
      expect(answer).toMatchObject({ type: "error", code: "STORE_FAILED" });
      expect((answer as { message: string }).message).toMatch(/session store refused it \(BUSY\)/);
    } finally {
      holder.exec("ROLLBACK");
      holder.close();
    }
    server.send({ type: "prompt", id: "retry", sessionId: "p", text: "deploy (retry)" });
    const retry = await server.waitFor(responseTo("retry"));
    expect(retry).toMatchObject({ type: "ok", result: { status: "completed", text: "second" } });
    server.send({ type: "session.close", id: "close", sessionId: "p" });
    await server.waitFor(responseTo("close"));
    server.child.stdin.end();
    await server.exited;
    const stored = new Database(db, { readonly: true });
    const bodies = JSON.stringify(stored.prepare("SELECT * FROM entries").all());
    stored.close();
    expect(bodies).toContain("deploy (retry)");
    expect(bodies).not.toContain("deploy (refused)");
  });
});
