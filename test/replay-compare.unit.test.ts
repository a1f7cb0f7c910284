import { describe, expect, it } from "vitest";
import type { LogEntry } from "../session/entries.ts";
import { firstDivergence } from "../session/replay-compare.ts";

/** A log whose entry ids, turn id and times come from `ids` and `t0`, the rest fixed. */
function log(ids: { entry: string; turn: string; call: string }, t0: number): LogEntry[] {
  const e = (n: number, body: Record<string, unknown>) =>
    ({
      id: `${ids.entry}${n}`,
      parentId: n === 1 ? null : `${ids.entry}${n - 1}`,
      seq: n,
      at: t0 + n,
      ...body,
    }) as LogEntry;
  return [
    e(1, { type: "turn_start", turnId: ids.turn }),
    e(2, { type: "attempt_start", turnId: ids.turn, attemptId: `${ids.turn}.a1`, step: 0 }),
    e(3, {
      type: "assistant_message",
      turnId: ids.turn,
      attemptId: `${ids.turn}.a1`,
      content: [{ type: "tool-call", id: ids.call, name: "echo", arguments: '{"text":"a"}' }],
      finishReason: "tool_calls",
    }),
    e(4, {
      type: "call_started",
      callId: ids.call,
      name: "echo",
      args: { text: "a" },
      idempotencyKey: `s1:${ids.entry}3:${ids.call}`,
      idempotent: false,
    }),
    e(5, {
      type: "call_result",
      callId: ids.call,
      name: "echo",
      outcome: "completed",
      result: { ok: true, content: `echoed for ${ids.call}` },
    }),
    e(6, { type: "turn_end", turnId: ids.turn, status: "completed" }),
  ];
}

const recorded = log({ entry: "eAAA", turn: "turn_x", call: "call_p" }, 1_000);
const replayed = log({ entry: "eBBB", turn: "turn_y", call: "call_q" }, 9_000);

describe("firstDivergence", () => {
  it("finds none when only the times and the random ids differ, consistently", () => {
    expect(firstDivergence(recorded, replayed)).toBeUndefined();
  });

  it("names the first field that differs, with both values", () => {
    const changed = structuredClone(replayed);
    (changed[4] as { result: { content: string } }).result.content = "something else";
    expect(firstDivergence(recorded, changed)).toEqual({
      seq: 5,
      type: "call_result",
      path: "result.content",
      expected: JSON.stringify("echoed for call_p"),
      got: JSON.stringify("something else"),
    });
  });

  it("reports an id that breaks its pairing: a result for another call than the one started", () => {
    const changed = structuredClone(replayed);
    (changed[4] as { callId: string }).callId = "call_other";
    expect(firstDivergence(recorded, changed)).toMatchObject({ seq: 5, path: "callId" });
  });

  it("reports two recorded ids paired with one replayed id", () => {
    const twoTurns = structuredClone(recorded);
    (twoTurns[5] as { turnId: string }).turnId = "turn_z";
    expect(firstDivergence(twoTurns, replayed)).toMatchObject({ seq: 6, path: "turnId" });
  });

  it("reports a link to another entry than the recording's (parentId)", () => {
    const changed = structuredClone(replayed);
    changed[3] = { ...changed[3], parentId: "eBBB1" };
    expect(firstDivergence(recorded, changed)).toMatchObject({ seq: 4, path: "parentId" });
  });

  it("reports another entry type, and a log that ends early or goes on", () => {
    const changed = structuredClone(replayed);
    changed[5] = { ...changed[5], type: "turn_aborted", where: "here" } as LogEntry;
    expect(firstDivergence(recorded, changed)).toMatchObject({
      seq: 6,
      type: "turn_end",
      path: "",
    });
    expect(firstDivergence(recorded, replayed.slice(0, 4))).toMatchObject({
      seq: 5,
      type: "call_result",
      got: "(the replay wrote nothing more)",
    });
    expect(firstDivergence(recorded.slice(0, 4), replayed)).toMatchObject({
      seq: 5,
      type: "(none)",
      expected: "(the recording ends here)",
    });
  });

  it("reports a field the replay added or left out", () => {
    const changed = structuredClone(replayed);
    changed[0] = { ...changed[0], offered: { echo: "0123456789abcdef" } } as LogEntry;
    expect(firstDivergence(recorded, changed)).toMatchObject({
      seq: 1,
      path: "offered",
      expected: "(absent)",
    });
  });
});
