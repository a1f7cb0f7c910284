import { describe, expect, it } from "vitest";
import { describeChar, scanJsonValue, skipWs } from "../tools/prepare/json-scan.ts";

/**
 * The scanner behind every "where is it wrong" message of argument preparation: one complete
 * JSON value (RFC 8259) from a start index, or the first error with its offset and reason.
 */
describe("scanJsonValue", () => {
  const cases: [string, ReturnType<typeof scanJsonValue>][] = [
    ['{"a":1}', { ok: true, end: 7 }],
    [" [1, 2] x", { ok: true, end: 7 }],
    ["{}", { ok: true, end: 2 }],
    ["[]", { ok: true, end: 2 }],
    ['"s"', { ok: true, end: 3 }],
    ["-1.5e+3", { ok: true, end: 7 }],
    ["true", { ok: true, end: 4 }],
    ["false", { ok: true, end: 5 }],
    ["null", { ok: true, end: 4 }],
    ["", { ok: false, error: { offset: 0, reason: "the text ends where a value was expected" } }],
    [
      "   ",
      { ok: false, error: { offset: 3, reason: "the text ends where a value was expected" } },
    ],
    [
      '{"a":1',
      {
        ok: false,
        error: { offset: 6, reason: "the text ends inside an unclosed object or array" },
      },
    ],
    [
      "[1,",
      { ok: false, error: { offset: 3, reason: "the text ends where a value was expected" } },
    ],
    [
      '{"a" 1}',
      {
        ok: false,
        error: { offset: 5, reason: 'expected ":" after the property name but found "1"' },
      },
    ],
    [
      "{a:1}",
      {
        ok: false,
        error: { offset: 1, reason: 'expected a property name in double quotes but found "a"' },
      },
    ],
    [
      '{"a":1,}',
      {
        ok: false,
        error: { offset: 7, reason: 'expected a property name in double quotes but found "}"' },
      },
    ],
    ["[1 2]", { ok: false, error: { offset: 3, reason: 'expected "," or "]" but found "2"' } }],
    ['{"a":1]', { ok: false, error: { offset: 6, reason: 'expected "," or "}" but found "]"' } }],
    [
      '"abc',
      {
        ok: false,
        error: { offset: 4, reason: "the text ends inside a string (unterminated string)" },
      },
    ],
    ['"a\\x"', { ok: false, error: { offset: 2, reason: 'invalid escape "\\x" in a string' } }],
    [
      '"\\u12"',
      {
        ok: false,
        error: {
          offset: 1,
          reason: 'invalid unicode escape: "\\u" must be followed by 4 hex digits',
        },
      },
    ],
    [
      '"\\u12',
      {
        ok: false,
        error: { offset: 5, reason: "the text ends inside a string (unterminated string)" },
      },
    ],
    [
      '"\\u12G4"',
      {
        ok: false,
        error: {
          offset: 1,
          reason: 'invalid unicode escape: "\\u" must be followed by 4 hex digits',
        },
      },
    ],
    [
      '"a\u0001"',
      {
        ok: false,
        error: {
          offset: 2,
          reason: "raw control character U+0001 in a string; escape it (e.g. \\n, \\t)",
        },
      },
    ],
    ["01", { ok: false, error: { offset: 2, reason: "the text ends inside a number" } }],
    [
      "012]",
      {
        ok: false,
        error: { offset: 1, reason: 'invalid number (leading zero, or a bare "." or exponent)' },
      },
    ],
    ["1.", { ok: false, error: { offset: 2, reason: "the text ends inside a number" } }],
    ["-", { ok: false, error: { offset: 0, reason: 'invalid number at "-"' } }],
    ["1e", { ok: false, error: { offset: 2, reason: "the text ends inside a number" } }],
    ["1.5x", { ok: true, end: 3 }],
    [
      "tru",
      { ok: false, error: { offset: 0, reason: 'unexpected "t" where a value was expected' } },
    ],
    [
      "nul",
      { ok: false, error: { offset: 0, reason: 'unexpected "n" where a value was expected' } },
    ],
    ['{"a":"\\n\\"\\\\\\/\\b\\f\\r\\t\\u00e9"}', { ok: true, end: 30 }],
    ["[[[]]]", { ok: true, end: 6 }],
    ['{"a":{"b":[1,{"c":null}]}}', { ok: true, end: 26 }],
    [
      "\ufeff1",
      {
        ok: false,
        error: { offset: 0, reason: "unexpected character U+FEFF where a value was expected" },
      },
    ],
    [
      "{",
      {
        ok: false,
        error: { offset: 1, reason: "the text ends where a property name was expected" },
      },
    ],
    ['{"a"', { ok: false, error: { offset: 4, reason: 'the text ends where ":" was expected' } }],
    [
      '{"a":',
      { ok: false, error: { offset: 5, reason: "the text ends where a value was expected" } },
    ],
    [
      '"\\',
      {
        ok: false,
        error: { offset: 2, reason: "the text ends inside a string (unterminated string)" },
      },
    ],
    ["12345", { ok: true, end: 5 }],
    ["0", { ok: true, end: 1 }],
    ["-0", { ok: true, end: 2 }],
    ["[-]", { ok: false, error: { offset: 1, reason: 'invalid number at "-"' } }],
    ["1E5", { ok: true, end: 3 }],
    [
      "1.e5",
      {
        ok: false,
        error: { offset: 1, reason: 'invalid number (leading zero, or a bare "." or exponent)' },
      },
    ],
    ['{ "a" : [ true , false ] , "b" : { } }', { ok: true, end: 38 }],
    ["[1,2,3]", { ok: true, end: 7 }],
    ['{"a":1,"b":2}', { ok: true, end: 13 }],
    ['["x\\"y"]', { ok: true, end: 8 }],
    // Numbers start with "-" or any digit 0-9, and take every digit of a fraction and exponent.
    ["9", { ok: true, end: 1 }],
    ["[0,9]", { ok: true, end: 5 }],
    [
      "+1",
      { ok: false, error: { offset: 0, reason: 'unexpected "+" where a value was expected' } },
    ],
    ["1.25e-10", { ok: true, end: 8 }],
    ["1E", { ok: false, error: { offset: 2, reason: "the text ends inside a number" } }],
    [
      "[1E]",
      {
        ok: false,
        error: { offset: 2, reason: 'invalid number (leading zero, or a bare "." or exponent)' },
      },
    ],
    [
      "[00]",
      {
        ok: false,
        error: { offset: 2, reason: 'invalid number (leading zero, or a bare "." or exponent)' },
      },
    ],
    [
      "[09]",
      {
        ok: false,
        error: { offset: 2, reason: 'invalid number (leading zero, or a bare "." or exponent)' },
      },
    ],
    // A text cut inside a \u escape is unterminated (the rest may follow), not an invalid escape.
    [
      '"ab\\u1',
      {
        ok: false,
        error: { offset: 6, reason: "the text ends inside a string (unterminated string)" },
      },
    ],
    [
      '"\\u',
      {
        ok: false,
        error: { offset: 3, reason: "the text ends inside a string (unterminated string)" },
      },
    ],
    [
      '"\\u123G"',
      {
        ok: false,
        error: {
          offset: 1,
          reason: 'invalid unicode escape: "\\u" must be followed by 4 hex digits',
        },
      },
    ],
  ];
  it.each(cases)("%j → %j", (text, expected) => {
    expect(scanJsonValue(text, 0)).toEqual(expected);
  });

  it("scans from the start index given, after whitespace", () => {
    expect(scanJsonValue('xx  {"a":[1]} tail', 2)).toEqual({ ok: true, end: 13 });
  });

  it("100 000 levels of nesting cost no call stack", () => {
    const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
    expect(scanJsonValue(deep, 0)).toEqual({ ok: true, end: 200_000 });
    expect(scanJsonValue(deep.slice(0, -1), 0)).toMatchObject({
      ok: false,
      error: { offset: 199_999 },
    });
  });
});

describe("skipWs and describeChar", () => {
  it("skips exactly JSON's four whitespace characters", () => {
    expect(skipWs(" \t\n\rx", 0)).toBe(4);
    expect(skipWs("\u00a0x", 0)).toBe(0);
    expect(skipWs("\fx", 0)).toBe(0);
    expect(skipWs("   ", 1)).toBe(3);
  });

  it("names the end, control characters, DEL and the BOM by code point, anything else quoted (whole code points)", () => {
    expect(describeChar("ab", 2)).toBe("the end of the text");
    expect(describeChar("\u0007", 0)).toBe("character U+0007");
    expect(describeChar("\u001f", 0)).toBe("character U+001F");
    expect(describeChar("\u007f", 0)).toBe("character U+007F");
    expect(describeChar("\ufeff", 0)).toBe("character U+FEFF");
    expect(describeChar(" ", 0)).toBe('" "');
    expect(describeChar("é", 0)).toBe('"é"');
    expect(describeChar("😀", 0)).toBe('"😀"');
  });
});
