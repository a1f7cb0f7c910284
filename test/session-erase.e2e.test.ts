import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { redactSession, redactStoredSession } from "../actors/redact-session.ts";
import { systemClock } from "../contracts/clock.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { EntryOf, LogEntry } from "../session/entries.ts";
import { canErase, hasLeases, type SessionStore } from "../session/store.ts";
import type { Ledger } from "../session/stores/ledger.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { postgresLedger } from "../session/stores/postgres-ledger.ts";
import { type PostgresSessionStore, postgresStore } from "../session/stores/postgres-store.ts";
import { sqliteDatabase } from "../session/stores/sqlite-handle.ts";
import { sqliteLedger } from "../session/stores/sqlite-ledger.ts";
import { type SqliteSessionStore, sqliteStore } from "../session/stores/sqlite-store.ts";
import { defineTool } from "../tools/define-tool.ts";
import { freshSchema } from "./support/postgres-server.ts";
import { usePostgres } from "./support/use-postgres.ts";

const pg = usePostgres();
const SECRET = "sk-live-ERASE-ME-7f3a9c";
const KEPT = "KEEP-ME-4411";

const dirs: string[] = [];
const tmp = () => {
  const dir = mkdtempSync(path.join(tmpdir(), "keel-erase-"));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Harness {
  name: string;
  open(): Promise<{ store: SessionStore; ledger?: Ledger; file?: string }>;
}

const harnesses: Harness[] = [
  { name: "memory", open: async () => ({ store: memoryStore() }) },
  {
    name: "sqlite",
    async open() {
      const file = path.join(tmp(), "keel.db");
      const store = sqliteStore(file);
      return { store, file, ledger: sqliteLedger(store, { clock: systemClock }) };
    },
  },
  ...(pg.mode.run
    ? [
        {
          name: "postgres",
          async open() {
            const store = await postgresStore(pg.url(), { schema: freshSchema(), max: 4 });
            pg.stores.push(store);
            return { store, ledger: postgresLedger(store, { clock: systemClock }) };
          },
        },
      ]
    : []),
];

/**
 * A tool that logs in with a key: its output (far over its budget, so spilled to a file) and its
 * ledger row (keyed by the call's idempotency key) both carry the key.
 */
const loginTool = (ledger: Ledger | undefined) =>
  defineTool({
    name: "login",
    description: "Logs in with a key.",
    parameters: z.object({ key: z.string() }),
    traits: { outputBudget: { maxBytes: 200, overflow: "spill" } },
    async execute({ key }, ctx) {
      const out = `${"session token for ".repeat(20)}${key}\n`.repeat(10);
      if (!ledger) return out;
      const run = await ledger.run("login", ctx.idempotencyKey, { key }, () => out);
      return run.type === "failed" ? run.failure.message : run.result;
    },
  });

/** One session that saw `secret` in the prompt, the tool's arguments and output, and the answer. */
async function converse(
  store: SessionStore,
  id: string,
  secret: string,
  dataDir: string,
  ledger?: Ledger,
) {
  const model = scriptedModel([
    { toolCalls: [{ id: "c1", name: "login", arguments: JSON.stringify({ key: secret }) }] },
    { text: `Logged in with ${secret}.` },
  ]);
  const agent = createAgent({ model, store, dataDir, tools: [loginTool(ledger)] });
  const session = await agent.openSession(id);
  expect((await session.prompt(`my key is ${secret}`)).status).toBe("completed");
  return { agent, session, model };
}

const bytesOf = (file: string) =>
  [file, `${file}-wal`].map((f) => (existsSync(f) ? readFileSync(f) : Buffer.alloc(0)));
const inFiles = (file: string, text: string) => bytesOf(file).some((b) => b.includes(text));
/** Moves everything in the WAL into the database file (as an automatic checkpoint would). */
const checkpointWal = (store: SessionStore) =>
  sqliteDatabase(store as SqliteSessionStore).pragma("wal_checkpoint(TRUNCATE)");

describe.each(harnesses)("deleting a session: $name", (h) => {
  it("removes its entries, checkpoint, posted inputs, lease and ledger rows and its spilled files; another session is untouched", async () => {
    const { store, ledger } = await h.open();
    expect(canErase(store)).toBe(true);
    const dataDir = tmp();
    const kept = await converse(store, "other", KEPT, dataDir, ledger);
    await kept.agent.close();
    const keptEntries = await store.load("other");
    const { agent, session } = await converse(store, "gone", SECRET, dataDir, ledger);
    const spilled = session
      .entries()
      .find((e): e is EntryOf<"call_result"> => e.type === "call_result");
    const spillFile = spilled?.result.ok ? spilled.result.continuation?.path : undefined;
    expect(spillFile && readFileSync(spillFile, "utf8")).toContain(SECRET);
    const key = session
      .entries()
      .find((e): e is EntryOf<"call_started"> => e.type === "call_started")!.idempotencyKey;
    if (ledger) expect(await ledger.get("login", key)).toBeDefined();
    // Closed first, so that no owner moves the posted input into the log meanwhile.
    await agent.closeSession("gone");
    if (hasLeases(store))
      await store.postInput("gone", {
        id: "p1",
        lane: "next-turn",
        source: "job",
        body: `later ${SECRET}`,
      });

    const stored = (await store.load("gone")).length;
    expect(stored).toBeGreaterThan(5);
    const removed = await agent.deleteSession("gone");

    expect(removed).toMatchObject({
      sessionId: "gone",
      entries: stored,
      checkpoints: 1,
      inputs: hasLeases(store) ? 1 : 0,
      leases: hasLeases(store) ? 1 : 0,
      ledgerRows: ledger ? 1 : 0,
      folder: path.join(dataDir, "sessions", "gone"),
    });
    expect(await store.load("gone")).toEqual([]);
    expect((await store.list()).map((s) => s.sessionId)).toEqual(["other"]);
    expect(await store.load("other")).toEqual(keptEntries);
    if (ledger) expect(await ledger.get("login", key)).toBeUndefined();
    if (hasLeases(store)) {
      expect(await store.postedInputs("gone")).toEqual([]);
      expect(await store.readLease("gone")).toBeNull();
      expect(await store.readLease("other")).not.toBeNull();
    }
    expect(existsSync(spillFile!)).toBe(false);
    expect(existsSync(path.join(dataDir, "sessions", "other"))).toBe(true);
    // Opened again, it is a new, empty session.
    const again = await agent.openSession("gone");
    expect(again.entries()).toEqual([]);
    // Deleting what is not there removes nothing.
    await agent.closeSession("gone");
    expect(await agent.deleteSession("gone")).toMatchObject({
      entries: 0,
      checkpoints: 0,
      ledgerRows: 0,
    });
    await agent.close();
  });

  // The memory store has no leases: a test only of the stores that do.
  if (h.name !== "memory")
    it("is refused while another runner holds the session's lease, and then nothing is removed", async () => {
      const { store } = await h.open();
      if (!hasLeases(store)) throw new Error("expected a lease store");
      const { agent } = await converse(store, "owned", SECRET, tmp());
      await agent.close();
      const before = await store.load("owned");
      const lease = await store.acquireLease("owned", "another-host:42", 60_000);
      expect(lease).not.toBeNull();
      await expect(store.deleteSession!("owned")).rejects.toMatchObject({
        name: "StoreError",
        code: "FENCED",
        message: expect.stringContaining("is run by another-host:42, which holds its lease"),
      });
      await expect(
        store.redactEntries!("owned", [before[0].id], { reason: "r", at: 1 }),
      ).rejects.toMatchObject({ code: "FENCED" });
      // The holder itself may redact, with its lease.
      await store.redactEntries!(
        "owned",
        [before.find((e) => e.type === "user_message")!.id],
        { reason: "r", at: 1 },
        { lease: lease! },
      );
      expect((await store.load("owned")).length).toBe(before.length);
      await store.releaseLease(lease!);
    });
});

describe("SQLite: the bytes leave the file and its write-ahead log", () => {
  it("after deleteSession, the secret is in neither the database file nor the WAL, whether it was still in the WAL or already in the file", async () => {
    for (const moved of [false, true]) {
      const { store, file, ledger } = await harnesses[1].open();
      const dataDir = tmp();
      const other = await converse(store, "other", KEPT, dataDir, ledger);
      await other.agent.close();
      const { agent } = await converse(store, "gone", SECRET, dataDir, ledger);
      await agent.closeSession("gone"); // writes its checkpoint: the projection, with the secret
      if (moved) checkpointWal(store);
      expect(inFiles(file!, SECRET), "the secret is there before").toBe(true);
      await agent.deleteSession("gone");
      expect(inFiles(file!, SECRET), `moved to the file first: ${moved}`).toBe(false);
      expect(inFiles(file!, KEPT)).toBe(true);
      expect(readFileSync(`${file}-wal`).length).toBe(0);
      await agent.close();
      await store.close();
      expect(inFiles(file!, SECRET)).toBe(false);
    }
  });

  it("after a redaction, the secret is in neither file, the log keeps its shape, and the session reopens showing the marker", async () => {
    for (const moved of [false, true]) {
      // No ledger here: its row keeps the tool's result until the session is deleted (docs/stores.md).
      const { store, file } = await harnesses[1].open();
      const dataDir = tmp();
      const { agent, session } = await converse(store, "s", SECRET, dataDir);
      await session.sessionLog.close(); // a checkpoint with the secret in its projection
      if (moved) checkpointWal(store);
      expect(inFiles(file!, SECRET)).toBe(true);
      const before = session.entries().slice();
      const user = before.find((e) => e.type === "user_message")!;
      const answer = before.filter((e) => e.type === "assistant_message");
      const result = before.find((e) => e.type === "call_result")!;
      const done = await redactSession(
        session.sessionLog,
        [user.id, result.id, ...answer.map((e) => e.id)],
        { reason: "a pasted API key" },
        () => 42,
      );
      expect(done).toMatchObject({ ok: true });
      expect(inFiles(file!, SECRET), `moved to the file first: ${moved}`).toBe(false);
      const after = await store.load("s");
      expect(after.map((e) => [e.id, e.seq, e.parentId, e.type])).toEqual(
        before.map((e) => [e.id, e.seq, e.parentId, e.type]),
      );
      await agent.close();
      const reopened = sqliteStore(file!);
      const model = scriptedModel([{ text: "ok" }]);
      const again = await createAgent({ model, store: reopened }).openSession("s");
      expect(JSON.stringify(again.history())).not.toContain(SECRET);
      expect(JSON.stringify(again.history())).toContain("[redacted: a pasted API key]");
      await again.prompt("go on");
      expect(JSON.stringify(model.requests[0].history)).not.toContain(SECRET);
      await again.close();
      await reopened.close();
      await store.close();
    }
  });
});

describe("redacting a live session (redactSession, what session.redact runs)", () => {
  it.each(harnesses.map((h) => [h.name, h] as const))(
    "%s: the next request shows the marker where the secret was, every call still has its result, and the spilled output file is removed",
    async (_name, h) => {
      const { store, ledger } = await h.open();
      const dataDir = tmp();
      const { agent, session, model } = await converse(store, "live", SECRET, dataDir, ledger);
      const entries = session.entries();
      const user = entries.find((e) => e.type === "user_message")!;
      const answer = entries.find(
        (e) => e.type === "assistant_message" && e.content.some((p) => p.type === "tool-call"),
      )!;
      const result = entries.find((e): e is EntryOf<"call_result"> => e.type === "call_result")!;
      const spill = result.result.ok ? result.result.continuation?.path : undefined;
      const last = entries.filter((e) => e.type === "assistant_message").at(-1)!;
      expect(JSON.stringify(session.history())).toContain(SECRET);

      const done = await redactSession(
        session.sessionLog,
        [user.id, answer.id, result.id, last.id],
        { reason: "a pasted API key" },
        () => 7,
      );
      if (!done.ok) throw new Error(done.message);
      // The call's start record went with the message that asked for it.
      const started = entries.find((e) => e.type === "call_started")!;
      expect(done.redacted).toEqual(
        expect.arrayContaining([user.id, answer.id, started.id, result.id, last.id]),
      );
      expect(done.files).toEqual([spill]);
      expect(existsSync(spill!)).toBe(false);
      // The fresh checkpoint may let the log drop history; a PostgreSQL store reads it back async.
      await session.sessionLog.loadHistory();
      expect(JSON.stringify(session.history())).not.toContain(SECRET);
      expect(JSON.stringify(session.entries())).not.toContain(SECRET);
      expect(JSON.stringify(await store.load("live"))).not.toContain(SECRET);
      expect(session.entries().find((e) => e.id === user.id)).toMatchObject({
        text: "[redacted: a pasted API key]",
        redacted: { reason: "a pasted API key", at: 7 },
      });
      const tools = session.history().filter((m) => m.role === "tool");
      expect(tools).toHaveLength(1);

      model.reset();
      const next = scriptedModel([{ text: "fine" }]);
      const again = createAgent({ model: next, store, dataDir });
      await agent.closeSession("live");
      const reopened = await again.openSession("live");
      expect((await reopened.prompt("and now?")).status).toBe("completed");
      const sent = JSON.stringify(next.requests[0].history);
      expect(sent).not.toContain(SECRET);
      expect(sent).toContain("[redacted: a pasted API key]");
      await again.close();
      await agent.close();
    },
  );

  it("refuses an unknown entry, a structural record and an input still queued; nothing changes", async () => {
    const store = memoryStore();
    const { session } = await converse(store, "q", SECRET, tmp());
    const log = session.sessionLog;
    const turnEnd = session.entries().find((e) => e.type === "turn_end")!;
    const now = () => 1;
    expect(await redactSession(log, ["nope"], { reason: "x" }, now)).toMatchObject({
      ok: false,
      code: "UNKNOWN_ENTRY",
    });
    expect(await redactSession(log, [turnEnd.id], { reason: "x" }, now)).toMatchObject({
      ok: false,
      code: "NOT_REDACTABLE",
    });
    log.append({
      type: "inbox",
      inboxId: "later",
      source: "user",
      lane: "next-turn",
      body: SECRET,
    });
    const queued = log.entries().at(-1)!;
    expect(await redactSession(log, [queued.id], { reason: "x" }, now)).toMatchObject({
      ok: false,
      code: "NOT_REDACTABLE",
      message: expect.stringContaining("input later (entry"),
    });
    expect(JSON.stringify(await store.load("q"))).toContain(SECRET);
    await expect(redactSession(log, [], { reason: "x" }, now)).rejects.toThrow(
      /entryIds must be a non-empty array/,
    );
    await expect(redactSession(log, [queued.id], { reason: "" }, now)).rejects.toThrow(
      /reason must be one line/,
    );
  });

  it("redactStoredSession redacts a session no process holds open", async () => {
    const { store, file } = await harnesses[1].open();
    const { agent, session } = await converse(store, "cold", SECRET, tmp());
    const user = session.entries().find((e) => e.type === "user_message")!;
    const inbox = session.entries().find((e) => e.type === "inbox")!;
    await agent.close();
    const done = await redactStoredSession(store, "cold", [user.id], {
      reason: "pasted by mistake",
    });
    // The prompt's inbox entry holds the same text: it goes too.
    expect(done).toMatchObject({ ok: true, redacted: [inbox.id, user.id] });
    const stored = (await store.load("cold")) as LogEntry[];
    expect(stored.find((e) => e.id === user.id)).toMatchObject({
      text: "[redacted: pasted by mistake]",
    });
    await store.close();
    expect(file).toBeDefined();
  });
});

describe("PostgreSQL", () => {
  it.runIf(pg.mode.run)(
    "after deletion no row of the session is left in any of Keel's tables; after redaction no row holds the secret",
    async () => {
      const schema = freshSchema();
      const store: PostgresSessionStore = await postgresStore(pg.url(), { schema, max: 4 });
      pg.stores.push(store);
      const ledger = postgresLedger(store, { clock: systemClock });
      const { agent, session } = await converse(store, "pg", SECRET, tmp(), ledger);
      const user = session.entries().find((e) => e.type === "user_message")!;
      await redactSession(session.sessionLog, [user.id], { reason: "r" }, () => 1);
      const s = `"${schema}"`;
      const rows = async (table: string, filter = "session_id = 'pg'") =>
        (await store.pool.query(`SELECT * FROM ${s}.${table} WHERE ${filter}`)).rows;
      const text = async () =>
        JSON.stringify(await rows("entries")) + JSON.stringify(await rows("checkpoints"));
      expect(await text()).toContain("[redacted: r]");
      expect(JSON.stringify(await rows("entries", "type = 'user_message'"))).not.toContain(SECRET);
      await agent.deleteSession("pg");
      for (const table of ["entries", "checkpoints", "inbox", "leases", "sessions"])
        expect(await rows(table), table).toEqual([]);
      expect((await store.pool.query(`SELECT * FROM ${s}.ledger`)).rows).toEqual([]);
      await agent.close();
    },
  );
});
