import { describe, expect, it } from "vitest";
import {
  branchTips,
  exportJsonl,
  fork,
  parseJsonl,
  rollback,
  switchLeaf,
} from "../session/branches.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
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

  it("each move is logged with its operation as the default reason, or the reason given", async () => {
    const log = await openLog();
    const a = log.append(user("a"));
    const tip = log.append(user("b"));
    const reasons: string[] = [];
    for (const move of [
      rollback(log, a.id),
      fork(log, a.id),
      switchLeaf(log, tip.id),
      rollback(log, a.id, { reason: "the user asked to undo" }),
    ]) {
      if (!move.ok) throw new Error(move.message);
      reasons.push(move.leaf.reason);
    }
    expect(reasons).toEqual(["rollback", "fork", "switch", "the user asked to undo"]);
  });

  it("switchLeaf tells the model the files did not change only when asked", async () => {
    const log = await openLog();
    const a = log.append(user("a"));
    const tip = log.append(user("b"));
    rollback(log, a.id, { note: false });
    const quiet = switchLeaf(log, tip.id);
    expect(quiet.ok && quiet.note).toBeNull();
    const told = switchLeaf(log, tip.id, { note: true });
    if (!told.ok) throw new Error(told.message);
    expect(told.note?.text).toBe(
      `The conversation switched to the branch ending at entry ${tip.id}. The work tree (files) did not change with it.`,
    );
    expect(contents(log).at(-1)).toBe(`[Note: ${told.note?.text}]`);
  });

  it("a refusal names the operation, what was wrong and what to do instead", async () => {
    const log = await openLog();
    const a = log.append(user("a"));
    const move = rollback(log, a.id);
    if (!move.ok) throw new Error(move.message);
    expect(fork(log, "nope")).toMatchObject({
      code: "UNKNOWN_ENTRY",
      message:
        "cannot fork to nope: no such entry in session s1; pick an id from session.entries() or branchTips()",
    });
    expect(switchLeaf(log, move.leaf.id)).toMatchObject({
      code: "NOT_A_POSITION",
      message: `cannot switch to ${move.leaf.id}: it is a leaf-move record, not a position; pick an entry of the branch (see branchTips())`,
    });
    log.append({ type: "turn_start", turnId: "t9" });
    expect(rollback(log, a.id)).toMatchObject({
      code: "TURN_OPEN",
      message:
        "cannot rollback while turn t9 is running; interrupt it or await session.awaitIdle() first",
    });
  });

  it("parseJsonl reads Windows line endings and lines of spaces", async () => {
    const log = await openLog();
    log.append(user("a"));
    log.append(user("b"));
    const text = exportJsonl(log).replaceAll("\n", "\r\n");
    expect(parseJsonl(`  \r\n${text}   \n`)).toEqual({ ok: true, entries: log.entries() });
  });

  it("parseJsonl refuses JSON that is not a log entry, by line number, quoting at most 200 characters", () => {
    const entry = { id: "e1", type: "user_message", seq: 1, parentId: null, at: 0, text: "hi" };
    const good = JSON.stringify(entry);
    const { id: _id, ...noId } = entry;
    const { type: _type, ...noType } = entry;
    const { seq: _seq, ...noSeq } = entry;
    for (const bad of [
      "null",
      "5",
      '"e1"',
      "[]",
      JSON.stringify(noId),
      JSON.stringify({ ...noType, type: 7 }),
      JSON.stringify({ ...noSeq, seq: "1" }),
      JSON.stringify(noType),
      JSON.stringify(noSeq),
    ]) {
      const refused = parseJsonl(`${good}\n\n${bad}\n`);
      expect(refused).toMatchObject({ ok: false, code: "INVALID_LINE", line: 3 });
      expect(!refused.ok && refused.message).toMatch(
        /^line 3: not a log entry of schema 3 \(.+\): /,
      );
      expect(!refused.ok && refused.message.endsWith(`: ${bad}`)).toBe(true);
    }
    const long = JSON.stringify({ ...noSeq, text: "x".repeat(300) });
    const refused = parseJsonl(long);
    expect(!refused.ok && refused.message).toBe(
      `line 1: not a log entry of schema 3 (seq: Invalid input: expected number, received undefined): ${long.slice(0, 200)}`,
    );
  });

  it("parseJsonl reports a line that is not JSON with its number and the parser's message", () => {
    const refused = parseJsonl(
      '{"id":"e1","type":"note","seq":1,"parentId":null,"at":0,"text":""}\n{"broken"\n',
    );
    expect(refused).toMatchObject({ ok: false, code: "INVALID_LINE", line: 2 });
    expect(!refused.ok && refused.message).toMatch(/^line 2: not JSON: \S/);
  });
});
