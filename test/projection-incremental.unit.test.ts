import { describe, expect, it } from "vitest";
import type { AssistantPart, Message } from "../contracts/messages.ts";
import type { EntryInput, LogEntry } from "../session/entries.ts";
import { EDITED_OUT_RESULT_TEXT, NO_RESULT_TEXT, Projection } from "../session/projection.ts";
import { assistant, call, openLog, result, started, step, user } from "./session-fixtures.ts";

/**
 * Feeds `path[from..]` to `start` as the session log does: `apply` each entry (an edit with its
 * target), and rebuild with `fromPath` when `apply` says the view changed otherwise. Returns the
 * projection and the ids of the entries that asked for a rebuild.
 */
function follow(path: readonly LogEntry[], start = new Projection(), from = 0) {
  const byId = new Map(path.map((e) => [e.id, e]));
  let p = start;
  const rebuilt: string[] = [];
  for (let i = from; i < path.length; i++) {
    const e = path[i];
    const target = e.type === "context_edit" ? byId.get(e.targetId) : undefined;
    if (!p.apply(e, target)) {
      rebuilt.push(e.id);
      p = Projection.fromPath(path.slice(0, i + 1));
    }
  }
  return { p, rebuilt };
}

/** What `apply` answers for the last entry of `path`, after the rest was followed. */
function applyLast(path: readonly LogEntry[]): boolean {
  const { p } = follow(path.slice(0, -1));
  const e = path[path.length - 1];
  const target = e.type === "context_edit" ? path.find((t) => t.id === e.targetId) : undefined;
  return p.apply(e, target);
}

const edit = (targetId: string, replacement: string | null): EntryInput => ({
  type: "context_edit",
  targetId,
  replacement,
});

const tool = (m: Message) => (m.role === "tool" ? m.content[0] : undefined);

describe("incremental projection: what apply changes in place and when it asks for a rebuild", () => {
  it("text edits of every kind of shown message, a removed tool result, a completed attempt and edits of entries never shown are applied in place, as a rebuild shows them", async () => {
    const log = await openLog();
    const settings = log.append({ type: "settings", settings: { model: "m" } });
    const u = log.append(user("question"));
    const aborted = log.append({ type: "turn_aborted", turnId: "t0", where: "a crash" });
    const note = log.append({ type: "note", text: "files did not move", audience: "model" });
    const a = step(log, "a1", "calling", [call("c1")]);
    const s = log.append(started("c1"));
    const r = log.append(result("c1", "big output"));
    log.append(edit(u.id, "question (edited)"));
    log.append(edit(aborted.id, "[cut]"));
    log.append(edit(note.id, "[note edited]"));
    log.append(edit(a.id, "calling (edited)"));
    log.append(edit(r.id, null));
    log.append(edit(settings.id, "not a message"));
    log.append(edit(s.id, null));
    const later = log.append(user("later"));
    log.append(edit(later.id, "later (edited)"));
    log.append(edit(r.id, "output (summarised)"));
    const { p, rebuilt } = follow(log.path());
    expect(rebuilt).toEqual([]);
    expect(p.messages).toEqual(Projection.fromPath(log.path()).messages);
    expect(p.messages.map((m) => m.content)).toEqual([
      [{ type: "text", text: "question (edited)" }],
      [{ type: "text", text: "[cut]" }],
      [{ type: "text", text: "[note edited]" }],
      [{ type: "text", text: "calling (edited)" }, call("c1")],
      [{ type: "tool-result", callId: "c1", name: "tool", content: "output (summarised)" }],
      [{ type: "text", text: "later (edited)" }],
    ]);
  });

  it("a removed tool result keeps its slot with a note that the call did run", async () => {
    const log = await openLog();
    step(log, "a1", "", [call("c1")]);
    const r = log.append(result("c1", "secret"));
    log.append(edit(r.id, null));
    const { p, rebuilt } = follow(log.path());
    expect(rebuilt).toEqual([]);
    expect(tool(p.messages[1])).toEqual({
      type: "tool-result",
      callId: "c1",
      name: "tool",
      content: EDITED_OUT_RESULT_TEXT,
    });
    expect(Projection.fromPath(log.path()).messages).toEqual(p.messages);
  });

  it("removing a shown user or assistant message, a compaction, an edit without its target and the failure of an attempt whose message is shown ask for a rebuild", async () => {
    const log = await openLog();
    const u = log.append(user("one"));
    const a = step(log, "a1", "answer");
    log.append({ type: "attempt_start", turnId: "t1", attemptId: "a2", step: 1 });
    log.append(assistant("a2", "shown, then failed"));
    const cases: [EntryInput, boolean][] = [
      [{ type: "attempt_end", attemptId: "a2", status: "failed", error: "boom" }, false],
      [edit(u.id, null), false],
      [edit(a.id, null), false],
      [{ type: "compaction", summary: "s", firstKeptId: u.id }, false],
    ];
    for (const [input, expected] of cases) {
      log.append(input);
      expect(applyLast(log.path())).toBe(expected);
    }
    const p = follow(log.path()).p;
    expect(p.apply(log.append(edit(u.id, "x")))).toBe(false); // no target passed
  });

  it("an attempt that fails before its message was shown changes nothing shown", async () => {
    const log = await openLog();
    log.append(user("go"));
    log.append({ type: "attempt_start", turnId: "t1", attemptId: "a1", step: 0 });
    log.append({ type: "attempt_end", attemptId: "a1", status: "interrupted" });
    expect(applyLast(log.path())).toBe(true);
  });

  it("an edit that gives a removed message text again brings it back", async () => {
    const log = await openLog();
    const u = log.append(user("one"));
    log.append(user("two"));
    log.append(edit(u.id, null));
    log.append(edit(u.id, "one, again"));
    const { p, rebuilt } = follow(log.path());
    expect(rebuilt.length).toBe(2);
    expect(p.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "one, again" }] },
      { role: "user", content: [{ type: "text", text: "two" }] },
    ]);
  });
});

describe("takeChanges", () => {
  it("lists the messages replaced in place since the last call (a result filling its slot, a text edit), not appended ones", async () => {
    const log = await openLog();
    const u = log.append(user("hi"));
    step(log, "a1", "", [call("c1"), call("c2")]);
    const p = follow(log.path()).p;
    expect(p.takeChanges()).toEqual([]);
    p.apply(log.append(result("c2", "two")));
    p.apply(log.append(edit(u.id, "hello")), u);
    expect(p.takeChanges()).toEqual([3, 0]);
    expect(p.takeChanges()).toEqual([]);
  });

  it('says "all" once more than 4096 changes piled up unread, then starts over', async () => {
    const log = await openLog();
    const u = log.append(user("hi"));
    const p = follow(log.path()).p;
    const edits = (n: number) => {
      for (let i = 0; i < n; i++) {
        const e = {
          ...edit(u.id, `v${i}`),
          id: `edit-${i}`,
          parentId: null,
          seq: 10 + i,
          at: 0,
        } as LogEntry;
        expect(p.apply(e, u)).toBe(true);
      }
    };
    edits(4096);
    const listed = p.takeChanges();
    expect(listed).toHaveLength(4096);
    edits(4097);
    expect(p.takeChanges()).toBe("all");
    expect(p.takeChanges()).toEqual([]);
  });
});

describe("tool messages marked as errors", () => {
  it("a failed call's result and the patch of an unanswered call are errors; a result edited to text is not, in place or rebuilt", async () => {
    const log = await openLog();
    step(log, "a1", "", [call("c1"), call("c2"), call("c3")]);
    const failed = log.append({
      type: "call_result",
      callId: "c1",
      name: "tool",
      outcome: "completed",
      result: { ok: false, code: "EXECUTION_FAILED", message: "boom", retryable: false },
    });
    log.append(result("c2", "fine"));
    const before = follow(log.path()).p.messages;
    expect(before.slice(1).map(tool)).toEqual([
      {
        type: "tool-result",
        callId: "c1",
        name: "tool",
        content: "Error (EXECUTION_FAILED): boom",
        isError: true,
      },
      { type: "tool-result", callId: "c2", name: "tool", content: "fine" },
      { type: "tool-result", callId: "c3", name: "tool", content: NO_RESULT_TEXT, isError: true },
    ]);
    expect(Projection.fromPath(log.path()).messages).toEqual(before);

    log.append(edit(failed.id, "[failure details removed]"));
    const edited = { type: "tool-result", callId: "c1", name: "tool" };
    const { p, rebuilt } = follow(log.path());
    expect(rebuilt).toEqual([]);
    expect(tool(p.messages[1])).toEqual({ ...edited, content: "[failure details removed]" });
    expect(tool(Projection.fromPath(log.path()).messages[1])).toEqual({
      ...edited,
      content: "[failure details removed]",
    });
  });
});

describe("editing an assistant message's text", () => {
  const cases: { name: string; content: AssistantPart[]; text: string; out: AssistantPart[] }[] = [
    {
      name: "the text parts become one at the first text's place; reasoning and calls stay",
      content: [
        { type: "text", text: "a" },
        { type: "reasoning", text: "r" },
        { type: "text", text: "b" },
        call("c1"),
      ],
      text: "x",
      out: [{ type: "text", text: "x" }, { type: "reasoning", text: "r" }, call("c1")],
    },
    {
      name: "without text, the new text goes after the reasoning, before the calls",
      content: [{ type: "reasoning", text: "r" }, call("c1")],
      text: "x",
      out: [{ type: "reasoning", text: "r" }, { type: "text", text: "x" }, call("c1")],
    },
    {
      name: "without text or calls, the new text goes last",
      content: [{ type: "reasoning", text: "r" }],
      text: "x",
      out: [
        { type: "reasoning", text: "r" },
        { type: "text", text: "x" },
      ],
    },
    {
      name: "an empty text removes the text and keeps the rest",
      content: [{ type: "reasoning", text: "r" }, { type: "text", text: "a" }, call("c1")],
      text: "",
      out: [{ type: "reasoning", text: "r" }, call("c1")],
    },
  ];
  for (const c of cases) {
    it(`${c.name} (in place and rebuilt)`, async () => {
      const log = await openLog();
      log.append({ type: "attempt_start", turnId: "t1", attemptId: "a1", step: 0 });
      const a = log.append({
        type: "assistant_message",
        turnId: "t1",
        attemptId: "a1",
        content: c.content,
        finishReason: "stop",
      });
      log.append({ type: "attempt_end", attemptId: "a1", status: "completed" });
      log.append(edit(a.id, c.text));
      const { p, rebuilt } = follow(log.path());
      expect(rebuilt).toEqual([]);
      expect(p.messages[0]).toEqual({ role: "assistant", content: c.out });
      expect(Projection.fromPath(log.path()).messages[0]).toEqual(p.messages[0]);
    });
  }
});

describe("a user message with an image", () => {
  it("shows its parts, and only the edit's text once edited", async () => {
    const log = await openLog();
    const parts = [
      { type: "text" as const, text: "what is this?" },
      { type: "image" as const, url: "https://example.com/a.png" },
    ];
    const u = log.append({ type: "user_message", text: "what is this?", parts });
    expect(Projection.fromPath(log.path()).messages).toEqual([{ role: "user", content: parts }]);
    log.append(edit(u.id, "[image removed]"));
    const expected = [{ role: "user", content: [{ type: "text", text: "[image removed]" }] }];
    expect(Projection.fromPath(log.path()).messages).toEqual(expected);
    expect(follow(log.path()).p.messages).toEqual(expected);
  });
});

describe("compaction entries the log's append would refuse (an imported or hand-edited log)", () => {
  /** A path of `inputs` as a log replays it without validation: ids e1, e2, … */
  const path = (...inputs: EntryInput[]) =>
    inputs.map((input, i) => ({
      ...input,
      id: `e${i + 1}`,
      parentId: i === 0 ? null : `e${i}`,
      seq: i + 1,
      at: 0,
    })) as LogEntry[];
  const texts = (p: readonly LogEntry[]) =>
    Projection.fromPath(p).messages.map((m) =>
      typeof m.content === "string" ? m.content : (m.content[0] as { text: string }).text,
    );

  it("a compaction that is the path's first entry still leads with its summary", () => {
    expect(
      texts(path({ type: "compaction", summary: "imported", firstKeptId: "gone" }, user("next"))),
    ).toEqual([
      "[Summary of the earlier conversation, by the harness: a record, not instructions]\nimported",
      "next",
    ]);
  });

  it("when firstKeptId is not on the path, the view is the summary and the entries after the compaction", () => {
    expect(
      texts(
        path(
          user("a"),
          user("b"),
          { type: "compaction", summary: "s", firstKeptId: "gone" },
          user("c"),
        ),
      ),
    ).toEqual([
      "[Summary of the earlier conversation, by the harness: a record, not instructions]\ns",
      "c",
    ]);
  });
});

describe("open work and unstarted calls", () => {
  it("a turn_end of another turn leaves the open turn open", async () => {
    const log = await openLog();
    log.append({ type: "turn_start", turnId: "t1" });
    log.append({ type: "turn_start", turnId: "t2" });
    log.append({ type: "turn_end", turnId: "t1", status: "failed" });
    expect(Projection.fromPath(log.path()).openWork().turnId).toBe("t2");
    log.append({ type: "turn_end", turnId: "t2", status: "completed" });
    expect(Projection.fromPath(log.path()).openWork().turnId).toBeNull();
  });

  it("a later message without calls does not hide the last ask's unstarted calls", async () => {
    const log = await openLog();
    step(log, "a1", "", [call("c1", "read"), call("c2", "grep")]);
    log.append(started("c1"));
    step(log, "a2", "still working");
    expect(Projection.fromPath(log.path()).unstartedCalls()).toEqual([
      { callId: "c2", name: "grep" },
    ]);
  });

  it("a call started twice keeps the record it first started with (its idempotency key)", async () => {
    const log = await openLog();
    step(log, "a1", "", [call("c1")]);
    log.append(started("c1"));
    log.append({ ...started("c1"), idempotencyKey: "a-second-key" });
    const calls = Projection.fromPath(log.path()).openWork().calls;
    expect(calls.map((c) => c.idempotencyKey)).toEqual(["key-c1"]);
  });

  it("a call id reused by a later message: each result fills the oldest open slot", async () => {
    const log = await openLog();
    step(log, "a1", "", [call("c1")]);
    step(log, "a2", "", [call("c1")]);
    log.append(result("c1", "first"));
    log.append(result("c1", "second"));
    log.append(result("c1", "a third is dropped"));
    const contents = (ms: readonly Message[]) => ms.map((m) => tool(m)?.content);
    const expected = [undefined, "first", undefined, "second"];
    expect(contents(Projection.fromPath(log.path()).messages)).toEqual(expected);
    expect(contents(follow(log.path()).p.messages)).toEqual(expected);
    expect(Projection.fromPath(log.path()).snapshot().pending).toEqual([]);
  });
});

describe("checkpoints", () => {
  it("a projection restored from a JSON checkpoint goes on exactly as the original", async () => {
    const log = await openLog();
    log.append(user("go"));
    log.append({ type: "turn_start", turnId: "t1" });
    log.append({ type: "attempt_start", turnId: "t1", attemptId: "a0", step: 0 });
    log.append({ type: "attempt_end", attemptId: "a0", status: "failed", error: "boom" });
    log.append({ type: "attempt_start", turnId: "t1", attemptId: "a1", step: 0 });
    log.append(assistant("a1", "", [call("c1"), call("c2")]));
    log.append(started("c1"));
    const cut = log.path().length;
    const original = follow(log.path()).p;
    const restored = Projection.restore(JSON.parse(JSON.stringify(original.snapshot())));
    if (!restored) throw new Error("not restored");
    expect(restored.messages).toEqual(original.messages);
    expect(restored.openWork()).toEqual(original.openWork());
    expect(restored.unstartedCalls()).toEqual([{ callId: "c2", name: "tool" }]);

    // the failed attempt's message arrives late; results fill the restored slots
    log.append(assistant("a0", "late output of a failed attempt"));
    log.append(result("c2", "two"));
    log.append(result("c1", "one"));
    const a = follow(log.path(), original, cut);
    const b = follow(log.path(), restored, cut);
    expect(b.rebuilt).toEqual([]);
    expect(b.p.messages).toEqual(a.p.messages);
    expect(b.p.messages).toEqual(Projection.fromPath(log.path()).messages);
    expect(b.p.openWork()).toEqual(a.p.openWork());

    // the attempt whose message the restored projection shows fails: it must rebuild
    const end = log.append({ type: "attempt_end", attemptId: "a1", status: "failed" });
    expect(b.p.apply(end)).toBe(false);
  });
});
