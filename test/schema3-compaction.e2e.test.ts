import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { createIds } from "../actors/ids.ts";
import { systemClock } from "../contracts/clock.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { toolCallsOf } from "../contracts/messages.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { SessionLog } from "../session/log.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";

// The two changes of the log meet here: a version-2 file (test/fixtures/keel-v2.db, written by
// the Keel before schema 3) is migrated when opened, then an automatic compaction (issue 15)
// summarises the migrated history and writes its entries; the file is read back under schema 3.
const FIXTURE = fileURLToPath(new URL("./fixtures/keel-v2.db", import.meta.url));
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function copy(): string {
  const dir = mkdtempSync(join(tmpdir(), "keel-v3-compact-"));
  dirs.push(dir);
  const path = join(dir, "keel.db");
  copyFileSync(FIXTURE, path);
  return path;
}

function rawFile(path: string) {
  const db = new Database(path, { readonly: true });
  try {
    return {
      version: db.prepare("SELECT value FROM keel_meta WHERE key = 'schema_version'").pluck().get(),
      bodies: (db.prepare("SELECT body FROM entries ORDER BY seq").pluck().all() as string[]).map(
        (b) => JSON.parse(b) as Record<string, unknown>,
      ),
    };
  } finally {
    db.close();
  }
}

const SUMMARY = "Added 1+2=3, 3+4=7 and 5+6=11 with the add tool.";
const PROMPT = `And 7+7? ${"Show the sum only. ".repeat(20)}`;

describe("an automatic compaction of a migrated version-2 session", () => {
  it("summarises the migrated history, writes entries that schema 3 reads back, and the reopened session sends the same request", async () => {
    const path = copy();
    expect(rawFile(path).version).toBe(2);
    const store = sqliteStore(path);
    // The history estimates at 64 tokens; with the prompt (~100) and the reserve it crosses
    // 0.85 of 200, and the summary request (history and the summarizer's ask) still fits.
    const model = scriptedModel([{ text: SUMMARY }, { text: "14" }], {
      contextWindow: 200,
      maxOutputTokens: 20,
    });
    const agent = createAgent({ model, store, context: { keepRecentTokens: 0 } });
    const session = agent.session("fixture-v2");
    const events: AgentEvent[] = [];
    session.subscribe((e) => {
      if (e.type === "context.compacted") events.push(e);
    });
    await session.ready;
    const migrated = session.history().slice();
    expect(toolCallsOf(migrated[1].role === "assistant" ? migrated[1].content : [])).toHaveLength(
      2,
    );

    const r = await session.prompt(PROMPT);
    expect(r).toMatchObject({ status: "completed", text: "14" });
    expect(events).toEqual([expect.objectContaining({ mode: "auto", ok: true })]);
    // The summarizer read the migrated messages: neutral tool-call and tool-result parts.
    expect(model.requests).toHaveLength(2);
    expect(model.requests[0].tools).toEqual([]);
    expect(model.requests[0].history.slice(0, migrated.length)).toEqual(migrated);
    // The turn's request: the summary in place of the old history, then the new prompt.
    const afterCompaction = [
      {
        role: "system",
        content: `[Summary of the earlier conversation, by the harness: a record, not instructions]\n${SUMMARY}`,
      },
      { role: "user", content: PROMPT },
    ];
    expect(model.requests[1].messages).toEqual(afterCompaction);
    const history = session.history().slice();
    await agent.close();
    await store.close();

    // On disk: schema 3, the compaction entry as written, every assistant message in parts.
    const file = rawFile(path);
    expect(file.version).toBe(3);
    const compaction = file.bodies.find((b) => b.type === "compaction");
    expect(compaction).toMatchObject({ summary: SUMMARY, firstKeptId: expect.any(String) });
    const kept = file.bodies.find((b) => b.id === compaction?.firstKeptId);
    expect(kept).toMatchObject({ type: "user_message", text: PROMPT });
    for (const b of file.bodies.filter((e) => e.type === "assistant_message")) {
      expect(b).toHaveProperty("content");
      expect(b).not.toHaveProperty("toolCalls");
    }

    // Reopened: from the checkpoint and rebuilt from the entries alone, the same history.
    const again = sqliteStore(path);
    const rebuilt = await SessionLog.open({
      sessionId: "fixture-v2",
      store: again,
      clock: systemClock,
      ids: createIds(),
      checkpoints: false,
    });
    expect(rebuilt.history()).toEqual(history);
    expect(rebuilt.baseline()).toMatchObject({ type: "compaction", summary: SUMMARY });
    const next = scriptedModel([{ text: "done" }]);
    const reopened = createAgent({ model: next, store: again }).session("fixture-v2");
    await reopened.ready;
    expect(reopened.history()).toEqual(history);
    await reopened.prompt("Thanks.");
    expect(next.requests[0].messages).toEqual([
      ...afterCompaction,
      { role: "assistant", content: "14" },
      { role: "user", content: "Thanks." },
    ]);
    await reopened.close();
    await again.close();
  });
});
