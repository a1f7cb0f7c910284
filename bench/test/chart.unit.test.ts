import { describe, expect, it } from "vitest";
import { decadeRange, renderStepChart } from "../lib/chart.ts";

function circles(svg: string): { cx: number; cy: number }[] {
  return [...svg.matchAll(/<circle cx="([\d.]+)" cy="([\d.]+)"/g)].map((m) => ({
    cx: Number(m[1]),
    cy: Number(m[2]),
  }));
}

describe("decadeRange", () => {
  it("covers the smallest and largest value with whole decades", () => {
    expect(decadeRange([3, 4500])).toEqual({ lo: 0, hi: 4 });
  });
  it("is at least one decade wide", () => {
    expect(decadeRange([100, 100])).toEqual({ lo: 2, hi: 3 });
  });
});

describe("renderStepChart", () => {
  const svg = renderStepChart([
    {
      title: "1 tool call per step",
      series: [
        {
          label: "fast",
          points: [
            { steps: 10, usPerStep: 10 },
            { steps: 1000, usPerStep: 10 },
          ],
        },
        {
          label: "slow <grows>",
          points: [
            { steps: 10, usPerStep: 100 },
            { steps: 1000, usPerStep: 1000 },
          ],
        },
      ],
    },
  ]);

  it("draws one line per runtime and a point per measured N", () => {
    expect(svg.match(/<polyline /g)).toHaveLength(2);
    expect(circles(svg)).toHaveLength(4);
  });
  it("puts larger N to the right and larger µs per step higher up (log-log)", () => {
    const [fast10, fast1000, slow10, slow1000] = circles(svg);
    expect(fast1000.cx).toBeGreaterThan(fast10.cx);
    expect(fast1000.cy).toBeCloseTo(fast10.cy, 6);
    expect(slow10.cy).toBeLessThan(fast10.cy);
    // one decade of µs is the same height wherever it is on a log axis
    expect(fast10.cy - slow10.cy).toBeCloseTo(slow10.cy - slow1000.cy, 0);
  });
  it("escapes labels so the SVG stays well-formed", () => {
    expect(svg).toContain("slow &lt;grows&gt;");
    expect(svg).not.toContain("slow <grows>");
  });
  it("wraps the legend onto more rows instead of running off the right edge", () => {
    const labels = ["bare loop", "Keel (memory)", "Keel (SQLite)", "pi-agent-core", "Vercel ai"];
    const many = [...labels, "@openai/agents", "LangGraph (MemorySaver)", "LangGraph (SQLite)"];
    const panel = (names: string[]) => ({
      title: "p",
      series: names.map((label) => ({ label, points: [{ steps: 10, usPerStep: 10 }] })),
    });
    const height = (svg: string) => Number(/<svg [^>]*height="(\d+)"/.exec(svg)?.[1]);
    const wide = renderStepChart([panel(many), panel(many)]);
    const width = Number(/<svg [^>]*width="(\d+)"/.exec(wide)?.[1]);
    const textX = [...wide.matchAll(/<text x="([\d.]+)" y="[\d.]+">([^<]+)<\/text>/g)];
    for (const [, x, label] of textX) {
      expect(Number(x) + label.length * 6.5).toBeLessThanOrEqual(width);
    }
    expect(height(wide)).toBeGreaterThan(height(renderStepChart([panel(labels), panel(labels)])));
  });
});
