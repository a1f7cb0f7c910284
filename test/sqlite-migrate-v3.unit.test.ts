import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { StoreError } from "../session/store-error.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";

// Written by the Keel of schema version 2 (test/fixtures/make-v2-store.ts, before schema 3).
const FIXTURE = fileURLToPath(new URL("./fixtures/keel-v2.db", import.meta.url));

const dirs: string[] = [];
function copy(): string {
  const dir = mkdtempSync(join(tmpdir(), "keel-v3-"));
  dirs.push(dir);
  const path = join(dir, "keel.db");
  copyFileSync(FIXTURE, path);
  return path;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function raw(path: string) {
  const db = new Database(path, { readonly: true });
  try {
    return {
      version: db.prepare("SELECT value FROM keel_meta WHERE key = 'schema_version'").pluck().get(),
      bodies: new Map(
        (
          db.prepare("SELECT seq, body FROM entries ORDER BY seq").all() as {
            seq: number;
            body: string;
          }[]
        ).map((r) => [r.seq, r.body]),
      ),
      checkpoints: db.prepare("SELECT count(*) FROM checkpoints").pluck().get(),
    };
  } finally {
    db.close();
  }
}

describe("log schema 3 migration of a real version-2 file", () => {
  it("the fixture is a version-2 file with Chat-shaped tool calls (so the tests below test a migration)", () => {
    const before = raw(copy());
    expect(before.version).toBe(2);
    expect(JSON.parse(before.bodies.get(6)!).toolCalls[0]).toEqual({
      id: "call_a",
      type: "function",
      function: { name: "add", arguments: '{"a":1,"b":2}' },
    });
  });

  it("rewrites assistant messages and attempt ends to neutral parts and leaves every other entry byte for byte", async () => {
    const path = copy();
    const before = raw(path);
    const store = sqliteStore(path);
    const entries = await store.load("fixture-v2");
    await store.close();
    const after = raw(path);
    expect(after.version).toBe(3);
    const bySeq = new Map(entries.map((e) => [e.seq, e]));
    expect(bySeq.get(6)).toMatchObject({
      type: "assistant_message",
      content: [
        { type: "text", text: "Adding both." },
        { type: "tool-call", id: "call_a", name: "add", arguments: '{"a":1,"b":2}' },
        { type: "tool-call", id: "call_b", name: "add", arguments: '{"a":3,"b":4}' },
      ],
      finishReason: "tool_calls",
      usage: { inputTokens: 120, outputTokens: 30 },
    });
    expect(bySeq.get(6)).not.toHaveProperty("toolCalls");
    expect(bySeq.get(6)).not.toHaveProperty("text");
    // An empty text is no part.
    expect(bySeq.get(15)).toMatchObject({
      content: [{ type: "tool-call", id: "call_c", name: "add", arguments: '{"a":5,"b":6}' }],
    });
    expect(bySeq.get(20)).toMatchObject({ content: [{ type: "text", text: "3, 7 and 11." }] });
    expect(bySeq.get(13)).toMatchObject({
      type: "attempt_end",
      status: "interrupted",
      partialCalls: [{ type: "tool-call", id: "call_c", name: "add", arguments: '{"a":5,' }],
    });
    for (const [seq, body] of before.bodies) {
      if ([6, 13, 15, 20].includes(seq)) continue;
      expect(after.bodies.get(seq)).toBe(body);
    }
  });

  it("a reopened session shows the same conversation and sends it on", async () => {
    const path = copy();
    const store = sqliteStore(path);
    const model = scriptedModel([{ text: "14" }]);
    const agent = createAgent({ model, store });
    const session = agent.session("fixture-v2");
    await session.ready;
    const call = (id: string, args: string) => ({
      id,
      type: "function",
      function: { name: "add", arguments: args },
    });
    const expected = [
      { role: "user", content: "Add 1+2 and 3+4, then 5+6." },
      {
        role: "assistant",
        content: "Adding both.",
        tool_calls: [call("call_a", '{"a":1,"b":2}'), call("call_b", '{"a":3,"b":4}')],
      },
      { role: "tool", tool_call_id: "call_a", content: "3" },
      { role: "tool", tool_call_id: "call_b", content: "7" },
      { role: "assistant", content: null, tool_calls: [call("call_c", '{"a":5,"b":6}')] },
      { role: "tool", tool_call_id: "call_c", content: "11" },
      { role: "assistant", content: "3, 7 and 11." },
    ];
    expect(session.messages()).toEqual(expected);
    expect(session.history()[2]).toEqual({
      role: "tool",
      content: [{ type: "tool-result", callId: "call_a", name: "add", content: "3" }],
    });
    expect((await session.prompt("And 7+7?")).status).toBe("completed");
    expect(model.requests[0].messages).toEqual([
      ...expected,
      { role: "user", content: "And 7+7?" },
    ]);
    await agent.close();
    await store.close();
  });

  it("runs in one transaction: a failure part-way leaves the file at version 2, every body as it was, checkpoints kept", () => {
    const path = copy();
    const db = new Database(path);
    db.exec(`CREATE TRIGGER refuse_late BEFORE UPDATE ON entries WHEN new.seq = 20
      BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;`);
    db.close();
    const before = raw(path);
    expect(() => sqliteStore(path)).toThrow(StoreError);
    const after = raw(path);
    expect(after.version).toBe(2);
    expect(after.bodies).toEqual(before.bodies); // seq 6 and 13 were rewritten before 20 failed
    expect(after.checkpoints).toBe(1);
  });

  it("drops the version-2 checkpoints (projections of the old shape) with the migration", () => {
    const path = copy();
    expect(raw(path).checkpoints).toBe(1);
    void sqliteStore(path).close();
    expect(raw(path).checkpoints).toBe(0);
  });
});
