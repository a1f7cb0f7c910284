import type { ChatCompletionChunk } from "openai/resources/chat/completions";
import { describe, expect, it } from "vitest";
import type { ModelEvent } from "../contracts/model.ts";
import { chunkMapper } from "../providers/openai-chunks.ts";
import { replayArguments } from "../providers/openai-request.ts";

const chunk = (delta: Record<string, unknown>) =>
  ({ choices: [{ index: 0, delta, finish_reason: null }] }) as unknown as ChatCompletionChunk;
const call = (c: Record<string, unknown>) => chunk({ tool_calls: [c] });

/** The calls the events describe, as [index, id, name, arguments] in index order. */
function calls(deltas: Record<string, unknown>[]) {
  const m = chunkMapper();
  const events: ModelEvent[] = [];
  for (const d of deltas) events.push(...m.push(call(d)));
  events.push(...m.end());
  const out = new Map<number, [number, string, string, string]>();
  for (const e of events) {
    if (e.type !== "call.start" && e.type !== "call.delta") continue;
    const c = out.get(e.index) ?? [e.index, "", "", ""];
    if (e.id && !c[1]) c[1] = e.id;
    if (e.name && !c[2]) c[2] = e.name;
    if (e.type === "call.delta") c[3] += e.argumentsDelta;
    out.set(e.index, c);
  }
  return [...out.values()].sort((a, b) => a[0] - b[0]);
}

describe("chunkMapper: tool calls as providers really send them", () => {
  it("a new id at an index in use after complete arguments starts the next free index", () => {
    expect(
      calls([
        { index: 0, id: "a", function: { name: "f", arguments: "{}" } },
        { index: 0, id: "b", function: { name: "g", arguments: '{"x":1}' } },
        { index: 1, id: "c", function: { name: "h", arguments: "{}" } },
      ]),
    ).toEqual([
      [0, "a", "f", "{}"],
      [1, "b", "g", '{"x":1}'],
      [2, "c", "h", "{}"],
    ]);
  });

  it("a different id in the middle of incomplete arguments stays with the call (per-chunk ids)", () => {
    expect(
      calls([
        { index: 0, id: "a", function: { name: "f", arguments: '{"x":' } },
        { index: 0, id: "a2", function: { arguments: "1}" } },
      ]),
    ).toEqual([[0, "a", "f", '{"x":1}']]);
  });

  it("an id arriving late for a call started without one is that call's id", () => {
    expect(
      calls([
        { index: 0, function: { name: "f", arguments: '{"x":1}' } },
        { index: 0, id: "late", function: { arguments: "" } },
      ]),
    ).toEqual([[0, "late", "f", '{"x":1}']]);
  });

  it("id-less pieces at index null continue the last call until a named call follows complete JSON", () => {
    expect(
      calls([
        { index: null, id: "", function: { name: "f", arguments: '{"x"' } },
        { index: null, id: "", function: { arguments: ":1}" } },
        { index: null, id: "", function: { name: "g", arguments: "" } },
        { index: null, function: { arguments: "{}" } },
      ]),
    ).toEqual([
      [0, "", "f", '{"x":1}'],
      [1, "", "g", "{}"],
    ]);
  });
});

describe("replayArguments", () => {
  it("keeps JSON objects byte for byte and replaces everything else a strict provider refuses", () => {
    expect(replayArguments('{ "a" : 1 }')).toBe('{ "a" : 1 }');
    expect(replayArguments(JSON.stringify('{"a":1}'))).toBe('{"a":1}');
    for (const bad of ["", "{'a': 1}", '{"a": 1', "[1]", "null", "3", '"text"', '{"a":1}{"b":2}'])
      expect(replayArguments(bad)).toBe("{}");
  });
});

describe("chunkMapper: what must stay one call", () => {
  it("a name repeated on every chunk of one call at an index is not a new call", () => {
    expect(
      calls([
        { index: 0, function: { name: "f", arguments: '{"x":1}' } },
        { index: 0, function: { name: "f", arguments: "" } },
      ]),
    ).toEqual([[0, "", "f", '{"x":1}']]);
  });
});
