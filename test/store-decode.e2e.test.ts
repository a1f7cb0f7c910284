// Stored entries are decoded, not cast (session/decode.ts): a damaged, unknown or newer entry in
// a real SQLite file or PostgreSQL server is a StoreError at load that names the session and the
// seq, and a session records which Keel wrote it.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { seededIds } from "../actors/ids.ts";
import { KEEL_VERSION } from "../contracts/version.ts";
import { LOG_SCHEMA_VERSION } from "../session/entries.ts";
import { SessionLog } from "../session/log.ts";
import type { SessionStore } from "../session/store.ts";
import { StoreError } from "../session/store-error.ts";
import { postgresStore } from "../session/stores/postgres-store.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { countingClock, user } from "./session-fixtures.ts";
import { freshSchema } from "./support/postgres-server.ts";
import { usePostgres } from "./support/use-postgres.ts";

const pgdb = usePostgres();
const dir = mkdtempSync(join(tmpdir(), "keel-decode-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let n = 0;
const open = (store: SessionStore, sessionId: string, checkpoints?: false) =>
  SessionLog.open({ sessionId, store, clock: countingClock(), ids: seededIds(++n), checkpoints });

/** Writes a session of three user messages; returns the store's file. */
async function sqliteSession(sessionId: string): Promise<string> {
  const path = join(dir, `${sessionId}.db`);
  const store = sqliteStore(path);
  const log = await open(store, sessionId, false);
  for (const text of ["one", "two", "three"]) log.append(user(text));
  await log.flush();
  await store.close();
  return path;
}

/** Replaces the body of entry `seq` in the file, as damage or another program would. */
function writeBody(path: string, sessionId: string, seq: number, body: string): void {
  const db = new Database(path);
  try {
    db.prepare("UPDATE entries SET body = ? WHERE session_id = ? AND seq = ?").run(
      body,
      sessionId,
      seq,
    );
  } finally {
    db.close();
  }
}

/** The StoreError `fn` rejects with. */
async function refusal(fn: () => Promise<unknown>): Promise<StoreError> {
  const error = await fn().then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StoreError);
  return error as StoreError;
}

/** The body of a newer Keel's entry: a writer with the next log schema, and a type of its own. */
const newerBody = (seq: number) =>
  JSON.stringify({
    id: `e${seq}`,
    parentId: null,
    seq,
    at: 1,
    type: "thought",
    writer: { keel: "9.0.0", schema: LOG_SCHEMA_VERSION + 1 },
  });

describe("decoding stored entries (SQLite)", () => {
  it("garbage in an entry's row is a CORRUPT StoreError naming the file, session and seq, at open", async () => {
    const path = await sqliteSession("s1");
    writeBody(path, "s1", 2, "{not json");
    const store = sqliteStore(path);
    const error = await refusal(() => open(store, "s1", false));
    expect(error.code).toBe("CORRUPT");
    expect(error.message).toContain(`sqlite store ${path}: session s1, entry seq 2 is not JSON`);
    await expect(store.load("s1")).rejects.toThrow(/session s1, entry seq 2/);
    await store.close();
  });

  it("a field of the wrong type, an unknown type and a seq that is not the row's are each named", async () => {
    const path = await sqliteSession("s2");
    const store = sqliteStore(path);
    const [, second] = await store.load("s2");
    await store.close();
    const cases: [string, RegExp][] = [
      [JSON.stringify({ ...second, text: 7 }), /entry seq 2 .*: text: .*expected string/],
      [
        JSON.stringify({ ...second, type: "mystery" }),
        /entry seq 2 .*unknown entry type "mystery"/,
      ],
      [JSON.stringify({ ...second, seq: 5 }), /entry seq 2 .*body says seq 5/],
      ["[1,2]", /entry seq 2 .*not a JSON object/],
    ];
    for (const [body, message] of cases) {
      writeBody(path, "s2", 2, body);
      const reopened = sqliteStore(path);
      const error = await refusal(() => reopened.load("s2"));
      expect(error.code).toBe("CORRUPT");
      expect(error.message).toMatch(message);
      await reopened.close();
    }
  });

  it("a damaged entry after a checkpoint fails the open; one before it fails when history is read", async () => {
    const path = join(dir, "ckpt.db");
    const store = sqliteStore(path);
    const log = await open(store, "c");
    log.append(user("one"));
    log.append(user("two"));
    await log.close(); // checkpoint at seq 2
    log.append(user("three"));
    await log.flush();
    const good = (await store.load("c"))[2];
    await store.close();
    writeBody(path, "c", 3, '{"id":');
    const first = sqliteStore(path);
    expect((await refusal(() => open(first, "c"))).message).toMatch(/session c, entry seq 3/);
    await first.close();
    writeBody(path, "c", 3, JSON.stringify(good));
    writeBody(path, "c", 1, "null");
    const second = sqliteStore(path);
    const reopened = await open(second, "c");
    const error = await refusal(() => reopened.loadHistory());
    expect(error.message).toMatch(/session c, entry seq 1 .*not a JSON object/);
    await second.close();
  });

  it("a session records the Keel and log schema that wrote it; an older Keel refuses a newer one's log", async () => {
    const path = await sqliteSession("w");
    const store = sqliteStore(path);
    const entries = await store.load("w");
    expect(entries[0].writer).toEqual({ keel: KEEL_VERSION, schema: LOG_SCHEMA_VERSION });
    expect(entries.slice(1).map((e) => e.writer)).toEqual([undefined, undefined]);
    // The same Keel reopening the session does not stamp again.
    const log = await open(store, "w", false);
    log.append(user("four"));
    await log.flush();
    expect((await store.load("w"))[3].writer).toBeUndefined();
    await store.close();
    writeBody(path, "w", 2, newerBody(2));
    const older = sqliteStore(path);
    const error = await refusal(() => open(older, "w", false));
    expect(error.code).toBe("NEWER_SCHEMA");
    expect(error.message).toBe(
      `sqlite store ${path}: session w, entry seq 2: it was written by Keel 9.0.0 in log schema ${LOG_SCHEMA_VERSION + 1}; this Keel (${KEEL_VERSION}) reads log schema ${LOG_SCHEMA_VERSION} and older: upgrade Keel to 9.0.0 or later to open this session`,
    );
    await older.close();
  });

  it("a checkpoint a newer Keel wrote is refused, naming the session, not replayed past", async () => {
    const path = join(dir, "newer-ckpt.db");
    const store = sqliteStore(path);
    const log = await open(store, "k");
    log.append(user("one"));
    await log.close();
    await store.close();
    const db = new Database(path);
    const body = db.prepare("SELECT body FROM checkpoints WHERE session_id = 'k'").pluck().get();
    const checkpoint = JSON.parse(String(body));
    expect(checkpoint.writer).toEqual({ keel: KEEL_VERSION, schema: LOG_SCHEMA_VERSION });
    checkpoint.writer = { keel: "9.0.0", schema: LOG_SCHEMA_VERSION + 1 };
    db.prepare("UPDATE checkpoints SET body = ?").run(JSON.stringify(checkpoint));
    db.close();
    const older = sqliteStore(path);
    const error = await refusal(() => open(older, "k"));
    expect(error.code).toBe("NEWER_SCHEMA");
    expect(error.message).toMatch(/^sqlite store: session k: it was written by Keel 9\.0\.0/);
    await older.close();
  });
});

describe.skipIf(!pgdb.mode.run)("decoding stored entries (PostgreSQL)", () => {
  it("a damaged, an unknown and a newer entry are each a StoreError naming the session and seq", async () => {
    const schema = freshSchema("decode");
    const store = await postgresStore(pgdb.url(), { schema, max: 2 });
    pgdb.stores.push(store);
    const log = await open(store, "p", false);
    for (const text of ["one", "two", "three"]) log.append(user(text));
    await log.flush();
    const write = (seq: number, body: string) =>
      store.pool.query(
        `UPDATE ${store.schema}.entries SET body = $1 WHERE session_id = 'p' AND seq = $2`,
        [body, seq],
      );
    await write(3, "garbage");
    let error = await refusal(() => open(store, "p", false));
    expect(error.code).toBe("CORRUPT");
    expect(error.message).toMatch(/^postgres store .*: session p, entry seq 3 is not JSON/);
    await write(3, JSON.stringify({ id: "x", parentId: null, seq: 3, at: 1, type: "dream" }));
    error = await refusal(() => store.loadAfter!("p", 1));
    expect(error.message).toMatch(/session p, entry seq 3 .*unknown entry type "dream"/);
    await write(2, newerBody(2));
    error = await refusal(() => store.load("p"));
    expect(error.code).toBe("NEWER_SCHEMA");
    expect(error.message).toMatch(/session p, entry seq 2: it was written by Keel 9\.0\.0/);
  });
});
