import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, defineTool, scriptedModel, sqliteStore } from "../index.ts";

const SECRET = "sk-live-REDACT-ME-91b2e0";

const dirs: string[] = [];
const tmp = () => {
  const dir = mkdtempSync(path.join(tmpdir(), "keel-redact-"));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Whether `text` is in the SQLite database file or its write-ahead log. */
const inFiles = (file: string, text: string) =>
  [file, `${file}-wal`].some((f) => existsSync(f) && readFileSync(f).includes(text));

const echo = defineTool({
  name: "echo",
  description: "Says its text back.",
  parameters: z.object({ text: z.string() }),
  execute: async ({ text }) => `echo: ${text}`,
});

describe("session.redact through the public API", () => {
  it("replaces the entries in the session's log and in the SQLite files: the projection and the next request show the marker, and the secret is in neither file", async () => {
    const file = path.join(tmp(), "keel.db");
    const store = sqliteStore(file);
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "echo", arguments: JSON.stringify({ text: SECRET }) }] },
      { text: `Noted ${SECRET}.` },
      { text: "fine" },
    ]);
    const agent = createAgent({ model, store, dataDir: tmp(), tools: [echo] });
    const session = agent.session("s");
    expect((await session.prompt(`my key is ${SECRET}`)).status).toBe("completed");
    expect(inFiles(file, SECRET), "the secret is stored before").toBe(true);

    const entries = session.entries();
    const shape = entries.map((e) => [e.id, e.type]);
    const user = entries.find((e) => e.type === "user_message")!;
    const call = entries.find(
      (e) => e.type === "assistant_message" && e.content.some((p) => p.type === "tool-call"),
    )!;
    const result = entries.find((e) => e.type === "call_result")!;
    const last = entries.filter((e) => e.type === "assistant_message").at(-1)!;

    const done = await agent
      .session("s")
      .redact([user.id, call.id, result.id, last.id], { reason: "a pasted key" });
    expect(done).toMatchObject({ ok: true });
    if (!done.ok) throw new Error(done.message);
    expect(done.redacted).toEqual(expect.arrayContaining([user.id, call.id, result.id, last.id]));

    // The in-memory log: same shape, the marker where the content was.
    expect(session.entries().map((e) => [e.id, e.type])).toEqual(shape);
    expect(JSON.stringify(session.entries())).not.toContain(SECRET);
    expect(session.entries().find((e) => e.id === user.id)).toMatchObject({
      text: "[redacted: a pasted key]",
      redacted: { reason: "a pasted key" },
    });
    // The projection the model sees.
    const history = JSON.stringify(session.history());
    expect(history).not.toContain(SECRET);
    expect(history).toContain("[redacted: a pasted key]");
    // The bytes: gone from the database file and the WAL.
    expect(inFiles(file, SECRET)).toBe(false);

    expect((await session.prompt("and now?")).status).toBe("completed");
    const sent = JSON.stringify(model.requests.at(-1)!.history);
    expect(sent).not.toContain(SECRET);
    expect(sent).toContain("[redacted: a pasted key]");
    await agent.close();
    await store.close();
    expect(inFiles(file, SECRET)).toBe(false);
  });

  it("redacting a call's arguments (its call_started entry) removes them everywhere: the asking message's tool-call part, the projection, the next request", async () => {
    // Its result does not repeat the arguments: only the call holds them.
    const save = defineTool({
      name: "save",
      description: "Saves a text.",
      parameters: z.object({ text: z.string() }),
      execute: async () => "saved",
    });
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "save", arguments: JSON.stringify({ text: SECRET }) }] },
      { text: "saved it" },
      { text: "fine" },
    ]);
    const agent = createAgent({ model, dataDir: tmp(), tools: [save] });
    const session = agent.session("args");
    expect((await session.prompt("save the key")).status).toBe("completed");
    const started = session.entries().find((e) => e.type === "call_started")!;
    const asker = session
      .entries()
      .find(
        (e) => e.type === "assistant_message" && e.content.some((p) => p.type === "tool-call"),
      )!;
    const done = await session.redact([started.id], { reason: "arguments" });
    if (!done.ok) throw new Error(done.message);
    expect(done.redacted).toEqual(expect.arrayContaining([started.id, asker.id]));
    const redactedAsker = session.entries().find((e) => e.id === asker.id)!;
    expect(JSON.stringify(redactedAsker)).not.toContain(SECRET);
    expect(redactedAsker).toMatchObject({
      content: [{ type: "tool-call", id: "c1", name: "save" }],
    });
    expect(JSON.stringify(session.history())).not.toContain(SECRET);
    expect(JSON.stringify(session.messages())).not.toContain(SECRET);
    expect((await session.prompt("and now?")).status).toBe("completed");
    expect(JSON.stringify(model.requests.at(-1))).not.toContain(SECRET);
    await agent.close();
  });

  it("is refused with TURN_OPEN while a turn runs, and nothing changes", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let entered!: () => void;
    const running = new Promise<void>((resolve) => {
      entered = resolve;
    });
    const wait = defineTool({
      name: "wait",
      description: "Waits until the test lets it go.",
      parameters: z.object({}),
      async execute() {
        entered();
        await gate;
        return "done";
      },
    });
    const model = scriptedModel([
      { toolCalls: [{ id: "w1", name: "wait", arguments: "{}" }] },
      { text: "ok" },
    ]);
    const agent = createAgent({ model, tools: [wait] });
    const session = agent.session("busy");
    const turn = session.prompt(`my key is ${SECRET}`);
    await running;
    const user = session.entries().find((e) => e.type === "user_message")!;

    const refused = await session.redact([user.id], { reason: "a pasted key" });
    expect(refused).toMatchObject({ ok: false, code: "TURN_OPEN" });
    expect(JSON.stringify(session.entries())).toContain(SECRET);

    release();
    expect((await turn).status).toBe("completed");
    expect(await session.redact([user.id], { reason: "a pasted key" })).toMatchObject({
      ok: true,
    });
    expect(JSON.stringify(session.history())).not.toContain(SECRET);
    await agent.close();
  });

  it("agent.deleteSession removes an open session: it is no longer listed and reopening it finds an empty log", async () => {
    const file = path.join(tmp(), "keel.db");
    const store = sqliteStore(file);
    const model = scriptedModel([{ text: `Noted ${SECRET}.` }]);
    const agent = createAgent({ model, store, dataDir: tmp() });
    const session = agent.session("gone");
    expect((await session.prompt(`my key is ${SECRET}`)).status).toBe("completed");
    const removed = await agent.deleteSession("gone");
    expect(removed.entries).toBeGreaterThan(0);
    expect((await agent.listSessions()).map((s) => s.sessionId)).not.toContain("gone");
    expect(session.closed).toBe(true);
    expect(inFiles(file, SECRET)).toBe(false);
    const again = await agent.openSession("gone");
    expect(again.entries()).toHaveLength(0);
    await agent.close();
    await store.close();
  });
});
