import { describe, expect, it } from "vitest";
import { createArgPreview } from "../providers/arg-preview.ts";

/** Feeds `text` one char at a time and returns the preview after each char. */
function previews(text: string): unknown[] {
  const p = createArgPreview();
  return [...text].map((ch) => {
    p.push(ch);
    return structuredClone(p.value());
  });
}
function previewOf(...deltas: string[]) {
  const p = createArgPreview();
  for (const d of deltas) p.push(d);
  return p;
}

describe("argument preview", () => {
  it("shows nothing before the first value starts", () => {
    expect(previewOf("").value()).toBeUndefined();
    expect(previewOf("  \n").value()).toBeUndefined();
  });

  it("shows an open string value as its prefix but drops an open or value-less key", () => {
    expect(previewOf('{"pa').value()).toEqual({});
    expect(previewOf('{"path"').value()).toEqual({});
    expect(previewOf('{"path": ').value()).toEqual({});
    expect(previewOf('{"path": "').value()).toEqual({ path: "" });
    expect(previewOf('{"path": "src/ma').value()).toEqual({ path: "src/ma" });
  });

  it("leaves out an escape cut in half and decodes it once complete", () => {
    expect(previewOf('"a\\').value()).toBe("a");
    expect(previewOf('"a\\u00').value()).toBe("a");
    expect(previewOf('"a\\u00', "e9").value()).toBe("aé");
    expect(previewOf('"\\ud83d', "\\ude00", '"').value()).toBe("😀");
    expect(previewOf('"\\n\\t\\"\\\\\\/\\b\\f\\r"').value()).toBe('\n\t"\\/\b\f\r');
  });

  it("never shows an incomplete true/false/null", () => {
    expect(previews("[true]")).toEqual([[], [], [], [], [true], [true]]);
    expect(previewOf('{"a": fals').value()).toEqual({});
    expect(previewOf("nul").value()).toBeUndefined();
    expect(previewOf("null").value()).toBeNull();
  });

  it("shows a number as the longest valid number that prefixes it", () => {
    expect(previews("[-12.5e-3]")).toEqual([
      [],
      [],
      [-1],
      [-12],
      [-12],
      [-12.5],
      [-12.5],
      [-12.5],
      [-12.5e-3],
      [-12.5e-3],
    ]);
    expect(previewOf("7").value()).toBe(7);
    expect(previewOf("-0").value()).toBe(-0);
  });

  it("shows containers as soon as they open and keeps members in order", () => {
    expect(previewOf('{"a": [1, {"b": [').value()).toEqual({ a: [1, { b: [] }] });
    expect(previewOf('{"a": 1, "b": "x"}').complete()).toBe(true);
    expect(Object.keys(previewOf('{"z": 1, "a": 2, "z": 3}').value() as object)).toEqual([
      "z",
      "a",
    ]);
  });

  it("makes a __proto__ key an own property, as JSON.parse does, without touching the prototype", () => {
    const v = previewOf('{"__proto__": {"polluted": true}}').value() as Record<string, unknown>;
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Object.hasOwn(v, "__proto__")).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(v).toEqual(JSON.parse('{"__proto__": {"polluted": true}}'));
  });

  it("returns the live value: later pushes mutate the object returned earlier", () => {
    const p = createArgPreview();
    p.push('{"a": [1');
    const first = p.value() as { a: number[] };
    p.push(", 2]}");
    expect(p.value()).toBe(first);
    expect(first.a).toEqual([1, 2]);
  });

  it("is complete only after one whole value; a top-level number needs a terminator", () => {
    expect(previewOf('{"a":1').complete()).toBe(false);
    expect(previewOf('{"a":1}  ').complete()).toBe(true);
    expect(previewOf("12").complete()).toBe(false);
    expect(previewOf("12 ").complete()).toBe(true);
  });

  it.each([
    ['{"a" 1}', 5, ":"],
    ["[1,]", 3, "a JSON value"],
    ['{"a":1,}', 7, "a quoted key"],
    ["[01]", 2, "after a leading 0"],
    ["[1.]", 3, "a digit"],
    ["[-x]", 2, "a digit"],
    ['"a\\q"', 3, "an escape"],
    ['"\\u12g4"', 5, "a hex digit"],
    ['"a\u0001"', 2, "control characters must be escaped"],
    ["[trux]", 4, "of true"],
    ['{"a":1}{"b":2}', 7, "one JSON value only"],
    ["{'a':1}", 1, "a quoted key or }"],
  ])(
    "reports %j as an error at offset %i mentioning %j and freezes the preview",
    (text, offset, hint) => {
      const p = createArgPreview();
      for (const ch of text) p.push(ch);
      expect(p.error()?.offset).toBe(offset);
      expect(p.error()?.message).toContain(hint);
      const frozen = JSON.stringify(p.value());
      p.push('"more"]}');
      expect(JSON.stringify(p.value())).toBe(frozen);
      expect(p.complete()).toBe(false);
    },
  );

  it("keeps the value shown before an error (the last valid character wins)", () => {
    expect(previewOf('{"a": 01').value()).toEqual({ a: 0 });
    expect(previewOf('{"a": "x', "\u0002").value()).toEqual({ a: "x" });
    expect(previewOf('{"ok": [1, 2], "x": nope').value()).toEqual({ ok: [1, 2] });
  });

  it("reads a 1 MB string argument in 10-char deltas with a preview after every delta", () => {
    const content = 'line with "quotes" and \\ slashes\n'.repeat(30_000);
    const text = JSON.stringify({ path: "big.txt", content });
    const p = createArgPreview();
    for (let i = 0; i < text.length; i += 10) {
      p.push(text.slice(i, i + 10));
      p.value();
    }
    expect(p.value()).toEqual({ path: "big.txt", content });
    expect(p.complete()).toBe(true);
  });
});
