import { describe, expect, it } from "vitest";
import { notExecuted } from "../contracts/tool-result.ts";
import {
  DEFAULT_LOOP_GUARD,
  failureSignature,
  type LoopState,
  type LoopVerdict,
  loopNote,
  NO_LOOP,
  normaliseArguments,
  observeResult,
  resolveLoopGuard,
} from "../machines/policies/loop-guard.ts";

const fail = (message: string) =>
  ({ ok: false, code: "EXECUTION_FAILED", message, retryable: false }) as const;
const ok = { ok: true as const, content: "fine" };

/** Feeds results in order; returns the verdicts. */
function run(
  results: [tool: string, args: string, result: Parameters<typeof failureSignature>[2]][],
  options = DEFAULT_LOOP_GUARD,
): { verdicts: LoopVerdict[]; state: LoopState } {
  let state = NO_LOOP;
  const verdicts: LoopVerdict[] = [];
  for (const [tool, args, result] of results) {
    const r = observeResult(state, tool, failureSignature(tool, args, result), options);
    state = r.state;
    verdicts.push(r.verdict);
  }
  return { verdicts, state };
}

describe("loop guard policy", () => {
  it("normalises arguments: key order, whitespace and an empty string do not make another call", () => {
    expect(normaliseArguments('{ "b": 1, "a": {"y": [1, {"d":2,"c":3}], "x": null} }')).toBe(
      normaliseArguments('{"a":{"x":null,"y":[1,{"c":3,"d":2}]},"b":1}'),
    );
    expect(normaliseArguments("")).toBe("{}");
    expect(normaliseArguments("  not json ")).toBe("not json");
    expect(normaliseArguments('{"a":1}')).not.toBe(normaliseArguments('{"a":2}'));
    expect(normaliseArguments('{ "b": [1, 2], "a": {"d": "x", "c": [ ]} }')).toBe(
      '{"a":{"c":[],"d":"x"},"b":[1,2]}',
    );
    expect(normaliseArguments('{"a":[1,2]}')).not.toBe(normaliseArguments('{"a":[12]}'));
  });

  it("a success has no signature; a failure's names tool, arguments, code and message", () => {
    expect(failureSignature("t", "{}", ok)).toBeUndefined();
    const a = failureSignature("t", '{"p":1}', fail("boom"));
    expect(a).toBe(failureSignature("t", '{ "p": 1 }', fail("boom")));
    expect(a).not.toBe(failureSignature("u", '{"p":1}', fail("boom")));
    expect(a).not.toBe(failureSignature("t", '{"p":2}', fail("boom")));
    expect(a).not.toBe(failureSignature("t", '{"p":1}', fail("other")));
    expect(a).not.toBe(failureSignature("t", '{"p":1}', notExecuted("DENIED", "boom")));
  });

  it("the same failure warns from `repeats` in a row and stops from `failAfter`", () => {
    const same = Array.from({ length: 7 }, () => ["t", '{"p":1}', fail("boom")] as const);
    const { verdicts, state } = run(same.map((x) => [...x]));
    expect(verdicts).toEqual(["none", "none", "warn", "warn", "warn", "stop", "stop"]);
    expect(state).toMatchObject({ count: 7, tool: "t" });
  });

  it("a success, another argument or another error restarts the streak", () => {
    const f = ["t", '{"p":1}', fail("boom")] as [string, string, ReturnType<typeof fail>];
    expect(run([f, f, ["t", "{}", ok], f, f]).verdicts).toEqual([
      "none",
      "none",
      "none",
      "none",
      "none",
    ]);
    expect(run([f, f, ["t", '{"p":2}', fail("boom")], f, f, f]).verdicts.at(-1)).toBe("warn");
    expect(run([f, f, ["t", '{"p":1}', fail("other")], f, f]).state.count).toBe(2);
  });

  it("thresholds are configurable; repeats 1 warns at the first failure", () => {
    const f = ["t", "{}", fail("x")] as [string, string, ReturnType<typeof fail>];
    expect(run([f, f, f], { repeats: 1, failAfter: 3 }).verdicts).toEqual(["warn", "warn", "stop"]);
  });

  it("resolveLoopGuard fills failAfter as twice repeats, accepts false, and says what is wrong", () => {
    expect(resolveLoopGuard(undefined)).toEqual({ repeats: 3, failAfter: 6 });
    expect(resolveLoopGuard({ repeats: 4 })).toEqual({ repeats: 4, failAfter: 8 });
    expect(resolveLoopGuard(false)).toBe(false);
    expect(() => resolveLoopGuard({ repeats: 0 })).toThrow(/loopGuard\.repeats.*integer ≥ 1.*0/);
    expect(() => resolveLoopGuard({ repeats: 3, failAfter: 2 })).toThrow(
      /loopGuard\.failAfter.*≥ repeats \(3\).*2/,
    );
    expect(() => resolveLoopGuard(true as unknown as false)).toThrow(/repeats\?, failAfter\?/);
    expect(() => resolveLoopGuard(null as unknown as false)).toThrow(/got null/);
    // The bounds themselves are allowed: warn from the first failure, stop when warning starts.
    expect(resolveLoopGuard({ repeats: 1 })).toEqual({ repeats: 1, failAfter: 2 });
    expect(resolveLoopGuard({ repeats: 2, failAfter: 2 })).toEqual({ repeats: 2, failAfter: 2 });
  });

  it("the note names the tool and count, and says when the turn is ended", () => {
    expect(loopNote("t", 3, "warn")).toMatch(
      /t with the same arguments.*3 times in a row.*change approach/,
    );
    expect(loopNote("t", 3, "warn")).not.toMatch(/loop_detected/);
    expect(loopNote("t", 6, "stop")).toMatch(/6 times.*loop_detected/);
  });
});
