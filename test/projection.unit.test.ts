import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { toChatMessages } from "../contracts/chat.ts";
import { EDITED_OUT_RESULT_TEXT, NO_RESULT_TEXT, Projection } from "../session/projection.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import {
  assistant,
  call,
  chatCall,
  openLog,
  result,
  started,
  step,
  user,
} from "./session-fixtures.ts";
import {
  failedOutputViolation,
  opArb,
  playOps,
  referenceProject,
  wellFormedViolation,
} from "./session-random-log.ts";

const rebuilt = (log: Awaited<ReturnType<typeof openLog>>) =>
  toChatMessages(Projection.fromPath(log.path()).messages);

describe("projection", () => {
  it("projects user and assistant messages, each tool call followed by its result in tool_calls order", async () => {
    const log = await openLog();
    log.append(user("hi"));
    step(log, "a1", "", [call("c1", "read"), call("c2", "grep")]);
    log.append(started("c2"));
    log.append(result("c2", "second"));
    log.append(started("c1"));
    log.append(result("c1", "first"));
    step(log, "a2", "done");
    expect(log.messages()).toEqual([
      { role: "user", content: "hi" },
      {
        role: "assistant",
        content: null,
        tool_calls: [chatCall("c1", "read"), chatCall("c2", "grep")],
      },
      { role: "tool", tool_call_id: "c1", content: "first" },
      { role: "tool", tool_call_id: "c2", content: "second" },
      { role: "assistant", content: "done" },
    ]);
    expect(rebuilt(log)).toEqual(log.messages());
  });

  it("a call without a result is patched with a text that does not claim the call did not run", async () => {
    const log = await openLog();
    const a = step(log, "a1", "x", [call("c1")]);
    log.append(started("c1"));
    expect(log.messages()[1]).toEqual({
      role: "tool",
      tool_call_id: "c1",
      content: NO_RESULT_TEXT,
    });
    expect(log.messageSources()[1]).toBe(a.id);
    expect(NO_RESULT_TEXT).toMatch(/may or may not have run/);
    expect(NO_RESULT_TEXT).not.toMatch(/did not run|not executed|never ran/);
  });

  it("a tool result removed by an edit is replaced by a text that says an edit removed it and that the call did run", () => {
    expect(EDITED_OUT_RESULT_TEXT).toMatch(/removed from the context by an edit/);
    expect(EDITED_OUT_RESULT_TEXT).toMatch(/the call did run/);
  });

  it("duplicate results for one call: the first wins, and a result for an unprojected call is dropped", async () => {
    const log = await openLog();
    step(log, "a1", "", [call("c1")]);
    const first = log.append(result("c1", "first"));
    log.append(result("c1", "second"));
    log.append(result("ghost", "orphan"));
    expect(log.messages().filter((m) => m.role === "tool")).toEqual([
      { role: "tool", tool_call_id: "c1", content: "first" },
    ]);
    expect(log.messageSources()[1]).toBe(first.id);
    expect(rebuilt(log)).toEqual(log.messages());
  });

  it("a failed or interrupted attempt's output never appears, even when its message was already projected", async () => {
    const log = await openLog();
    log.append(user("go"));
    log.append({ type: "attempt_start", turnId: "t1", attemptId: "a1", step: 0 });
    log.append({
      type: "attempt_end",
      attemptId: "a1",
      status: "interrupted",
      partialText: "half an ans",
    });
    log.append({ type: "attempt_start", turnId: "t1", attemptId: "a2", step: 0 });
    log.append(assistant("a2", "committed then failed", [call("c9")]));
    expect(log.messages().length).toBe(3);
    log.append({ type: "attempt_end", attemptId: "a2", status: "failed", error: "boom" });
    log.append(result("c9", "orphan now"));
    step(log, "a3", "the real answer");
    expect(log.messages()).toEqual([
      { role: "user", content: "go" },
      { role: "assistant", content: "the real answer" },
    ]);
    expect(JSON.stringify(log.messages())).not.toMatch(
      /half an ans|committed then failed|orphan now/,
    );
  });

  it("turn_aborted becomes a user-role note saying where the turn was cut", async () => {
    const log = await openLog();
    log.append({ type: "turn_aborted", turnId: "t1", where: "while running bash (call c1)" });
    expect(log.messages()).toEqual([
      {
        role: "user",
        content: expect.stringMatching(
          /previous turn \(t1\) was cut short: while running bash \(call c1\)/,
        ),
      },
    ]);
  });

  it("notes reach the model only with audience model", async () => {
    const log = await openLog();
    log.append({ type: "note", text: "log only" });
    log.append({ type: "note", text: "files did not roll back", audience: "model" });
    expect(log.messages()).toEqual([{ role: "user", content: "[Note: files did not roll back]" }]);
  });

  it("context edits replace or omit their target; an omitted assistant message takes its calls and results with it", async () => {
    const log = await openLog();
    const u = log.append(user("secret"));
    const a = step(log, "a1", "calling", [call("c1")]);
    const r = log.append(result("c1", "big output"));
    const b = step(log, "a2", "", [call("c2")]);
    log.append(result("c2", "other"));
    log.append({ type: "context_edit", targetId: u.id, replacement: "[redacted]" });
    log.append({ type: "context_edit", targetId: r.id, replacement: null });
    log.append({ type: "context_edit", targetId: a.id, replacement: "calling (edited)" });
    expect(log.messages().slice(0, 3)).toEqual([
      { role: "user", content: "[redacted]" },
      { role: "assistant", content: "calling (edited)", tool_calls: [chatCall("c1")] },
      { role: "tool", tool_call_id: "c1", content: EDITED_OUT_RESULT_TEXT },
    ]);
    log.append({ type: "context_edit", targetId: b.id, replacement: null });
    expect(log.messages().length).toBe(3);
    log.append({ type: "context_edit", targetId: u.id, replacement: null });
    expect(log.messages()[0].role).toBe("assistant");
  });

  it("compaction: the summary leads, then the entries from firstKeptId; a kept result whose call was summarised is dropped", async () => {
    const log = await openLog();
    log.append(user("old question"));
    step(log, "a1", "", [call("c1")]);
    const kept = log.append(result("c1", "old result"));
    log.append(user("new question"));
    log.append({ type: "compaction", summary: "we talked", firstKeptId: kept.id });
    log.append(user("after"));
    expect(log.messages()).toEqual([
      {
        role: "system",
        content:
          "[Summary of the earlier conversation, by the harness: a record, not instructions]\nwe talked",
      },
      { role: "user", content: "new question" },
      { role: "user", content: "after" },
    ]);
    expect(log.baseline()?.summary).toBe("we talked");
  });

  it("a tool slot left unfilled keeps its place after later messages and is filled when the result arrives", async () => {
    const log = await openLog();
    step(log, "a1", "", [call("c1"), call("c2")]);
    log.append(result("c1", "one"));
    log.append(user("steer"));
    log.append(result("c2", "two, late"));
    expect(log.messages().map((m) => m.content)).toEqual([null, "one", "two, late", "steer"]);
    expect(rebuilt(log)).toEqual(log.messages());
  });
});

describe("projection on random logs", () => {
  it("the incremental projection always equals a full rebuild and the naive reference, after every operation", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 40 }), fc.nat(), async (ops, seed) => {
        const store = memoryStore();
        const log = await openLog(store, "p", seed);
        playOps(log, ops, () => {
          const messages = log.messages();
          expect(messages).toEqual(referenceProject(log.path()));
          expect(log.messageSources().length).toBe(messages.length);
        });
        expect(log.history()).toEqual(Projection.fromPath(log.path()).messages);
        expect(wellFormedViolation(log.messages())).toBeNull();
        expect(failedOutputViolation(log.messages(), log.path())).toBeNull();
        await log.flush();
        const reopened = await openLog(store, "p", seed + 1);
        expect(reopened.messages()).toEqual(log.messages());
        expect(reopened.settings()).toEqual(log.settings());
      }),
      { numRuns: 150 },
    );
  });
});
