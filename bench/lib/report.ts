/** Renders `BenchResults` as bench/RESULTS.md (Markdown tables, the chart linked). */
import type { PointResult } from "./protocol.ts";
import type { BenchResults, ExtraResult, StepRun } from "./results.ts";
import { formatBytes, formatRatio, formatUs } from "./stats.ts";

const bareId = "bare";
const piId = "pi-agent-core";

/** Keel's two stores, each over LangGraph.js with the matching checkpointer (the durable peer). */
const durablePairs = [
  { keel: "keel-memory", peer: "langgraph-memory", label: "Keel memory ÷ LangGraph MemorySaver" },
  { keel: "keel-sqlite", peer: "langgraph-sqlite", label: "Keel SQLite ÷ LangGraph SQLite" },
] as const;

/** A Markdown table; columns after the first are right-aligned unless `align` is "left". */
export function table(
  head: string[],
  rows: string[][],
  align: "numbers" | "left" = "numbers",
): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  const rule = head.map((_, i) => (i === 0 || align === "left" ? "---" : "---:"));
  return [line(head), line(rule), ...rows.map(line)].join("\n");
}

function nLabel(n: number): string {
  return n.toLocaleString("en-US").replaceAll(",", " ");
}

function point(run: StepRun | undefined, steps: number): PointResult | undefined {
  return run?.result.ok ? run.result.points.find((p) => p.steps === steps) : undefined;
}

function runsFor(r: BenchResults, cps: number): StepRun[] {
  return r.steps.filter((s) => s.callsPerStep === cps);
}

function ratioCell(run: StepRun, base: StepRun | undefined, steps: number): string {
  const a = point(run, steps)?.usPerStep ?? null;
  const b = point(base, steps)?.usPerStep ?? null;
  return a === null || b === null ? "—" : formatRatio(a / b);
}

function failedCells(run: StepRun, width: number): string[] {
  const error = run.result.ok ? "" : run.result.error;
  return [`failed: ${error.split("\n")[0].slice(0, 160)}`, ...Array(width - 1).fill("")];
}

function usCell(p: PointResult | undefined): string {
  if (p === undefined) return "—";
  return p.usPerStep === null ? "skipped¹" : formatUs(p.usPerStep);
}

/** Like `ratioCell`, with two significant digits below 0.1× (Keel ÷ LangGraph is ≈ 0.005×). */
function smallRatioCell(run: StepRun, base: StepRun | undefined, steps: number): string {
  const a = point(run, steps)?.usPerStep ?? null;
  const b = point(base, steps)?.usPerStep ?? null;
  if (a === null || b === null) return "—";
  const ratio = a / b;
  return ratio > 0 && ratio < 0.1 ? `${ratio.toPrecision(2)}×` : formatRatio(ratio);
}

/**
 * Keel over LangGraph.js, store for checkpointer, per N (below 1× Keel is faster); null when
 * neither pair was run.
 */
function renderDurableRatios(r: BenchResults, runs: StepRun[]): string | null {
  const rows = durablePairs.flatMap((pair) => {
    const keel = runs.find((s) => s.id === pair.keel);
    const peer = runs.find((s) => s.id === pair.peer);
    if (keel === undefined || peer === undefined) return [];
    return [[pair.label, ...r.settings.ns.map((n) => smallRatioCell(keel, peer, n))]];
  });
  if (rows.length === 0) return null;
  return [
    "Keel ÷ LangGraph.js, the durable peer (same N; below 1× Keel is faster; — where either skipped¹):",
    "",
    table(["ratio", ...r.settings.ns.map((n) => `N = ${nLabel(n)}`)], rows),
  ].join("\n");
}

/** Median µs per step, ratios, retained heap: the tables of one calls-per-step setting. */
export function renderStepSection(r: BenchResults, cps: number): string {
  const runs = runsFor(r, cps);
  const durable = renderDurableRatios(r, runs);
  const bare = runs.find((s) => s.id === bareId);
  const pi = runs.find((s) => s.id === piId);
  const head = ["runtime", ...r.settings.ns.map((n) => `N = ${nLabel(n)}`)];
  const rows = (cell: (run: StepRun, n: number) => string) =>
    runs.map((run) =>
      run.result.ok
        ? [run.label, ...r.settings.ns.map((n) => cell(run, n))]
        : [run.label, ...failedCells(run, r.settings.ns.length)],
    );
  return [
    "µs per step (median of the repetitions):",
    "",
    table(
      head,
      rows((run, n) => usCell(point(run, n))),
    ),
    "",
    "Ratio to the bare loop (same N):",
    "",
    table(
      head,
      rows((run, n) => ratioCell(run, bare, n)),
    ),
    "",
    "Ratio to pi-agent-core (same N):",
    "",
    table(
      head,
      rows((run, n) => ratioCell(run, pi, n)),
    ),
    "",
    ...(durable === null ? [] : [durable, ""]),
    "Retained heap after one run while the runtime's handle (agent, session, result) is still held (median; small N is within GC noise):",
    "",
    table(
      [...head, "per step at largest N"],
      runs.map((run) => {
        if (!run.result.ok) return [run.label, ...failedCells(run, r.settings.ns.length + 1)];
        const measured = run.result.points.filter((p) => p.retainedBytes !== null);
        const last = measured.at(-1);
        const perStep = last?.retainedBytes == null ? null : last.retainedBytes / last.steps;
        return [
          run.label,
          ...r.settings.ns.map((n) => formatBytes(point(run, n)?.retainedBytes ?? null)),
          last === undefined ? "—" : `${formatBytes(perStep)} (N = ${nLabel(last.steps)})`,
        ];
      }),
    ),
  ].join("\n");
}

/** µs/step at the largest N over µs/step at the smallest, per runtime and setting. */
export function flatness(run: StepRun): { ratio: number; from: number; to: number } | null {
  if (!run.result.ok) return null;
  const measured = run.result.points.filter((p) => p.usPerStep !== null);
  const first = measured[0];
  const last = measured.at(-1);
  if (first === undefined || last === undefined || last === first) return null;
  return { ratio: last.usPerStep! / first.usPerStep!, from: first.steps, to: last.steps };
}

function renderFlatness(r: BenchResults): string {
  const largest = r.settings.ns.at(-1)!;
  const labels = [...new Set(r.steps.map((s) => s.label))];
  const cell = (run: StepRun | undefined) => {
    if (run === undefined) return "—";
    const f = run && flatness(run);
    if (!f) return run.result.ok ? "—" : "failed";
    const partial =
      f.to === largest ? "" : ` (N = ${nLabel(f.to)} ÷ N = ${nLabel(f.from)}; larger N skipped¹)`;
    return `${formatRatio(f.ratio)}${partial}`;
  };
  return table(
    ["runtime", "1 call per step", "8 calls per step"],
    labels.map((label) => [
      label,
      cell(r.steps.find((s) => s.label === label && s.callsPerStep === 1)),
      cell(r.steps.find((s) => s.label === label && s.callsPerStep === 8)),
    ]),
  );
}

/** Flattens nested plain objects into "a.b.c" keys (arrays of objects are left to tables). */
function flatten(value: unknown, prefix = "", out: [string, unknown][] = []): [string, unknown][] {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix ? `${prefix}.${k}` : k, out);
  } else out.push([prefix, value]);
  return out;
}

function show(v: unknown): string {
  if (typeof v === "number")
    return Number.isInteger(v) ? nLabel(v) : v >= 100 ? nLabel(Math.round(v)) : v.toPrecision(3);
  if (v === undefined) return "";
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** A helper's answer as tables: an array of flat rows becomes one table, an object a key list. */
export function renderValue(value: unknown): string {
  if (Array.isArray(value) && value.every((row) => row !== null && typeof row === "object")) {
    const keys = [...new Set(value.flatMap((row) => flatten(row).map(([k]) => k)))];
    const rows = value.map((row) => {
      const m = new Map(flatten(row));
      return keys.map((k) => show(m.get(k)));
    });
    return table(keys, rows);
  }
  return table(
    ["figure", "value"],
    flatten(value).map(([k, v]) => [k || "value", show(v)]),
  );
}

function renderExtra(extra: ExtraResult, source: string): string {
  if (!extra.ok) return `Not available: ${extra.error}`;
  return `${renderValue(extra.value)}\n\nFrom ${source} (took ${(extra.ms / 1000).toFixed(1)} s).`;
}

function renderSessions(extra: ExtraResult): string {
  if (!extra.ok) return `Not available: ${extra.error}`;
  const v = extra.value as Record<
    "idle" | "afterTurn" | "midTurn",
    { count: number; heapBytesPerSession: number; rssBytesPerSession: number; ms: number }
  >;
  const row = (what: string, f: (typeof v)["idle"]) => [
    what,
    nLabel(f.count),
    formatBytes(f.heapBytesPerSession),
    formatBytes(f.rssBytesPerSession),
    `${(f.ms / 1000).toFixed(1)} s`,
  ];
  return table(
    [
      "Keel sessions in one process (memory store)",
      "count",
      "heap per session",
      "RSS per session",
      "time to build",
    ],
    [
      row("idle: opened and ready, no turn yet", v.idle),
      row("idle after one prompt (1 tool step + final text)", v.afterTurn),
      row("mid-turn: its tool call running", v.midTurn),
    ],
  );
}

function renderMachine(r: BenchResults): string {
  const m = r.machine;
  // The bench itself adds ≈ 1 to the load it sees at the end.
  const busy = m.loadAtStart > m.cores * 0.5 || r.loadAtEnd > 1 + m.cores * 0.5;
  const rows = [
    ["CPU", `${m.cpuModel} (${m.cores} cores as seen by os.cpus())`],
    ["memory", `${m.memoryGiB.toFixed(1)} GiB`],
    ["Node", m.node],
    ["Keel (git)", m.keel],
    ["Keel entry measured", m.keelEntry.label],
    ["OS", m.os],
    [
      "load average (1 min) at start / end",
      `${m.loadAtStart.toFixed(2)} / ${r.loadAtEnd.toFixed(2)}${busy ? " — the machine was busy: expect noise" : ""}`,
    ],
    ...Object.entries(m.packages).map(([p, v]) => [p, v]),
  ];
  return table(["machine", ""], rows, "left");
}

export { renderExtra, renderFlatness, renderMachine, renderSessions };
