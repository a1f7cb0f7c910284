/**
 * The step chart: µs per step against N, log-log, one line per runtime, one panel per
 * calls-per-step setting. Plain SVG text, no dependencies.
 */

/** One runtime's line in one panel: measured points only (skipped step counts are left out). */
export interface ChartSeries {
  label: string;
  points: { steps: number; usPerStep: number }[];
}

export interface ChartPanel {
  title: string;
  series: ChartSeries[];
}

/** Colours by series position, readable on white and distinct in greyscale order. */
const palette = [
  "#222222",
  "#d62728",
  "#ff7f0e",
  "#1f77b4",
  "#2ca02c",
  "#9467bd",
  "#8c564b",
  "#e377c2",
  "#17becf",
];

const panelWidth = 440;
const panelHeight = 340;
const margin = { left: 76, right: 30, top: 36, bottom: 48 };
const legendHeight = 40;
const legendRowHeight = 16;

function escapeXml(s: string): string {
  return s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

/** Decades [10^lo, 10^hi] that cover every value (at least one decade wide). */
export function decadeRange(values: readonly number[]): { lo: number; hi: number } {
  const positive = values.filter((v) => v > 0 && Number.isFinite(v));
  if (positive.length === 0) return { lo: 0, hi: 1 };
  const lo = Math.floor(Math.log10(Math.min(...positive)));
  const hi = Math.ceil(Math.log10(Math.max(...positive)));
  return { lo, hi: hi > lo ? hi : lo + 1 };
}

function tickLabel(exp: number): string {
  const v = 10 ** exp;
  return v >= 1 ? v.toLocaleString("en-US").replaceAll(",", " ") : String(v);
}

/** Renders the panels side by side with a shared legend; series keep their colour by label. */
export function renderStepChart(panels: readonly ChartPanel[]): string {
  const labels = [...new Set(panels.flatMap((p) => p.series.map((s) => s.label)))];
  const colour = (label: string) => palette[labels.indexOf(label) % palette.length];
  const width = panelWidth * panels.length;
  // The legend wraps onto as many rows as its labels need.
  const legend: { label: string; x: number; row: number }[] = [];
  let lx = margin.left;
  let row = 0;
  for (const label of labels) {
    const w = 24 + label.length * 6.5;
    if (lx + w > width - margin.right && lx > margin.left) {
      lx = margin.left;
      row++;
    }
    legend.push({ label, x: lx, row });
    lx += w;
  }
  const height = panelHeight + legendHeight + row * legendRowHeight + 8;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
  ];
  panels.forEach((panel, pi) => {
    const x0 = pi * panelWidth + margin.left;
    const y0 = margin.top;
    const w = panelWidth - margin.left - margin.right;
    const h = panelHeight - margin.top - margin.bottom;
    const all = panel.series.flatMap((s) => s.points);
    const xr = decadeRange(all.map((p) => p.steps));
    const yr = decadeRange(all.map((p) => p.usPerStep));
    const sx = (n: number) => x0 + ((Math.log10(n) - xr.lo) / (xr.hi - xr.lo)) * w;
    const sy = (us: number) => y0 + h - ((Math.log10(us) - yr.lo) / (yr.hi - yr.lo)) * h;
    out.push(
      `<text x="${x0 + w / 2}" y="20" text-anchor="middle" font-size="13" font-weight="bold">${escapeXml(panel.title)}</text>`,
    );
    for (let e = xr.lo; e <= xr.hi; e++) {
      const x = sx(10 ** e).toFixed(1);
      out.push(`<line x1="${x}" y1="${y0}" x2="${x}" y2="${y0 + h}" stroke="#e4e4e4"/>`);
      out.push(`<text x="${x}" y="${y0 + h + 16}" text-anchor="middle">${tickLabel(e)}</text>`);
    }
    for (let e = yr.lo; e <= yr.hi; e++) {
      const y = sy(10 ** e).toFixed(1);
      out.push(`<line x1="${x0}" y1="${y}" x2="${x0 + w}" y2="${y}" stroke="#e4e4e4"/>`);
      out.push(
        `<text x="${x0 - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${tickLabel(e)}</text>`,
      );
    }
    out.push(`<rect x="${x0}" y="${y0}" width="${w}" height="${h}" fill="none" stroke="#888888"/>`);
    out.push(
      `<text x="${x0 + w / 2}" y="${y0 + h + 34}" text-anchor="middle">N (steps in one prompt)</text>`,
    );
    out.push(
      `<text x="${x0 - 60}" y="${y0 + h / 2}" text-anchor="middle" transform="rotate(-90 ${x0 - 60} ${y0 + h / 2})">µs per step (median)</text>`,
    );
    for (const s of panel.series) {
      if (s.points.length === 0) continue;
      const c = colour(s.label);
      const pts = s.points.map((p) => `${sx(p.steps).toFixed(1)},${sy(p.usPerStep).toFixed(1)}`);
      out.push(`<polyline points="${pts.join(" ")}" fill="none" stroke="${c}" stroke-width="2"/>`);
      for (const p of pts) {
        const [cx, cy] = p.split(",");
        out.push(
          `<circle cx="${cx}" cy="${cy}" r="3" fill="${c}"><title>${escapeXml(s.label)}</title></circle>`,
        );
      }
    }
  });
  for (const { label, x, row: r } of legend) {
    const ly = panelHeight + 12 + r * legendRowHeight;
    out.push(`<rect x="${x}" y="${ly - 8}" width="14" height="4" fill="${colour(label)}"/>`);
    out.push(`<text x="${x + 18}" y="${ly - 3}">${escapeXml(label)}</text>`);
  }
  const ly = panelHeight + 12 + row * legendRowHeight;
  out.push(
    `<text x="${margin.left}" y="${ly + 18}" fill="#555555">A line that stops before the last N: larger N skipped, projected over the time budget (see RESULTS.md).</text>`,
  );
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}
