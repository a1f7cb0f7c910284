import { describe, expect, it } from "vitest";
import { formatBytes, formatRatio, formatUs, median, projectRunMs } from "../lib/stats.ts";

describe("median", () => {
  it("is the middle value of an odd list and the mean of the two middle values of an even one", () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
  });
  it("refuses an empty list instead of inventing a number", () => {
    expect(() => median([])).toThrow(/empty/);
  });
});

describe("projectRunMs", () => {
  it("projects a flat runtime linearly in N", () => {
    const flat = [
      { steps: 10, usPerStep: 20 },
      { steps: 100, usPerStep: 20 },
    ];
    expect(projectRunMs(flat, 10_000)).toBeCloseTo(200, 6);
  });
  it("keeps a per-step cost that grew ×10 per decade growing ×10 per decade", () => {
    const growing = [
      { steps: 10, usPerStep: 10 },
      { steps: 100, usPerStep: 100 },
    ];
    expect(projectRunMs(growing, 1000)).toBeCloseTo((1000 * 1000) / 1000, 6);
  });
  it("never projects a per-step cost below the last one measured", () => {
    const shrinking = [
      { steps: 10, usPerStep: 100 },
      { steps: 100, usPerStep: 10 },
    ];
    expect(projectRunMs(shrinking, 1000)).toBeCloseTo(10, 6);
  });
  it("projects nothing before anything was measured", () => {
    expect(projectRunMs([], 1000)).toBe(0);
  });
});

describe("formatting", () => {
  it("shows µs with about three significant digits and spaced thousands", () => {
    expect(formatUs(1.234)).toBe("1.23");
    expect(formatUs(12.34)).toBe("12.3");
    expect(formatUs(123.4)).toBe("123");
    expect(formatUs(12_345.6)).toBe("12 346");
    expect(formatUs(null)).toBe("—");
  });
  it("shows a negative retained heap as GC noise, not as a negative size", () => {
    expect(formatBytes(-5000)).toMatch(/noise/);
    expect(formatBytes(2048)).toBe("2.0 KB");
    expect(formatBytes(3 * 1024 * 1024)).toBe("3.00 MB");
  });
  it("shows ratios with a multiplication sign", () => {
    expect(formatRatio(1)).toBe("1.00×");
    expect(formatRatio(12.34)).toBe("12.3×");
    expect(formatRatio(Number.NaN)).toBe("—");
  });
});
