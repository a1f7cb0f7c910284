import { afterEach, describe, expect, it, vi } from "vitest";
import { describeJsonType } from "../tools/prepare/describe-json-type.ts";
import { parseJson } from "../tools/prepare/parse-json.ts";
import { splitConcatenated } from "../tools/prepare/split-concatenated.ts";
import { truncatedCallResult } from "../tools/prepare/truncated-call.ts";
import { unwrapDoubleEncoded } from "../tools/prepare/unwrap-double-encoded.ts";
import { formatPath } from "../tools/prepare/validate-args.ts";

/** The single steps of argument preparation, each on its own contract (tools/prepare/). */

describe("describeJsonType names a value's kind for a message", () => {
  it.each([
    [null, "null"],
    [[1], "an array"],
    [{}, "an object"],
    ["s", "a string"],
    [1.5, "a number"],
    [false, "a boolean"],
    [undefined, "undefined"],
    [10n, "bigint"],
  ])("%o is %s", (value, name) => {
    expect(describeJsonType(value)).toBe(name);
  });
});

describe("formatPath writes a zod issue path the way a reader would", () => {
  it.each([
    [[], "(root)"],
    [["path"], "path"],
    [["options", "mode"], "options.mode"],
    [["edits", 0, "old_string"], "edits[0].old_string"],
    [[0, "a"], "[0].a"],
    [["m", 1, 2], "m[1][2]"],
  ])("%j → %s", (path, text) => {
    expect(formatPath(path)).toBe(text);
  });
});

describe("splitConcatenated accepts two or more complete objects and nothing else", () => {
  it("splits objects with or without whitespace between them", () => {
    expect(splitConcatenated('{"a":1}{"b":2}')).toEqual([{ a: 1 }, { b: 2 }]);
    expect(splitConcatenated(' {"a":1}\n{"b":2} {} ')).toEqual([{ a: 1 }, { b: 2 }, {}]);
  });

  it("one object, or none, is no concatenation", () => {
    expect(splitConcatenated('{"a":1}')).toBeUndefined();
    expect(splitConcatenated("  ")).toBeUndefined();
  });

  it("a value that is not an object anywhere, or a truncated one, splits nothing", () => {
    expect(splitConcatenated('{"a":1}[1]')).toBeUndefined();
    expect(splitConcatenated('{"a":1} 2')).toBeUndefined();
    expect(splitConcatenated('{"a":1}{"b":')).toBeUndefined();
  });
});

describe("unwrapDoubleEncoded", () => {
  it("unwraps a string holding an object or an array, leading whitespace allowed", () => {
    expect(unwrapDoubleEncoded(' \n{"a":1}')).toMatchObject({
      kind: "unwrapped",
      value: { a: 1 },
    });
    expect(unwrapDoubleEncoded("[1,2]")).toMatchObject({ kind: "unwrapped", value: [1, 2] });
  });

  it("leaves other strings and non-strings alone, and locates the error of broken inner JSON", () => {
    expect(unwrapDoubleEncoded("a.ts")).toEqual({ kind: "unchanged" });
    expect(unwrapDoubleEncoded('"{"')).toEqual({ kind: "unchanged" });
    expect(unwrapDoubleEncoded(42)).toEqual({ kind: "unchanged" });
    expect(unwrapDoubleEncoded('{"a":')).toEqual({
      kind: "invalid",
      inner: '{"a":',
      error: { offset: 5, reason: "the text ends where a value was expected" },
    });
  });
});

describe("parseJson", () => {
  afterEach(() => vi.restoreAllMocks());

  it("locates an error after a complete value at the first extra character", () => {
    expect(parseJson('{"a":1} x')).toEqual({
      ok: false,
      error: { offset: 8, reason: 'unexpected "x" after the end of the JSON value' },
    });
  });

  it("if the engine rejects a text the scanner accepts, the engine's own reason is reported", () => {
    vi.spyOn(JSON, "parse").mockImplementationOnce(() => {
      throw new SyntaxError("engine says no");
    });
    expect(parseJson('{"a":1}')).toEqual({
      ok: false,
      error: { offset: 0, reason: "engine says no" },
    });
    vi.spyOn(JSON, "parse").mockImplementationOnce(() => {
      throw "not an Error";
    });
    expect(parseJson("[1] ")).toEqual({ ok: false, error: { offset: 0, reason: "not an Error" } });
  });
});

describe("truncatedCallResult", () => {
  it("a call cut before its name or arguments is quoted as empty, never throws", () => {
    const bare = truncatedCallResult({ id: "c" } as never);
    expect(bare.code).toBe("TRUNCATED_CALL");
    expect(bare.message).toContain('the arguments of tool call "" may be incomplete');
    expect(bare.message).toContain("Received: (empty)");
    const odd = truncatedCallResult({ id: "c", name: "shell", argumentsText: 5 } as never);
    expect(odd.message).toContain('tool call "shell"');
    expect(odd.message).toContain("Received: (empty)");
  });
});
