import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { seededIds } from "../actors/ids.ts";
import { toChatMessage } from "../contracts/chat.ts";
import type { ModelEvent } from "../contracts/model.ts";
import { createAssembler, toAssistantParts } from "../providers/stream-assembler.ts";

function assemble(
  events: ModelEvent[],
  extra: Partial<Parameters<typeof createAssembler>[0]> = {},
) {
  const a = createAssembler({ ids: seededIds(1), ...extra });
  for (const e of events) a.push(e);
  return a.finish();
}
const delta = (index: number, argumentsDelta: string, more: object = {}): ModelEvent => ({
  type: "call.delta",
  index,
  argumentsDelta,
  ...more,
});

describe("stream assembler", () => {
  it("assembles text, calls, usage and the finish reason of a well-formed stream", () => {
    const m = assemble([
      { type: "text.delta", text: "Let me " },
      { type: "text.delta", text: "look." },
      { type: "call.start", index: 0, id: "call_a", name: "read" },
      delta(0, '{"path":'),
      delta(0, '"a.txt"}'),
      { type: "call.end", index: 0 },
      { type: "usage", usage: { inputTokens: 10, outputTokens: 5 } },
      { type: "finish", reason: "tool_calls" },
    ]);
    expect(m).toEqual({
      text: "Let me look.",
      toolCalls: [{ index: 0, id: "call_a", name: "read", argumentsText: '{"path":"a.txt"}' }],
      finishReason: "tool_calls",
      usage: { inputTokens: 10, outputTokens: 5 },
    });
  });

  it("leaves finishReason undefined when the stream never sent finish", () => {
    expect(assemble([{ type: "text.delta", text: "cut" }]).finishReason).toBeUndefined();
  });

  it("ignores argument deltas after a call's call.end and records a problem", () => {
    const m = assemble([
      { type: "call.start", index: 0, id: "c1", name: "read" },
      delta(0, "{}"),
      { type: "call.end", index: 0 },
      delta(0, "garbage"),
      delta(0, "more"),
    ]);
    expect(m.toolCalls[0].argumentsText).toBe("{}");
    expect(m.toolCalls[0].problems).toEqual([
      "2 argument delta(s) (11 chars) after call.end were ignored",
    ]);
  });

  it("opens a call when deltas arrive without call.start or call.end", () => {
    const m = assemble([delta(0, '{"a":1}', { id: "c1", name: "f" })]);
    expect(m.toolCalls).toEqual([{ index: 0, id: "c1", name: "f", argumentsText: '{"a":1}' }]);
  });

  it("generates an id from ids('call') when the provider sends none, stable across partial() and finish()", () => {
    const a = createAssembler({ ids: seededIds(7) });
    a.push({ type: "call.start", index: 0, name: "f" });
    const early = a.partial().toolCalls[0].id;
    const m = a.finish();
    expect(early).toMatch(/^call_/);
    expect(m.toolCalls[0].id).toBe(early);
    expect(early).toBe(seededIds(7)("call"));
  });

  it("renames a repeated call id within one message and says so; the first keeps its id", () => {
    const a = createAssembler({ ids: seededIds(3) });
    a.push(delta(0, "{}", { id: "same", name: "f" }));
    a.push(delta(1, "{}", { id: "same", name: "g" }));
    a.push(delta(2, "{}", { id: "other", name: "h" }));
    const early = a.partial().toolCalls.map((c) => c.id);
    const m = a.finish();
    const fresh = seededIds(3)("call");
    expect(m.toolCalls.map((c) => c.id)).toEqual(["same", fresh, "other"]);
    expect(early).toEqual(["same", fresh, "other"]);
    expect(m.toolCalls[1].problems).toEqual([
      `the provider repeated the id "same" of an earlier call in this message; renamed to "${fresh}"`,
    ]);
    expect(m.toolCalls[0].problems).toBeUndefined();
  });

  it('keeps a missing name as "" (the turn answers UNKNOWN_TOOL) instead of failing', () => {
    const m = assemble([delta(0, "{}", { id: "c1" }), { type: "call.end", index: 0 }]);
    expect(m.toolCalls[0]).toEqual({ index: 0, id: "c1", name: "", argumentsText: "{}" });
  });

  it("takes id and name from any delta; the first non-empty wins and a different later one is noted", () => {
    const m = assemble([
      { type: "call.start", index: 0 },
      delta(0, "", { id: "" }),
      delta(0, "{", { id: "c1" }),
      delta(0, "}", { name: "read" }),
      delta(0, "", { id: "c1", name: "read" }),
      delta(0, "", { id: "c2", name: "write" }),
    ]);
    expect(m.toolCalls[0]).toMatchObject({ id: "c1", name: "read", argumentsText: "{}" });
    expect(m.toolCalls[0].problems).toEqual([
      'a later id "c2" differs from "c1"; kept the first',
      'a later name "write" differs from "read"; kept the first',
    ]);
  });

  it("lets text and call deltas interleave", () => {
    const m = assemble([
      { type: "text.delta", text: "a" },
      { type: "call.start", index: 0, id: "c1", name: "f" },
      { type: "text.delta", text: "b" },
      delta(0, "[1"),
      { type: "text.delta", text: "c" },
      delta(0, "]"),
    ]);
    expect(m.text).toBe("abc");
    expect(m.toolCalls[0].argumentsText).toBe("[1]");
  });

  it("sorts calls by index when indices are sparse or out of order", () => {
    const m = assemble([
      delta(5, "{}", { id: "c5", name: "f" }),
      delta(2, "{}", { id: "c2", name: "f" }),
      { type: "call.start", index: 9, id: "c9", name: "f" },
      delta(5, " "),
    ]);
    expect(m.toolCalls.map((c) => [c.index, c.id])).toEqual([
      [2, "c2"],
      [5, "c5"],
      [9, "c9"],
    ]);
    expect(m.toolCalls[1].argumentsText).toBe("{} ");
  });

  it("treats a duplicate call.start for an open call as a no-op and one after call.end as a problem", () => {
    const m = assemble([
      { type: "call.start", index: 0, id: "c1", name: "f" },
      delta(0, "{"),
      { type: "call.start", index: 0, id: "c1", name: "f" },
      delta(0, "}"),
      { type: "call.end", index: 0 },
      { type: "call.end", index: 0 },
      { type: "call.start", index: 0, id: "c1", name: "f" },
    ]);
    expect(m.toolCalls).toEqual([{ index: 0, id: "c1", name: "f", argumentsText: "{}" }]);
    expect(m.problems).toEqual(["call.start for index 0 after its call.end was ignored"]);
  });

  it("records, instead of throwing on, an end for a call that never started, a bad index and a second finish", () => {
    const m = assemble([
      { type: "call.end", index: 3 },
      delta(-1, "{}"),
      { type: "finish", reason: "stop" },
      { type: "finish", reason: "length" },
      { type: "text.delta", text: "late" },
      { type: "weird" } as unknown as ModelEvent,
    ]);
    expect(m.toolCalls).toEqual([]);
    expect(m.finishReason).toBe("stop");
    expect(m.text).toBe("late");
    expect(m.problems).toEqual([
      "call.end for index 3, which never started, was ignored",
      "call.delta with invalid index -1 was ignored",
      'a second finish "length" was ignored (kept "stop")',
      "text arrived after finish; it was kept",
      'unknown event type "weird"',
    ]);
  });

  it("reports output only once text or a call has started (Retry vs Continue)", () => {
    const a = createAssembler({ ids: seededIds(1) });
    a.push({ type: "usage", usage: { inputTokens: 1, outputTokens: 0 } });
    a.push({ type: "text.delta", text: "" });
    expect(a.hasOutput()).toBe(false);
    a.push({ type: "call.start", index: 0, name: "f" });
    expect(a.hasOutput()).toBe(true);
    const b = createAssembler({ ids: seededIds(1) });
    b.push({ type: "text.delta", text: "x" });
    expect(b.hasOutput()).toBe(true);
  });

  it("counts reasoning as output: a character of it, or a block sent only as provider metadata", () => {
    const empty = createAssembler({ ids: seededIds(1) });
    empty.push({ type: "reasoning.delta", key: "r0", text: "" });
    empty.push({ type: "reasoning.end", key: "r0" });
    expect(empty.hasOutput()).toBe(false);
    const thought = createAssembler({ ids: seededIds(1) });
    thought.push({ type: "reasoning.delta", key: "r0", text: "Let me think" });
    expect(thought.hasOutput()).toBe(true);
    expect(thought.partial()).toEqual({
      reasoning: [{ type: "reasoning", text: "Let me think" }],
      text: "",
      toolCalls: [],
    });
    const sealed = createAssembler({ ids: seededIds(1) });
    sealed.push({
      type: "reasoning.end",
      key: "r0",
      providerMetadata: { anthropic: { redactedData: "opaque" } },
    });
    expect(sealed.hasOutput()).toBe(true);
  });

  it("gives the partial output of an interrupted attempt and keeps assembling after it", () => {
    const a = createAssembler({ ids: seededIds(1) });
    a.push({ type: "text.delta", text: "a" });
    a.push(delta(0, '{"x"', { id: "c1", name: "f" }));
    expect(a.partial()).toEqual({
      text: "a",
      toolCalls: [{ index: 0, id: "c1", name: "f", argumentsText: '{"x"' }],
    });
    a.push({ type: "text.delta", text: "b" });
    a.push(delta(0, ":1}"));
    expect(a.finish()).toMatchObject({ text: "ab", toolCalls: [{ argumentsText: '{"x":1}' }] });
  });

  it("returns the same message from finish() twice and rejects a push after it", () => {
    const a = createAssembler({ ids: seededIds(1) });
    a.push({ type: "text.delta", text: "x" });
    expect(a.finish()).toBe(a.finish());
    expect(() => a.push({ type: "text.delta", text: "y" })).toThrow(/after finish/);
  });

  it("reports a preview after every delta, by default, with the call's name so far", () => {
    const seen: [number, string, unknown][] = [];
    assemble(
      [
        delta(1, '{"path": "a', { id: "c1", name: "read" }),
        delta(1, 'b.txt", "n": 4'),
        delta(1, "2}"),
        { type: "call.end", index: 1 },
      ],
      { previews: true, onPreview: (i, n, v) => seen.push([i, n, structuredClone(v)]) },
    );
    expect(seen).toEqual([
      [1, "read", { path: "a" }],
      [1, "read", { path: "ab.txt", n: 4 }],
      [1, "read", { path: "ab.txt", n: 42 }],
    ]);
  });

  it("with previewEvery, reports once enough chars arrived and flushes the rest at call.end", () => {
    const seen: unknown[] = [];
    const text = JSON.stringify({ content: "x".repeat(95) });
    const events: ModelEvent[] = [];
    for (let i = 0; i < text.length; i += 10) events.push(delta(0, text.slice(i, i + 10)));
    events.push({ type: "call.end", index: 0 });
    assemble(events, {
      previews: true,
      previewEvery: 40,
      onPreview: (_i, _n, v) => seen.push(structuredClone(v)),
    });
    expect(seen.length).toBe(3); // after 40, 80 chars, and the last 29 at call.end
    expect(seen[2]).toEqual(JSON.parse(text));
  });

  it("does not parse arguments when previews are off", () => {
    let calls = 0;
    assemble([delta(0, "{}")], { onPreview: () => calls++ });
    expect(calls).toBe(0);
  });

  it("for any chunking of the same calls, the assembled message is the same", () => {
    const call = fc.record({ name: fc.string(), args: fc.string() });
    fc.assert(
      fc.property(
        fc.array(call, { maxLength: 4 }),
        fc.string(),
        fc.integer({ min: 1, max: 7 }),
        (calls, text, size) => {
          const events: ModelEvent[] = [];
          for (let i = 0; i < text.length; i += size)
            events.push({ type: "text.delta", text: text.slice(i, i + size) });
          calls.forEach((c, index) => {
            events.push({ type: "call.start", index, id: `c${index}`, name: c.name });
            for (let i = 0; i < c.args.length; i += size)
              events.push(delta(index, c.args.slice(i, i + size)));
            events.push({ type: "call.end", index });
          });
          const m = assemble(events);
          expect(m.text).toBe(text);
          expect(m.toolCalls.map((c) => [c.name, c.argumentsText])).toEqual(
            calls.map((c) => [c.name, c.args]),
          );
        },
      ),
    );
  });

  it("assembles a 1 MB argument from 10-char deltas with a preview per delta in linear time", () => {
    // A quadratic assembler or preview (re-joining or re-parsing per delta) would blow the
    // default test timeout by minutes; the linear one takes tens of milliseconds.
    const text = JSON.stringify({ path: "a.txt", content: 'x\ty "z"\n'.repeat(100_000) });
    let previews = 0;
    let last: unknown;
    const a = createAssembler({
      ids: seededIds(1),
      previews: true,
      onPreview: (_i, _n, v) => {
        previews++;
        last = v;
      },
    });
    a.push({ type: "call.start", index: 0, id: "c1", name: "write" });
    for (let i = 0; i < text.length; i += 10) a.push(delta(0, text.slice(i, i + 10)));
    a.push({ type: "call.end", index: 0 });
    expect(a.finish().toolCalls[0].argumentsText).toBe(text);
    expect(previews).toBe(Math.ceil(text.length / 10));
    expect(last).toEqual(JSON.parse(text));
  });

  it("converts to neutral parts and from them to a Chat Completions assistant message", () => {
    const m = assemble([{ type: "call.start", index: 0, id: "c1", name: "f" }, delta(0, "{}")]);
    const content = toAssistantParts(m);
    expect(content).toEqual([{ type: "tool-call", id: "c1", name: "f", arguments: "{}" }]);
    expect(toChatMessage({ role: "assistant", content })).toEqual({
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }],
    });
    expect(
      toChatMessage({
        role: "assistant",
        content: toAssistantParts({ text: "hi", toolCalls: [] }),
      }),
    ).toEqual({ role: "assistant", content: "hi" });
  });

  it("keeps reasoning blocks in first-seen order with their metadata merged per provider, before the text and calls", () => {
    const m = assemble([
      {
        type: "reasoning.delta",
        key: "r0",
        text: "",
        providerMetadata: { openai: { itemId: "rs_1" } },
      },
      { type: "reasoning.delta", key: "r0", text: "think " },
      { type: "reasoning.delta", key: "r1", text: "more" },
      { type: "reasoning.delta", key: "r0", text: "hard" },
      {
        type: "reasoning.end",
        key: "r0",
        providerMetadata: { openai: { reasoningEncryptedContent: "gAAA==" } },
      },
      { type: "text.delta", text: "ok", providerMetadata: { google: { thoughtSignature: "sig" } } },
      {
        type: "call.start",
        index: 0,
        id: "c1",
        name: "f",
        providerMetadata: { google: { thoughtSignature: "s2" } },
      },
      delta(0, "{}"),
      { type: "call.end", index: 0, providerMetadata: { openai: { itemId: "fc_1" } } },
    ]);
    expect(toAssistantParts(m)).toEqual([
      {
        type: "reasoning",
        text: "think hard",
        providerMetadata: { openai: { itemId: "rs_1", reasoningEncryptedContent: "gAAA==" } },
      },
      { type: "reasoning", text: "more" },
      { type: "text", text: "ok", providerMetadata: { google: { thoughtSignature: "sig" } } },
      {
        type: "tool-call",
        id: "c1",
        name: "f",
        arguments: "{}",
        providerMetadata: { google: { thoughtSignature: "s2" }, openai: { itemId: "fc_1" } },
      },
    ]);
  });

  it("partial() consumes nothing: asked twice mid-stream, it agrees with itself and with finish()", () => {
    const a = createAssembler({ ids: seededIds(1) });
    a.push({ type: "text.delta", text: "a" });
    a.push({ type: "text.delta", text: "b" });
    a.push(delta(0, '{"x"', { id: "c1", name: "f" }));
    a.push(delta(0, ":1}"));
    const first = a.partial();
    expect(a.partial()).toEqual(first);
    expect(first).toEqual({
      text: "ab",
      toolCalls: [{ index: 0, id: "c1", name: "f", argumentsText: '{"x":1}' }],
    });
    expect(a.finish()).toMatchObject(first);
  });

  it("renames a repeated call id when finish() is the first to see it, and says so once", () => {
    const m = assemble([
      delta(0, "{}", { id: "same", name: "f" }),
      delta(1, "{}", { id: "same", name: "g" }),
    ]);
    const fresh = seededIds(1)("call");
    expect(m.toolCalls.map((c) => c.id)).toEqual(["same", fresh]);
    expect(m.toolCalls[1].problems).toEqual([
      `the provider repeated the id "same" of an earlier call in this message; renamed to "${fresh}"`,
    ]);
  });

  it("leaves out what the stream never sent: no usage, metadata or reasoning fields, not even undefined ones", () => {
    const m = assemble([
      { type: "reasoning.delta", key: "r0", text: "hmm" },
      { type: "text.delta", text: "hi" },
      delta(0, "{}", { id: "c1", name: "f" }),
      { type: "call.end", index: 0 },
      { type: "finish", reason: "tool_calls" },
    ]);
    expect(m).toStrictEqual({
      reasoning: [{ type: "reasoning", text: "hmm" }],
      text: "hi",
      toolCalls: [{ index: 0, id: "c1", name: "f", argumentsText: "{}" }],
      finishReason: "tool_calls",
    });
    expect(toAssistantParts(m)).toStrictEqual([
      { type: "reasoning", text: "hmm" },
      { type: "text", text: "hi" },
      { type: "tool-call", id: "c1", name: "f", arguments: "{}" },
    ]);
  });

  it("keeps an empty text that carries provider metadata as a text part", () => {
    const m = assemble([
      { type: "text.delta", text: "", providerMetadata: { google: { thoughtSignature: "sig" } } },
      { type: "finish", reason: "stop" },
    ]);
    expect(toAssistantParts(m)).toEqual([
      { type: "text", text: "", providerMetadata: { google: { thoughtSignature: "sig" } } },
    ]);
    expect(toAssistantParts({ text: "", toolCalls: [] })).toEqual([]);
  });

  it("notes text after finish once, and only when text arrived", () => {
    const m = assemble([
      { type: "finish", reason: "stop" },
      { type: "text.delta", text: "" },
      { type: "text.delta", text: "late" },
      { type: "text.delta", text: " and later" },
    ]);
    expect(m.text).toBe("late and later");
    expect(m.problems).toEqual(["text arrived after finish; it was kept"]);
    expect(
      assemble([
        { type: "finish", reason: "stop" },
        { type: "text.delta", text: "" },
      ]).problems,
    ).toBeUndefined();
  });

  it("ignores call.start and call.end with an invalid index, one problem each", () => {
    const m = assemble([
      { type: "call.start", index: -1, id: "c1", name: "f" },
      { type: "call.start", index: 1.5, id: "c2", name: "g" },
      { type: "call.end", index: -1 },
    ]);
    expect(m.toolCalls).toEqual([]);
    expect(m.problems).toEqual([
      "call.start with invalid index -1 was ignored",
      "call.start with invalid index 1.5 was ignored",
      "call.end with invalid index -1 was ignored",
    ]);
  });

  it("a duplicate call.end is ignored, metadata and all", () => {
    const m = assemble([
      { type: "call.start", index: 0, id: "c1", name: "f" },
      { type: "call.end", index: 0, providerMetadata: { openai: { itemId: "fc_1" } } },
      { type: "call.end", index: 0, providerMetadata: { openai: { itemId: "fc_2" } } },
    ]);
    expect(m.toolCalls[0].providerMetadata).toEqual({ openai: { itemId: "fc_1" } });
    expect(m.problems).toBeUndefined();
  });

  it("a repeated finish with the same reason is no problem", () => {
    const m = assemble([
      { type: "finish", reason: "stop" },
      { type: "finish", reason: "stop" },
    ]);
    expect(m.finishReason).toBe("stop");
    expect(m.problems).toBeUndefined();
  });

  it("reports a preview as soon as previewEvery chars arrived, not one delta later", () => {
    const seen: unknown[] = [];
    assemble([delta(0, "["), delta(0, "1"), delta(0, ","), delta(0, "2"), delta(0, "]")], {
      previews: true,
      previewEvery: 2,
      onPreview: (_i, _n, v) => seen.push(structuredClone(v)),
    });
    expect(seen).toEqual([[1], [1, 2]]);
  });

  it("gives the reasoning so far in the partial output of an interrupted attempt", () => {
    const a = createAssembler({ ids: seededIds(1) });
    a.push({ type: "reasoning.delta", key: "r0", text: "thinking" });
    a.push({ type: "text.delta", text: "a" });
    expect(a.partial()).toStrictEqual({
      reasoning: [{ type: "reasoning", text: "thinking" }],
      text: "a",
      toolCalls: [],
    });
  });
});
