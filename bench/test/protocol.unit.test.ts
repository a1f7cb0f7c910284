import { describe, expect, it } from "vitest";
import { parseChildOutput, RESULT_MARKER } from "../lib/protocol.ts";

describe("parseChildOutput", () => {
  it("finds the result line among whatever else the child printed", () => {
    const out = `noise\n${RESULT_MARKER}{"ok":true,"n":1}\nmore noise\n`;
    expect(parseChildOutput(out)).toEqual({ ok: true, value: { ok: true, n: 1 } });
  });
  it("takes the last result line when there are several", () => {
    const out = `${RESULT_MARKER}{"n":1}\n${RESULT_MARKER}{"n":2}\n`;
    expect(parseChildOutput(out)).toEqual({ ok: true, value: { n: 2 } });
  });
  it("reports no result when the child printed none", () => {
    expect(parseChildOutput("crashed\n")).toEqual({ ok: false });
  });
});
