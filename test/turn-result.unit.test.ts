import { describe, expect, it } from "vitest";
import type { LogEntry } from "../session/entries.ts";
import { TurnResults, TurnTally } from "../session/turn-result.ts";

// The one rule for what a turn reports (invariant 15 of docs/architecture.md): its result is read from its log entries,
// by the owner as it appends them and by a follower as it reads them. These state the rule on
// the tally itself, entry by entry; the e2e tests (truthful-results, session-takeover) state it
// through whole sessions.

let seq = 0;
const e = (entry: Record<string, unknown>) =>
  ({ id: `e${++seq}`, seq, at: seq, parentId: null, ...entry }) as unknown as LogEntry;

const start = (turnId: string) => e({ type: "turn_start", turnId });
const attempt = (turnId: string, n = 1) =>
  e({ type: "attempt_start", turnId, attemptId: `${turnId}.a${n}`, step: 0 });
const answer = (
  turnId: string,
  text: string,
  usage?: { inputTokens: number; outputTokens: number },
  cost?: number,
) =>
  e({
    type: "assistant_message",
    turnId,
    content: [
      { type: "text", text },
      { type: "tool-call", id: "c", name: "t", arguments: "{}" },
    ],
    ...(usage ? { usage } : {}),
    ...(cost !== undefined ? { cost } : {}),
  });
const end = (turnId: string, status: string, more: Record<string, unknown> = {}) =>
  e({ type: "turn_end", turnId, status, ...more });
const user = (turnId: string | undefined, inboxId: string | undefined) =>
  e({
    type: "user_message",
    text: "hi",
    ...(turnId ? { turnId } : {}),
    ...(inboxId ? { inboxId } : {}),
  });

describe("TurnTally: a turn's result as its entries say it", () => {
  it("is undefined until the turn's end is seen, then counts steps, sums usage and cost, keeps the last text", () => {
    const t = new TurnTally("t1");
    t.add(attempt("t1"));
    t.add(answer("t1", "first", { inputTokens: 10, outputTokens: 2 }, 0.5));
    t.add(attempt("t1", 2));
    t.add(attempt("t1", 3));
    t.add(answer("t1", "second", { inputTokens: 5, outputTokens: 1 }, 0.25));
    expect(t.ended).toBe(false);
    expect(t.result()).toBeUndefined();
    t.add(end("t1", "completed"));
    expect(t.ended).toBe(true);
    expect(t.result()).toEqual({
      status: "completed",
      text: "second",
      usage: { inputTokens: 15, outputTokens: 3 },
      steps: 3,
      cost: 0.75,
    });
  });

  it("ignores every entry of another turn", () => {
    const t = new TurnTally("t1");
    t.add(attempt("t2"));
    t.add(answer("t2", "not mine", { inputTokens: 9, outputTokens: 9 }, 9));
    t.add(end("t2", "failed", { reason: "other" }));
    expect(t.ended).toBe(false);
    t.add(end("t1", "completed"));
    expect(t.result()).toEqual({
      status: "completed",
      text: "",
      usage: { inputTokens: 0, outputTokens: 0 },
      steps: 0,
    });
  });

  it("an answer without usage or cost adds none; no cost anywhere leaves `cost` out", () => {
    const t = new TurnTally("t1");
    t.add(answer("t1", "a"));
    t.add(answer("t1", "b", { inputTokens: 1, outputTokens: 1 }));
    t.add(end("t1", "completed"));
    const r = t.result()!;
    expect(r.usage).toEqual({ inputTokens: 1, outputTokens: 1 });
    expect("cost" in r).toBe(false);
    expect(r.text).toBe("b");
  });

  it("the last turn_end wins (a refused end is followed by a failed one), with its reason, code and budget", () => {
    const t = new TurnTally("t1");
    t.add(end("t1", "completed"));
    const budget = { scope: "turn", kind: "steps", limit: 1, spent: 1, defaulted: false };
    t.add(end("t1", "failed", { reason: "disk full", code: "STORE_FAILED", budget }));
    expect(t.result()).toEqual({
      status: "failed",
      reason: "disk full",
      code: "STORE_FAILED",
      budget,
      text: "",
      usage: { inputTokens: 0, outputTokens: 0 },
      steps: 0,
    });
    // Absent fields stay absent.
    const plain = new TurnTally("t2");
    plain.add(end("t2", "cancelled"));
    expect(Object.keys(plain.result()!).sort()).toEqual(["status", "steps", "text", "usage"]);
  });

  it("each result is a fresh object: a caller's change does not reach the next", () => {
    const t = new TurnTally("t1");
    t.add(answer("t1", "x", { inputTokens: 1, outputTokens: 1 }));
    t.add(end("t1", "completed"));
    const first = t.result()!;
    first.usage.inputTokens = 1000;
    first.text = "changed";
    expect(t.result()).toMatchObject({ text: "x", usage: { inputTokens: 1, outputTokens: 1 } });
  });
});

describe("TurnResults: a follower's view of the turns that consumed its inputs", () => {
  it("gives each watched input its turn's result once that turn ended, and only once", () => {
    const r = new TurnResults();
    r.watch("in1");
    expect(r.size).toBe(1);
    for (const x of [start("t1"), user("t1", "in1"), attempt("t1"), answer("t1", "done")]) r.add(x);
    expect(r.take()).toEqual([]);
    r.add(end("t1", "completed"));
    expect(r.take()).toEqual([
      {
        inboxId: "in1",
        result: {
          status: "completed",
          text: "done",
          usage: { inputTokens: 0, outputTokens: 0 },
          steps: 1,
        },
      },
    ]);
    expect(r.size).toBe(0);
    expect(r.take()).toEqual([]);
  });

  it("inputs it does not watch, and user messages without an input or a turn, are not tracked", () => {
    const r = new TurnResults();
    r.watch("mine");
    r.add(start("t1"));
    r.add(user("t1", "theirs"));
    r.add(user(undefined, "mine")); // no turn: not consumed by one
    r.add(user("t1", undefined));
    r.add(end("t1", "completed"));
    expect(r.take()).toEqual([]);
    expect(r.size).toBe(1);
    // Consumed later by another turn: answered from that one.
    r.add(start("t2"));
    r.add(user("t2", "mine"));
    r.add(answer("t2", "yours"));
    r.add(end("t2", "failed", { reason: "why" }));
    expect(r.take()).toEqual([
      {
        inboxId: "mine",
        result: {
          status: "failed",
          reason: "why",
          text: "yours",
          usage: { inputTokens: 0, outputTokens: 0 },
          steps: 0,
        },
      },
    ]);
  });

  it("unwatch stops waiting: the input's turn ending gives nothing", () => {
    const r = new TurnResults();
    r.watch("in1");
    r.unwatch("in1");
    expect(r.size).toBe(0);
    for (const x of [start("t1"), user("t1", "in1"), end("t1", "completed")]) r.add(x);
    expect(r.take()).toEqual([]);
  });

  it("entries of a turn whose start it did not see, and entries without a turn, change nothing", () => {
    const r = new TurnResults();
    r.watch("in1");
    r.add(user("t9", "in1"));
    r.add(end("t9", "completed")); // no turn_start of t9 was read: no tally
    r.add(e({ type: "inbox", id: "x", lane: "next-turn", body: "hi" }));
    expect(r.take()).toEqual([]);
    expect(r.size).toBe(1);
  });

  it("two inputs of one turn each get its result; ended turns no input waits for are dropped", () => {
    const r = new TurnResults();
    r.watch("a");
    r.watch("b");
    r.add(start("t0"));
    r.add(end("t0", "completed")); // nobody's: dropped at the next take
    r.add(start("t1"));
    r.add(user("t1", "a"));
    r.add(user("t1", "b"));
    r.add(end("t1", "completed"));
    const got = r.take();
    expect(got.map((g) => g.inboxId).sort()).toEqual(["a", "b"]);
    expect(got.every((g) => g.result.status === "completed")).toBe(true);
    // t0's tally is gone: a late input naming it is never answered from it.
    r.watch("late");
    r.add(user("t0", "late"));
    expect(r.take()).toEqual([]);
  });

  it("an open turn no input is known to belong to yet keeps its tally across a take", () => {
    const r = new TurnResults();
    r.watch("in1");
    r.add(start("t1"));
    r.add(attempt("t1"));
    expect(r.take()).toEqual([]); // its user message is not read yet
    r.add(user("t1", "in1"));
    r.add(end("t1", "completed"));
    expect(r.take()).toMatchObject([{ inboxId: "in1", result: { status: "completed", steps: 1 } }]);
  });

  it("an open turn's tally is kept across takes until it ends", () => {
    const r = new TurnResults();
    r.watch("in1");
    r.add(start("t1"));
    r.add(user("t1", "in1"));
    r.add(attempt("t1"));
    expect(r.take()).toEqual([]);
    r.add(attempt("t1", 2));
    r.add(end("t1", "completed"));
    expect(r.take()[0]?.result.steps).toBe(2);
  });
});
