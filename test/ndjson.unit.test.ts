import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LineDecoder } from "../contracts/ndjson.ts";

const bytes = (s: string) => new TextEncoder().encode(s);

describe("LineDecoder", () => {
  it("decodes a frame split at every byte boundary, multi-byte characters included", () => {
    const text = '{"type":"prompt","id":"é✓😀","text":"naïve ☃"}\n';
    const all = bytes(text);
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: all.length - 1 }), { maxLength: 8 }),
        (cuts) => {
          const decoder = new LineDecoder(1024);
          const points = [0, ...cuts.sort((a, b) => a - b), all.length];
          const out = points
            .slice(1)
            .flatMap((end, i) => decoder.push(all.subarray(points[i], end)));
          expect(out).toEqual([{ type: "frame", frame: JSON.parse(text) }]);
          expect(decoder.end()).toEqual([]);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("reports a line over the bound once, without holding it, and decodes the next line", () => {
    const decoder = new LineDecoder(16);
    const out = [
      ...decoder.push(bytes('{"a":"0123456789')),
      ...decoder.push(bytes("0123456789")),
      ...decoder.push(bytes('0123"}\n{"b":1}\n')),
    ];
    expect(out.map((r) => (r.type === "bad" ? r.code : r.frame))).toEqual([
      "FRAME_TOO_LARGE",
      { b: 1 },
    ]);
    expect(decoder.buffered).toBe(0);
  });

  it("accepts a line of exactly the bound, with or without a trailing carriage return", () => {
    const line = '{"x":"123456789"}'; // 17 bytes
    expect(new LineDecoder(17).push(bytes(`${line}\r\n`))[0]).toMatchObject({ type: "frame" });
    expect(new LineDecoder(16).push(bytes(`${line}\n`))[0]).toMatchObject({
      code: "FRAME_TOO_LARGE",
    });
  });

  it("reports invalid UTF-8, invalid JSON and non-objects per line, and ignores blank lines", () => {
    const decoder = new LineDecoder(1024);
    const out = decoder.push(
      new Uint8Array([
        ...bytes('{"a":"'),
        0xc3,
        0x28,
        ...bytes('"}\n\n  \n[1]\n{oops\n{"ok":1}\n'),
      ]),
    );
    expect(out.map((r) => (r.type === "bad" ? r.code : r.frame))).toEqual([
      "INVALID_UTF8",
      "INVALID_FRAME",
      "INVALID_JSON",
      { ok: 1 },
    ]);
  });

  it("accepts a last line without a newline only when it is complete JSON", () => {
    const ok = new LineDecoder(64);
    expect(ok.push(bytes('{"type":"hello"}'))).toEqual([]);
    expect(ok.end()).toEqual([{ type: "frame", frame: { type: "hello" } }]);
    const cut = new LineDecoder(64);
    cut.push(bytes('{"type":"hel'));
    expect(cut.end()[0]).toMatchObject({ type: "bad", code: "INVALID_JSON" });
  });
});
