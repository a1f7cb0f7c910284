// A live argument preview read once per streamed delta (the inspector's brief, serve's frames)
// must cost linear time (issue 27, finding 7): the preview's open string is a growing V8 rope,
// and reading any character of it copies all of it.
import { describe, expect, it } from "vitest";
import { boundedPreview } from "../cli/serve/previews.ts";
import { brief, LONG_STRING } from "../inspector/records.ts";
import { createArgPreview } from "../providers/arg-preview.ts";

/** Streams a 2 MB string argument in 256-character deltas, reading the preview after each. */
function stream(read: (preview: unknown) => unknown): unknown {
  const p = createArgPreview();
  p.push('{"content":"');
  const delta = "x".repeat(256);
  let last: unknown;
  for (let i = 0; i < (2 * 1024 * 1024) / 256; i++) {
    p.push(delta);
    last = read(p.value());
  }
  return last;
}

describe("reading a live argument preview per delta stays linear", () => {
  // The bound is the test's own timeout (generous: the linear path takes well under a second on
  // this machine; the old quadratic one took 36 s for the inspector's brief of 2 MB).
  it("the inspector's brief of a 2 MB streamed argument, once per 256-character delta, finishes (36 s before)", () => {
    const last = stream((v) => brief(v, 120));
    expect(last).toBe(`{"content":"[${2 * 1024 * 1024} characters]"}`);
  }, 10_000);

  it("serve's bounded preview of the same stream finishes, and each one is a few kilobytes at most", () => {
    let largest = 0;
    stream((v) => {
      const shown = JSON.stringify(boundedPreview(v));
      largest = Math.max(largest, shown.length);
      return shown;
    });
    expect(largest).toBeLessThan(5 * 1024);
  }, 10_000);

  it("a string up to LONG_STRING characters keeps its head; past it, only its length is shown", () => {
    expect(brief({ a: "y".repeat(300) }, 40)).toMatch(/^\{"a":"y+…$/);
    expect(brief("z".repeat(LONG_STRING + 1))).toBe(`[${LONG_STRING + 1} characters]`);
    expect(boundedPreview({ a: "b".repeat(10), c: [1, 2] })).toEqual({
      a: "bbbbbbbbbb",
      c: [1, 2],
    });
    const cut = boundedPreview({ a: "b".repeat(10_000) }, 100) as { a: string };
    expect(cut.a).toMatch(/^b{50,100}…$/);
  });
});
