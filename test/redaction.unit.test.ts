import { describe, expect, it } from "vitest";
import type { EntryOf, LogEntry } from "../session/entries.ts";
import { Projection } from "../session/projection.ts";
import {
  checkReason,
  REDACTABLE_TYPES,
  redactEntry,
  redactionTargets,
  spilledFilesOf,
} from "../session/redaction.ts";

const SECRET = "sk-live-4f9c2a7e";
const r = { reason: "a pasted API key", at: 5_000 };
const MARK = "[redacted: a pasted API key]";

let seq = 0;
const at = <T extends Omit<LogEntry, "id" | "parentId" | "seq" | "at">>(
  body: T,
  parentId: string | null = null,
) => {
  seq++;
  return { id: `e${seq}`, parentId, seq, at: 100 + seq, ...body } as unknown as LogEntry;
};

/** One entry of each redactable type, with the secret in every field that holds content. */
const samples = (): LogEntry[] => [
  at({
    type: "user_message",
    text: `my key is ${SECRET}`,
    parts: [
      { type: "text", text: `my key is ${SECRET}` },
      { type: "image", url: `https://x.test/${SECRET}.png` },
    ],
    turnId: "t1",
    inboxId: "in1",
  }),
  at({ type: "inbox", inboxId: "in1", source: "user", lane: "next-turn", body: SECRET }),
  at({
    type: "assistant_message",
    turnId: "t1",
    attemptId: "t1-a2",
    content: [
      {
        type: "reasoning",
        text: `the key ${SECRET}`,
        providerMetadata: { anthropic: { signature: SECRET } },
      },
      {
        type: "text",
        text: `Using ${SECRET}`,
        providerMetadata: { google: { thoughtSignature: SECRET } },
      },
      { type: "text", text: " now" },
      {
        type: "tool-call",
        id: "c1",
        name: "login",
        arguments: JSON.stringify({ key: SECRET }),
        providerMetadata: { google: { thoughtSignature: SECRET } },
      },
    ],
    finishReason: "tool_calls",
    usage: { inputTokens: 10, outputTokens: 5 },
    cost: 0.25,
    continuation: { from: "t1-a1", prefixChars: 6 },
  }),
  at({
    type: "attempt_end",
    attemptId: "t1-a1",
    status: "interrupted",
    partialText: `Using ${SECRET.slice(0, 3)}`,
    partialReasoning: [{ type: "reasoning", text: SECRET }],
    partialCalls: [{ type: "tool-call", id: "c0", name: "login", arguments: `{"key":"${SECRET}` }],
    error: "the stream was cut",
  }),
  at({
    type: "call_started",
    callId: "c1",
    name: "login",
    args: { key: SECRET },
    idempotencyKey: "s:e3:c1",
    idempotent: false,
  }),
  at({
    type: "call_result",
    callId: "c1",
    name: "login",
    outcome: "completed",
    result: {
      ok: true,
      content: `welcome ${SECRET}`,
      truncated: true,
      continuation: { tool: "read_file", args: { path: "x" }, path: `.keel/${SECRET}.txt` },
      structured: { token: SECRET },
      images: [{ mediaType: "image/png", base64: SECRET }],
    },
  }),
  at({
    type: "call_result",
    callId: "c2",
    name: "login",
    outcome: "failed",
    result: { ok: false, code: "EXECUTION_FAILED", message: `bad key ${SECRET}`, retryable: false },
  }),
  at({ type: "note", text: SECRET, audience: "model" }),
  at({ type: "context_edit", targetId: "e1", replacement: SECRET }),
  at({ type: "context_edit", targetId: "e1", replacement: null }),
  at({ type: "compaction", summary: `The user gave ${SECRET}`, firstKeptId: "e1" }),
  at({ type: "turn_aborted", turnId: "t1", where: `after ${SECRET}` }),
];

describe("redactEntry: the content goes, the shape stays", () => {
  it("every redactable type loses the secret from every field and keeps its ids, type and pairing fields", () => {
    const entries = samples();
    expect(new Set(entries.map((e) => e.type))).toEqual(new Set(REDACTABLE_TYPES));
    for (const e of entries) {
      const red = redactEntry(e, r);
      expect(JSON.stringify(red), e.type).not.toContain(SECRET);
      expect(red, e.type).toMatchObject({
        id: e.id,
        parentId: e.parentId,
        seq: e.seq,
        at: e.at,
        type: e.type,
        redacted: { reason: r.reason, at: r.at },
      });
      // Every id that pairs the entry with others survives.
      for (const key of [
        "turnId",
        "inboxId",
        "attemptId",
        "callId",
        "name",
        "targetId",
        "firstKeptId",
        "idempotencyKey",
        "outcome",
        "status",
        "source",
        "lane",
      ])
        if (key in e)
          expect((red as unknown as Record<string, unknown>)[key], `${e.type}.${key}`).toEqual(
            (e as unknown as Record<string, unknown>)[key],
          );
    }
  });

  it("the marker stands where the content was: text, body, arguments, results, summaries", () => {
    const [
      user,
      inbox,
      assistant,
      attempt,
      started,
      ok,
      failed,
      note,
      edit,
      omit,
      compaction,
      aborted,
    ] = samples().map((e) => redactEntry(e, r)) as [
      EntryOf<"user_message">,
      EntryOf<"inbox">,
      EntryOf<"assistant_message">,
      EntryOf<"attempt_end">,
      EntryOf<"call_started">,
      EntryOf<"call_result">,
      EntryOf<"call_result">,
      EntryOf<"note">,
      EntryOf<"context_edit">,
      EntryOf<"context_edit">,
      EntryOf<"compaction">,
      EntryOf<"turn_aborted">,
    ];
    expect(user.text).toBe(MARK);
    expect(user.parts).toBeUndefined();
    expect(inbox.body).toBe(MARK);
    // Reasoning (and its signature) dropped, the text one marker, the call kept with marked arguments.
    expect(assistant.content).toEqual([
      { type: "text", text: MARK },
      { type: "tool-call", id: "c1", name: "login", arguments: JSON.stringify({ redacted: MARK }) },
    ]);
    // What it cost stays (a session budget reads it back from the log).
    expect(assistant).toMatchObject({
      finishReason: "tool_calls",
      usage: { inputTokens: 10 },
      cost: 0.25,
    });
    expect(attempt).toMatchObject({
      status: "interrupted",
      partialText: MARK,
      error: "the stream was cut",
    });
    expect(attempt.partialReasoning).toBeUndefined();
    expect(attempt.partialCalls?.[0]).toMatchObject({
      id: "c0",
      arguments: JSON.stringify({ redacted: MARK }),
    });
    expect(started.args).toBe(MARK);
    expect(ok.result).toEqual({ ok: true, content: MARK });
    expect(failed.result).toEqual({
      ok: false,
      code: "EXECUTION_FAILED",
      message: MARK,
      retryable: false,
    });
    expect(note).toMatchObject({ text: MARK, audience: "model" });
    expect(edit.replacement).toBe(MARK);
    expect(omit.replacement).toBeNull();
    expect(compaction).toMatchObject({ summary: MARK, firstKeptId: "e1" });
    expect(aborted.where).toBe(MARK);
  });

  it("a message of calls only gets no text; one of reasoning only gets the marker as its text", () => {
    const calls = at({
      type: "assistant_message",
      turnId: "t",
      attemptId: "a",
      content: [{ type: "tool-call", id: "c", name: "f", arguments: SECRET }],
      finishReason: "tool_calls",
    });
    expect((redactEntry(calls, r) as EntryOf<"assistant_message">).content).toEqual([
      { type: "tool-call", id: "c", name: "f", arguments: JSON.stringify({ redacted: MARK }) },
    ]);
    const thought = at({
      type: "assistant_message",
      turnId: "t",
      attemptId: "a",
      content: [{ type: "reasoning", text: SECRET }],
      finishReason: "stop",
    });
    expect((redactEntry(thought, r) as EntryOf<"assistant_message">).content).toEqual([
      { type: "text", text: MARK },
    ]);
  });

  it("an entry that holds no content is refused with a TypeError listing the types that can be redacted", () => {
    const leaf = at({ type: "leaf", leafId: null, reason: "rollback" });
    expect(() => redactEntry(leaf, r)).toThrow(
      /entry e\d+ is a leaf record, which holds no conversation content; entries of these types can be redacted: user_message, inbox/,
    );
  });

  it("unknown fields are dropped, not carried: they could hold content", () => {
    const odd = {
      ...samples()[0],
      extra: SECRET,
      encodingProblem: `entry.text: ${SECRET}`,
    } as unknown as LogEntry;
    expect(JSON.stringify(redactEntry(odd, r))).not.toContain(SECRET);
  });

  it("the spilled file of a result is named for removal", () => {
    const [, , , , , ok, failed] = samples();
    expect(spilledFilesOf(ok)).toEqual([`.keel/${SECRET}.txt`]);
    expect(spilledFilesOf(failed)).toEqual([]);
  });

  it("a reason is one line of 1 to 200 characters", () => {
    expect(checkReason("  a key  ")).toBe("a key");
    for (const bad of ["", "   ", "two\nlines", "x".repeat(201), 42, undefined])
      expect(() => checkReason(bad), String(bad)).toThrow(
        /reason must be one line of 1 to 200 characters/,
      );
  });
});

describe("the projection of a redacted log", () => {
  it("shows the marker in place of the text, the arguments and the result, and every call still pairs with its one result", () => {
    seq = 0;
    const u = at({ type: "user_message", text: `key ${SECRET}` });
    const a = at(
      {
        type: "assistant_message",
        turnId: "t1",
        attemptId: "t1-a1",
        content: [
          { type: "text", text: `ok ${SECRET}` },
          {
            type: "tool-call",
            id: "c1",
            name: "login",
            arguments: JSON.stringify({ key: SECRET }),
          },
          { type: "tool-call", id: "c2", name: "login", arguments: "{}" },
        ],
        finishReason: "tool_calls",
      },
      u.id,
    );
    const s1 = at(
      {
        type: "call_started",
        callId: "c1",
        name: "login",
        args: { key: SECRET },
        idempotencyKey: "k1",
        idempotent: false,
      },
      a.id,
    );
    const r1 = at(
      {
        type: "call_result",
        callId: "c1",
        name: "login",
        outcome: "completed",
        result: { ok: true, content: `hello ${SECRET}` },
      },
      s1.id,
    );
    const r2 = at(
      {
        type: "call_result",
        callId: "c2",
        name: "login",
        outcome: "completed",
        result: { ok: true, content: "fine" },
      },
      r1.id,
    );
    const path = [u, a, s1, r1, r2];
    const before = Projection.fromPath(path).messages;
    const red = new Set([u.id, a.id, s1.id, r1.id]);
    const after = Projection.fromPath(
      path.map((e) => (red.has(e.id) ? redactEntry(e, r) : e)),
    ).messages;
    expect(JSON.stringify(before)).toContain(SECRET);
    expect(JSON.stringify(after)).not.toContain(SECRET);
    expect(after.map((m) => m.role)).toEqual(before.map((m) => m.role));
    expect(after[0]).toEqual({ role: "user", content: [{ type: "text", text: MARK }] });
    expect(after[1]).toEqual({
      role: "assistant",
      content: [
        { type: "text", text: MARK },
        {
          type: "tool-call",
          id: "c1",
          name: "login",
          arguments: JSON.stringify({ redacted: MARK }),
        },
        {
          type: "tool-call",
          id: "c2",
          name: "login",
          arguments: JSON.stringify({ redacted: MARK }),
        },
      ],
    });
    expect(after.slice(2)).toEqual([
      {
        role: "tool",
        content: [{ type: "tool-result", callId: "c1", name: "login", content: MARK }],
      },
      {
        role: "tool",
        content: [{ type: "tool-result", callId: "c2", name: "login", content: "fine" }],
      },
    ]);
  });
});

describe("redactionTargets: the entries that hold a copy go too", () => {
  const log = () => {
    seq = 0;
    const inbox = at({
      type: "inbox",
      inboxId: "in1",
      source: "user",
      lane: "next-turn",
      body: SECRET,
    });
    const user = at({ type: "user_message", text: SECRET, inboxId: "in1", turnId: "t1" }, inbox.id);
    const s1 = at({ type: "attempt_start", turnId: "t1", attemptId: "t1-a1", step: 1 }, user.id);
    const cut = at(
      { type: "attempt_end", attemptId: "t1-a1", status: "interrupted", partialText: SECRET },
      s1.id,
    );
    const s2 = at({ type: "attempt_start", turnId: "t1", attemptId: "t1-a2", step: 1 }, cut.id);
    const msg = at(
      {
        type: "assistant_message",
        turnId: "t1",
        attemptId: "t1-a2",
        content: [{ type: "tool-call", id: "c1", name: "f", arguments: SECRET }],
        finishReason: "tool_calls",
      },
      s2.id,
    );
    const done = at({ type: "attempt_end", attemptId: "t1-a2", status: "completed" }, msg.id);
    const started = at(
      {
        type: "call_started",
        callId: "c1",
        name: "f",
        args: SECRET,
        idempotencyKey: "k",
        idempotent: false,
      },
      done.id,
    );
    const result = at(
      {
        type: "call_result",
        callId: "c1",
        name: "f",
        outcome: "completed",
        result: { ok: true, content: "r" },
      },
      started.id,
    );
    const msg2 = at(
      {
        type: "assistant_message",
        turnId: "t1",
        attemptId: "t1-a3",
        content: [{ type: "tool-call", id: "c1", name: "f", arguments: "{}" }],
        finishReason: "tool_calls",
      },
      result.id,
    );
    // A later message reusing the call id: its start record is not the first message's.
    const started2 = at(
      {
        type: "call_started",
        callId: "c1",
        name: "f",
        args: {},
        idempotencyKey: "k2",
        idempotent: false,
      },
      msg2.id,
    );
    const end = at({ type: "turn_end", turnId: "t1", status: "completed" }, started2.id);
    return {
      all: [inbox, user, s1, cut, s2, msg, done, started, result, msg2, started2, end],
      inbox,
      user,
      cut,
      msg,
      started,
      started2,
      end,
    };
  };

  it("a user message takes its inbox entry, and the other way round", () => {
    const { all, inbox, user } = log();
    expect(redactionTargets(all, [user.id])).toEqual({ ok: true, ids: [inbox.id, user.id] });
    expect(redactionTargets(all, [inbox.id])).toEqual({ ok: true, ids: [inbox.id, user.id] });
  });

  it("an assistant message takes its calls' start records (not a later message's with the same call id) and its turn's cut attempts", () => {
    const { all, cut, msg, started } = log();
    expect(redactionTargets(all, [msg.id])).toEqual({
      ok: true,
      ids: [cut.id, msg.id, started.id],
    });
  });

  it("refuses an unknown id and a structural record, naming them", () => {
    const { all, end } = log();
    expect(redactionTargets(all, ["nope"])).toMatchObject({
      ok: false,
      code: "UNKNOWN_ENTRY",
      message: expect.stringContaining('"nope"'),
    });
    expect(redactionTargets(all, [end.id])).toMatchObject({
      ok: false,
      code: "NOT_REDACTABLE",
      message: expect.stringContaining(`entry ${end.id} is a turn_end record`),
    });
  });
});
