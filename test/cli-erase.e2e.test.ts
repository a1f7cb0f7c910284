import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { defaultStorePath, sqliteStore } from "../session/stores/sqlite-store.ts";
import { defineTool } from "../tools/define-tool.ts";
import { runKeel } from "./support/run-keel.ts";

const SECRET = "ghp_CLI-ERASE-0b7d3e";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const keel = (args: string[], cwd: string) => runKeel(args, { cwd });

const echo = defineTool({
  name: "echo",
  description: "Echoes, at length.",
  parameters: z.object({ text: z.string() }),
  traits: { outputBudget: { maxBytes: 100, overflow: "spill" } },
  execute: ({ text }) => `${text} `.repeat(40),
});

/** A project folder whose store (./.keel/keel.db) holds sessions a and b, both with the secret. */
async function project(): Promise<{
  cwd: string;
  db: string;
  entries: Record<string, LogEntry[]>;
}> {
  const cwd = mkdtempSync(join(tmpdir(), "keel-cli-erase-"));
  dirs.push(cwd);
  const db = defaultStorePath(cwd);
  const store = sqliteStore(db);
  const entries: Record<string, LogEntry[]> = {};
  for (const id of ["a", "b"]) {
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "echo", arguments: JSON.stringify({ text: SECRET }) }] },
      { text: "done" },
    ]);
    const agent = createAgent({ model, store, tools: [echo], dataDir: join(cwd, ".keel") });
    const session = await agent.openSession(id);
    await session.prompt(`remember ${SECRET}`);
    entries[id] = session.entries().slice();
    await agent.close();
  }
  await store.close();
  return { cwd, db, entries };
}

const grep = (db: string, text: string) =>
  [db, `${db}-wal`].some((f) => existsSync(f) && readFileSync(f).includes(text));

describe("keel rm and keel redact", () => {
  it("keel rm deletes a session, its files and its bytes; an unknown session exits 4", async () => {
    const { cwd, db } = await project();
    expect(existsSync(join(cwd, ".keel", "sessions", "a", "spill"))).toBe(true);
    const ran = await keel(["rm", "a"], cwd);
    expect(ran).toMatchObject({ code: 0, stderr: "" });
    expect(ran.stdout).toMatch(
      /^deleted session a: \d+ entries, its files \(\.\/\.keel\/sessions\/a\)\n$/,
    );
    expect(existsSync(join(cwd, ".keel", "sessions", "a"))).toBe(false);
    expect(existsSync(join(cwd, ".keel", "sessions", "b"))).toBe(true);
    const list = JSON.parse((await keel(["sessions", "--json"], cwd)).stdout);
    expect(list.map((s: { sessionId: string }) => s.sessionId)).toEqual(["b"]);
    await keel(["rm", "b", "--json"], cwd).then((r) => {
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ sessionId: "b", checkpoints: 1 });
    });
    expect(grep(db, SECRET)).toBe(false);
    expect(await keel(["rm", "a"], cwd)).toMatchObject({
      code: 4,
      stderr: expect.stringContaining('no session "a" in ./.keel/keel.db'),
    });
  }, 60_000);

  it("keel redact replaces an entry's content (and its copies) in the stored log; bad entries and a missing reason are refused", async () => {
    const { cwd, db, entries } = await project();
    const user = entries.b.find((e) => e.type === "user_message")!;
    const ran = await keel(["redact", "b", user.id, "--reason", "a pasted token"], cwd);
    expect(ran).toMatchObject({ code: 0, stderr: "" });
    expect(ran.stdout).toMatch(/^redacted 2 entries of session b \(e[\w-]+ held a copy\)\n$/);
    const shown = JSON.parse((await keel(["show", "b", "--json"], cwd)).stdout);
    expect(shown.messages[0]).toEqual({ role: "user", content: "[redacted: a pasted token]" });
    expect(shown.entries.map((e: LogEntry) => e.id)).toEqual(entries.b.map((e) => e.id));
    // The secret is still in the call's arguments and result: redact the answer and the result too.
    const asked = entries.b.find((e) => e.type === "assistant_message")!;
    const result = entries.b.find((e) => e.type === "call_result")!;
    const more = await keel(
      ["redact", "b", asked.id, result.id, "--reason", "a pasted token", "--json"],
      cwd,
    );
    expect(more.code).toBe(0);
    expect(JSON.parse(more.stdout).files).toHaveLength(1);
    await keel(["rm", "a"], cwd);
    expect(grep(db, SECRET)).toBe(false);

    expect(await keel(["redact", "b", "e-nope", "--reason", "x"], cwd)).toMatchObject({
      code: 4,
      stderr: expect.stringContaining('no entry "e-nope" in this session'),
    });
    const end = entries.b.find((e) => e.type === "turn_end")!;
    expect(await keel(["redact", "b", end.id, "--reason", "x"], cwd)).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("is a turn_end record, which holds no conversation content"),
    });
    expect(await keel(["redact", "b", user.id], cwd)).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("--reason"),
    });
    expect(await keel(["redact", "b", user.id, "--reason", "two\nlines"], cwd)).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("reason must be one line"),
    });
    expect(await keel(["redact", "zz", user.id, "--reason", "x"], cwd)).toMatchObject({ code: 4 });
  }, 60_000);
});
