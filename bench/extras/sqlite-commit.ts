/**
 * What a commit of the SQLite store costs with the schema of version 1 (a `sessions` summary row
 * upserted by every append) against version 2 (the summary read from `entries`): the same batch
 * of 3 entries, both files in one process, rounds interleaved. WAL, `synchronous=NORMAL` (the
 * "process" durability). `npx tsx bench/extras/sqlite-commit.ts`
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";

const dir = mkdtempSync(join(tmpdir(), "keel-commit-"));
const body = JSON.stringify({ type: "tool_result", text: "x".repeat(250) });

/** Version 1's append, by hand: the entries and the summary upsert, one IMMEDIATE transaction. */
function version1(): () => void {
  const db = new Database(join(dir, "v1.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.exec(`CREATE TABLE sessions (session_id TEXT PRIMARY KEY, created_at REAL NOT NULL,
    updated_at REAL NOT NULL, entries INTEGER NOT NULL, last_seq INTEGER NOT NULL);
  CREATE TABLE entries (session_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL,
    parent_id TEXT, type TEXT NOT NULL, at REAL NOT NULL, body TEXT NOT NULL, PRIMARY KEY (session_id, seq));
  CREATE UNIQUE INDEX entries_by_id ON entries (session_id, id);`);
  const last = db.prepare("SELECT last_seq FROM sessions WHERE session_id = ?");
  const insert = db.prepare("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)");
  const upsert = db.prepare(`INSERT INTO sessions VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id)
    DO UPDATE SET updated_at = excluded.updated_at, entries = entries + excluded.entries, last_seq = excluded.last_seq`);
  let seq = 0;
  const tx = db.transaction(() => {
    last.get("s");
    for (let i = 0; i < 3; i++) {
      seq++;
      insert.run("s", seq, `e${seq}`, null, "tool_result", seq, body);
    }
    upsert.run("s", 1, seq, 3, seq);
  });
  return () => tx.immediate();
}

/** Version 2's append, by hand: the last seq read from `entries`, the session's row kept (no write once there), the entries. */
function version2(): () => void {
  const db = new Database(join(dir, "v2.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.exec(`CREATE TABLE sessions (session_id TEXT PRIMARY KEY, created_at REAL NOT NULL);
  CREATE TABLE entries (session_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL,
    parent_id TEXT, type TEXT NOT NULL, at REAL NOT NULL, body TEXT NOT NULL, PRIMARY KEY (session_id, seq));
  CREATE UNIQUE INDEX entries_by_id ON entries (session_id, id);
  INSERT INTO sessions VALUES ('s', 1);`);
  const last = db.prepare("SELECT max(seq) FROM entries WHERE session_id = ?").pluck();
  const insert = db.prepare("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)");
  const begin = db.prepare(
    "INSERT INTO sessions VALUES (?, ?) ON CONFLICT (session_id) DO NOTHING",
  );
  let seq = 0;
  const tx = db.transaction(() => {
    last.get("s");
    begin.run("s", 1);
    for (let i = 0; i < 3; i++) {
      seq++;
      insert.run("s", seq, `e${seq}`, null, "tool_result", seq, body);
    }
  });
  return () => tx.immediate();
}

const a = version1();
const b = version2();
const N = 3000;
const ratios: number[] = [];
for (let round = 0; round < 9; round++) {
  let t = performance.now();
  for (let i = 0; i < N; i++) a();
  const v1 = ((performance.now() - t) * 1000) / N;
  t = performance.now();
  for (let i = 0; i < N; i++) b();
  const v2 = ((performance.now() - t) * 1000) / N;
  ratios.push(v2 / v1);
  console.log(
    `version 1 ${v1.toFixed(1)} µs/commit, version 2 ${v2.toFixed(1)} µs/commit, ${(v2 / v1).toFixed(2)}×`,
  );
}
ratios.sort((x, y) => x - y);
console.log(`median version 2 / version 1: ${ratios[4].toFixed(2)}×`);
rmSync(dir, { recursive: true, force: true });
