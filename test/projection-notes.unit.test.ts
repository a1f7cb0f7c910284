import { describe, expect, it } from "vitest";
import { toChatMessages } from "../contracts/chat.ts";
import { Projection, toolResultText, turnAbortedText } from "../session/projection.ts";
import { call, openLog, started, step, user } from "./session-fixtures.ts";

describe("projection of notes, truncated results and checkpoints", () => {
  it("a truncated result's continuation becomes a note naming the tool, its arguments and where the full output is", async () => {
    const log = await openLog();
    step(log, "a1", "", [call("c1", "read")]);
    log.append(started("c1"));
    log.append({
      type: "call_result",
      callId: "c1",
      name: "read",
      outcome: "completed",
      result: {
        ok: true,
        content: "first part",
        truncated: true,
        continuation: { tool: "read", args: { offset: 2 }, path: "/tmp/o.txt", sha256: "abc" },
      },
    });
    const tool = log.messages().find((m) => m.role === "tool");
    expect(tool?.content).toBe(
      'first part\n[output truncated (full output at /tmp/o.txt, sha256 abc); call read with {"offset":2} for the rest]',
    );
    expect(toChatMessages(Projection.fromPath(log.path()).messages)).toEqual(log.messages());
  });

  it("the continuation note names the path without a hash, or no path at all; an untruncated result is its content", () => {
    const c = { tool: "read", args: { offset: 2 } };
    expect(
      toolResultText({
        ok: true,
        content: "x",
        truncated: true,
        continuation: { ...c, path: "/p" },
      }),
    ).toBe('x\n[output truncated (full output at /p); call read with {"offset":2} for the rest]');
    expect(toolResultText({ ok: true, content: "x", truncated: true, continuation: c })).toBe(
      'x\n[output truncated; call read with {"offset":2} for the rest]',
    );
    expect(toolResultText({ ok: true, content: "x", continuation: c })).toBe("x");
    expect(toolResultText({ ok: true, content: "x", truncated: true })).toBe("x");
    expect(
      toolResultText({ ok: false, code: "EXECUTION_FAILED", message: "boom", retryable: false }),
    ).toBe("Error (EXECUTION_FAILED): boom");
  });

  it("a turn_aborted note shows as a user message, and a context edit that removes it hides it", async () => {
    const log = await openLog();
    log.append(user("hi"));
    const note = log.append({ type: "turn_aborted", turnId: "t1", where: "during a tool call" });
    expect(log.messages().at(-1)).toEqual({
      role: "user",
      content: turnAbortedText(note as never),
    });
    expect(log.messages().at(-1)?.content).toContain("(t1) was cut short: during a tool call");
    log.append({ type: "context_edit", targetId: note.id, replacement: null });
    expect(log.messages()).toEqual([{ role: "user", content: "hi" }]);
    expect(toChatMessages(Projection.fromPath(log.path()).messages)).toEqual(log.messages());
  });

  it("a turn_aborted note edited to other text shows that text", async () => {
    const log = await openLog();
    const note = log.append({ type: "turn_aborted", turnId: "t1", where: "x" });
    log.append({ type: "context_edit", targetId: note.id, replacement: "[cut]" });
    expect(log.messages()).toEqual([{ role: "user", content: "[cut]" }]);
    expect(toChatMessages(Projection.fromPath(log.path()).messages)).toEqual(log.messages());
  });

  it("a model note shows, a log note does not, and a removed model note is hidden", async () => {
    const log = await openLog();
    const n = log.append({ type: "note", audience: "model", text: "remember" });
    log.append({ type: "note", audience: "log", text: "for humans" });
    expect(log.messages()).toEqual([{ role: "user", content: "[Note: remember]" }]);
    log.append({ type: "context_edit", targetId: n.id, replacement: null });
    expect(log.messages()).toEqual([]);
  });

  it("a checkpoint of another format version is not restored (the caller replays instead)", async () => {
    const log = await openLog();
    log.append(user("hi"));
    const snap = Projection.fromPath(log.path()).snapshot();
    expect(Projection.restore(snap)?.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "hi" }] },
    ]);
    expect(Projection.restore({ ...snap, v: 2 } as never)).toBeNull();
    expect(Projection.restore({ ...snap, v: 4 } as never)).toBeNull();
    expect(Projection.restore(undefined as never)).toBeNull();
  });
});
