import { describe, expect, it } from "vitest";
import {
  branchTips,
  exportJsonl,
  fork,
  parseJsonl,
  rollback,
  switchLeaf,
} from "../session/branches.ts";
import { memoryStore } from "../session/memory-store.ts";
import { openLog, user } from "./session-fixtures.ts";

const contents = (log: Awaited<ReturnType<typeof openLog>>) => log.messages().map((m) => m.content);

describe("branches", () => {
  it("rollback moves the leaf back, rolls settings back with messages, and tells the model the files did not roll back", async () => {
    const store = memoryStore();
    const log = await openLog(store);
    log.append({ type: "settings", settings: { model: "a" } });
    const first = log.append(user("first"));
    log.append({ type: "settings", settings: { model: "b" } });
    log.append(user("second"));
    const out = rollback(log, first.id);
    expect(out.ok).toBe(true);
    expect(log.settings()).toEqual({ model: "a" });
    expect(contents(log)).toEqual([
      "first",
      expect.stringMatching(/work tree .*did NOT roll back/),
    ]);
    log.append(user("redo"));
    expect(contents(log).at(-1)).toBe("redo");
    await log.flush();
    const reopened = await openLog(store, "s1", 2);
    expect(reopened.messages()).toEqual(log.messages());
    expect(reopened.settings()).toEqual({ model: "a" });
  });

  it("the abandoned branch stays in the log and switchLeaf returns to it with its settings", async () => {
    const log = await openLog();
    const first = log.append(user("first"));
    log.append({ type: "settings", settings: { mode: "x" } });
    const tip = log.append(user("old tip"));
    rollback(log, first.id, { note: false });
    log.append(user("new branch"));
    expect(log.settings()).toEqual({});
    expect(switchLeaf(log, tip.id).ok).toBe(true);
    expect(contents(log)).toEqual(["first", "old tip"]);
    expect(log.settings()).toEqual({ mode: "x" });
    expect(branchTips(log).map((e) => (e as { text?: string }).text)).toEqual([
      "old tip",
      "new branch",
    ]);
  });

  it("fork starts a sibling branch from an entry and keeps the original", async () => {
    const log = await openLog();
    const a = log.append(user("a"));
    log.append(user("b"));
    const out = fork(log, a.id);
    if (!out.ok) throw new Error(out.message);
    const c = log.append(user("c"));
    expect(log.path().map((e) => e.id)).toEqual([a.id, out.note!.id, c.id]);
    expect(log.entries().filter((e) => e.parentId === a.id).length).toBe(2);
    expect(out.note?.text).toMatch(/forked from entry/);
  });

  it("rollback to the root empties the conversation except the note", async () => {
    const log = await openLog();
    log.append(user("a"));
    rollback(log, null);
    expect(log.messages()).toEqual([
      { role: "user", content: expect.stringMatching(/rolled back to entry root/) },
    ]);
  });

  it("branch moves are refused as values: while a turn is open, to an unknown entry, to a leaf record", async () => {
    const log = await openLog();
    const a = log.append(user("a"));
    const move = rollback(log, a.id);
    expect(rollback(log, "nope")).toMatchObject({
      ok: false,
      code: "UNKNOWN_ENTRY",
      message: expect.stringContaining("nope"),
    });
    if (!move.ok) throw new Error(move.message);
    expect(switchLeaf(log, move.leaf.id)).toMatchObject({ ok: false, code: "NOT_A_POSITION" });
    log.append({ type: "turn_start", turnId: "t9" });
    expect(fork(log, a.id)).toMatchObject({
      ok: false,
      code: "TURN_OPEN",
      message: expect.stringContaining("t9"),
    });
  });

  it("exportJsonl writes one entry per line and parseJsonl reads it back; a bad line is reported by number", async () => {
    const log = await openLog();
    log.append(user("a"));
    rollback(log, null);
    const text = exportJsonl(log);
    expect(text.split("\n").length).toBe(log.entries().length + 1);
    expect(parseJsonl(text)).toEqual({ ok: true, entries: log.entries() });
    expect(parseJsonl(`${text}{"broken"\n`)).toMatchObject({
      ok: false,
      code: "INVALID_LINE",
      line: 4,
    });
    expect(parseJsonl('{"a":1}\n')).toMatchObject({
      ok: false,
      code: "INVALID_LINE",
      line: 1,
      message: expect.stringContaining("not a log entry"),
    });
  });
});
