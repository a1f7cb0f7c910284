import fc from "fast-check";
import { Allow, parse as partialParse } from "partial-json";
import { describe, expect, it } from "vitest";
import { type ArgPreview, createArgPreview } from "../providers/arg-preview.ts";

/**
 * The preview semantics, written as a slow, obviously-correct reference: parse the whole
 * prefix of a VALID JSON text from scratch. `bugs` turns it into the mutants below.
 */
function reference(
  t: string,
  bugs: { literalPrefixes?: boolean; escapedQuoteCloses?: boolean } = {},
): unknown {
  let p = 0;
  const end = () => p >= t.length;
  const ws = () => {
    while (!end() && " \t\n\r".includes(t[p])) p++;
  };
  const str = (): { s: string; done: boolean } => {
    p++;
    let s = "";
    while (!end()) {
      const ch = t[p];
      if (ch === '"') {
        p++;
        return { s, done: true };
      }
      if (ch !== "\\") {
        s += ch;
        p++;
        continue;
      }
      const e = t[p + 1];
      if (e === '"' && bugs.escapedQuoteCloses) {
        p += 2;
        return { s, done: true };
      }
      const len = e === "u" ? 6 : 2;
      if (p + len > t.length) break;
      s += JSON.parse(`"${t.slice(p, p + len)}"`);
      p += len;
    }
    p = t.length;
    return { s, done: false };
  };
  type R = { has: boolean; v?: unknown; done: boolean };
  const container = (array: boolean): R => {
    p++;
    const c: unknown[] | Record<string, unknown> = array ? [] : {};
    const open: R = { has: true, v: c, done: false };
    for (;;) {
      ws();
      if (end()) return open;
      if (t[p] === (array ? "]" : "}")) {
        p++;
        return { has: true, v: c, done: true };
      }
      if (t[p] === ",") p++;
      let key = "";
      if (!array) {
        ws();
        if (end()) return open;
        const k = str();
        if (!k.done) return open;
        key = k.s;
        ws();
        if (end()) return open;
        p++; // ':'
      }
      const r = value();
      if (r.has && Array.isArray(c)) c.push(r.v);
      else if (r.has)
        Object.defineProperty(c, key, {
          value: r.v,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      if (!r.done) return open;
    }
  };
  const value = (): R => {
    ws();
    if (end()) return { has: false, done: false };
    const ch = t[p];
    if (ch === '"') {
      const r = str();
      return { has: true, v: r.s, done: r.done };
    }
    if (ch === "{" || ch === "[") return container(ch === "[");
    for (const [lit, v] of [
      ["true", true],
      ["false", false],
      ["null", null],
    ] as const) {
      if (ch !== lit[0]) continue;
      if (t.startsWith(lit, p)) {
        p += lit.length;
        return { has: true, v, done: true };
      }
      p = t.length;
      return bugs.literalPrefixes ? { has: true, v, done: false } : { has: false, done: false };
    }
    const token = /^-?\d*(\.\d*)?([eE][+-]?\d*)?/.exec(t.slice(p))![0];
    p += token.length;
    for (let len = token.length; len > 0; len--) {
      if (/^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/.test(token.slice(0, len))) {
        return { has: true, v: Number(token.slice(0, len)), done: !end() };
      }
    }
    return { has: false, done: false };
  };
  return value().v;
}

/** A preview that re-parses the whole buffer on every `value()` (for mutants). */
function reparsing(parse: (text: string) => unknown): ArgPreview {
  let buffer = "";
  return {
    push: (d) => {
      buffer += d;
    },
    value: () => parse(buffer),
    complete: () => false,
    error: () => undefined,
  };
}

const unit = fc.constantFrom(
  "a",
  "Z",
  " ",
  '"',
  "\\",
  "/",
  "\n",
  "\t",
  "\u0001",
  "é",
  "😀",
  "\u2028",
  "\ud83d",
  "{",
  "]",
);
const text = fc.string({ unit, maxLength: 12 });
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom(null, true, false),
    fc.integer({ min: -100_000, max: 100_000 }),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    text,
    fc.array(tie("value"), { maxLength: 5 }),
    fc.dictionary(fc.oneof(text, fc.constant("__proto__")), tie("value"), { maxKeys: 5 }),
  ),
})).value;
const jsonText = fc
  .tuple(json, fc.constantFrom(undefined, 1, "\t"))
  .map(([v, space]) => JSON.stringify(v, null, space));
const sizes = fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 6 });

function chunk(s: string, cycle: number[]): string[] {
  const out: string[] = [];
  for (let i = 0, k = 0; i < s.length; k++) {
    const n = cycle[k % cycle.length];
    out.push(s.slice(i, i + n));
    i += n;
  }
  return out;
}

/** The property: at every chunk boundary the preview equals the reference of the prefix,
 * and at the end it equals `JSON.parse`. */
function previewProperty(make: () => ArgPreview) {
  return fc.property(jsonText, sizes, (t, cycle) => {
    const preview = make();
    let prefix = "";
    for (const delta of chunk(t, cycle)) {
      preview.push(delta);
      prefix += delta;
      expect(preview.value()).toEqual(reference(prefix));
    }
    expect(preview.value()).toEqual(JSON.parse(t));
  });
}

const mutants: Record<string, () => ArgPreview> = {
  "accepts incomplete literals (partial-json, Allow.ALL)": () =>
    reparsing((t) => {
      try {
        return partialParse(t, Allow.ALL);
      } catch {
        return undefined;
      }
    }),
  "shows `tru` as true": () => reparsing((t) => reference(t, { literalPrefixes: true })),
  'closes a string at an escaped quote \\"': () =>
    reparsing((t) => reference(t, { escapedQuoteCloses: true })),
};

describe("argument preview against its reference model", () => {
  it("for any JSON text in any chunking, every prefix previews as the reference and the end equals JSON.parse", () => {
    fc.assert(previewProperty(createArgPreview), { numRuns: 400 });
  });

  it("exotic number spellings preview as their longest valid prefix and end as JSON.parse", () => {
    const number = fc.stringMatching(/^-?(0|[1-9]\d{0,4})(\.\d{1,4})?([eE][+-]?\d{1,3})?$/);
    fc.assert(
      fc.property(fc.array(number, { minLength: 1, maxLength: 6 }), sizes, (nums, cycle) => {
        const t = `{"n":[${nums.join(" ,\n")}], "last": ${nums[0]}}`;
        const preview = createArgPreview();
        let prefix = "";
        for (const delta of chunk(t, cycle)) {
          preview.push(delta);
          prefix += delta;
          expect(preview.value()).toEqual(reference(prefix));
        }
        expect(preview.value()).toEqual(JSON.parse(t));
        expect(preview.complete()).toBe(true);
      }),
    );
  });

  it("value() never throws, for prefixes of JSON and for arbitrary garbage", () => {
    fc.assert(
      fc.property(
        fc.oneof(jsonText, fc.string({ maxLength: 40 }), fc.string({ unit, maxLength: 40 })),
        sizes,
        (t, cycle) => {
          const preview = createArgPreview();
          for (const delta of chunk(t, cycle)) {
            preview.push(delta);
            preview.value();
          }
          const err = preview.error();
          let valid = true;
          try {
            JSON.parse(t);
          } catch {
            valid = false;
          }
          if (valid) expect(err).toBeUndefined();
          // Invalid text either fails with a located error or is merely incomplete.
          if (err) expect(err.offset).toBeLessThan(t.length);
        },
      ),
    );
  });

  for (const [name, make] of Object.entries(mutants)) {
    it(`the property catches a mutant that ${name}`, () => {
      const result = fc.check(previewProperty(make), { numRuns: 400, seed: 42 });
      expect(result.failed).toBe(true);
    });
  }
});
