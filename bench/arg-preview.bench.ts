/**
 * Streaming argument previews: 10 KB, 100 KB and 1 MB tool arguments in 10-char deltas
 * through the stream assembler with previews on (`value()` after every delta), against one
 * `JSON.parse` of the whole text and against re-parsing the buffer with `partial-json` after
 * every delta (the quadratic baseline; measured under a time budget and extrapolated).
 *
 * Run: `npx tsx bench/arg-preview.bench.ts` (prints a table; exits 1 if the 100 KB target
 * "preview ≤ 20× one JSON.parse" is missed). Import `benchArgPreview()` for the rows.
 */
import { pathToFileURL } from "node:url";
import { Allow, parse as partialParse } from "partial-json";
import { createIds } from "../actors/ids.ts";
import type { ModelEvent } from "../contracts/model.ts";
import { createAssembler } from "../providers/stream-assembler.ts";

export interface ArgPreviewBenchRow {
  /** "file": one long escaped string (a write-file call); "records": many small objects. */
  shape: "file" | "records";
  bytes: number;
  deltas: number;
  /** Median ms: the whole stream through the assembler, previews on, value() per delta. */
  previewMs: number;
  /** Median ms: one JSON.parse of the whole text. */
  parseMs: number;
  /** ms for partial-json per delta; undefined when not run (1 MB). */
  partialJsonMs?: number;
  /** True when `partialJsonMs` was extrapolated from a time-budgeted prefix of the deltas. */
  partialJsonEstimated?: boolean;
  previewVsParse: number;
  partialJsonVsPreview?: number;
}

export interface ArgPreviewBenchOptions {
  sizes?: number[];
  deltaSize?: number;
  /** Timed repetitions per measurement (median reported; a third for 1 MB). Default 21. */
  runs?: number;
  /** Time budget per partial-json measurement before extrapolating. Default 1500 ms. */
  partialJsonBudgetMs?: number;
}

function fileArgs(bytes: number): string {
  const line = 'const greeting = "hello\\tworld"; // naïve → ok\n';
  const escaped = JSON.stringify(line).length - 2;
  const content = line.repeat(Math.ceil((bytes - 40) / escaped));
  return JSON.stringify({ path: "src/generated/output.ts", content });
}

function recordArgs(bytes: number): string {
  const items: unknown[] = [];
  let size = 12;
  for (let i = 0; size < bytes; i++) {
    const item = {
      id: i,
      name: `item ${i}`,
      done: i % 3 === 0,
      tags: ["a", "bc"],
      score: i * 0.25,
      note: null,
    };
    items.push(item);
    size += JSON.stringify(item).length + 1;
  }
  return JSON.stringify({ items });
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

/**
 * Median ms of `a` and of `b`, measured alternately (so background load hits both alike)
 * after a warm-up of at least 300 ms or 10 runs each (JIT tier-up).
 */
function timePair(runs: number, a: () => void, b: () => void): [number, number] {
  const once = (fn: () => void) => {
    const t = performance.now();
    fn();
    return performance.now() - t;
  };
  for (const fn of [a, b]) {
    const start = performance.now();
    for (let i = 0; i < 10 || performance.now() - start < 300; i++) fn();
  }
  const ta: number[] = [];
  const tb: number[] = [];
  for (let i = 0; i < runs; i++) {
    ta.push(once(a));
    tb.push(once(b));
  }
  return [median(ta), median(tb)];
}

function streamThroughAssembler(events: ModelEvent[]): unknown {
  let last: unknown;
  const assembler = createAssembler({
    ids: createIds(),
    previews: true,
    onPreview: (_index, _name, value) => {
      last = value;
    },
  });
  for (const e of events) assembler.push(e);
  assembler.finish();
  return last;
}

/** Re-parses the growing buffer per delta until the budget runs out; returns total ms. */
function partialJsonPerDelta(
  deltas: string[],
  budgetMs: number,
): { ms: number; estimated: boolean } {
  let buffer = "";
  const t = performance.now();
  for (let i = 0; i < deltas.length; i++) {
    buffer += deltas[i];
    partialParse(buffer, Allow.ALL);
    const elapsed = performance.now() - t;
    if (elapsed > budgetMs && i < deltas.length - 1) {
      // Cost per delta grows linearly with the prefix, so the total grows with the square.
      return { ms: elapsed * (deltas.length / (i + 1)) ** 2, estimated: true };
    }
  }
  return { ms: performance.now() - t, estimated: false };
}

/** Runs the benchmark and returns one row per shape and size. */
export function benchArgPreview(options: ArgPreviewBenchOptions = {}): ArgPreviewBenchRow[] {
  const sizes = options.sizes ?? [10_000, 100_000, 1_000_000];
  const deltaSize = options.deltaSize ?? 10;
  const runs = options.runs ?? 21;
  const budget = options.partialJsonBudgetMs ?? 1500;
  const rows: ArgPreviewBenchRow[] = [];
  for (const shape of ["file", "records"] as const) {
    for (const bytes of sizes) {
      const text = shape === "file" ? fileArgs(bytes) : recordArgs(bytes);
      const deltas: string[] = [];
      for (let i = 0; i < text.length; i += deltaSize) deltas.push(text.slice(i, i + deltaSize));
      const events: ModelEvent[] = [{ type: "call.start", index: 0, id: "call_1", name: "write" }];
      for (const argumentsDelta of deltas)
        events.push({ type: "call.delta", index: 0, argumentsDelta });
      events.push({ type: "call.end", index: 0 });
      const expected = JSON.stringify(JSON.parse(text));
      if (JSON.stringify(streamThroughAssembler(events)) !== expected) {
        throw new Error(`preview of the ${shape} ${bytes} B argument differs from JSON.parse`);
      }
      const [previewMs, parseMs] = timePair(
        bytes >= 1_000_000 ? Math.max(5, Math.ceil(runs / 3)) : runs,
        () => streamThroughAssembler(events),
        () => JSON.parse(text),
      );
      const row: ArgPreviewBenchRow = {
        shape,
        bytes: text.length,
        deltas: deltas.length,
        previewMs,
        parseMs,
        previewVsParse: previewMs / parseMs,
      };
      if (bytes < 1_000_000) {
        const pj = partialJsonPerDelta(deltas, budget);
        row.partialJsonMs = pj.ms;
        row.partialJsonEstimated = pj.estimated;
        row.partialJsonVsPreview = pj.ms / previewMs;
      }
      rows.push(row);
    }
  }
  return rows;
}

function fmt(ms: number): string {
  return ms >= 100 ? ms.toFixed(0) : ms >= 1 ? ms.toFixed(2) : ms.toFixed(3);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = benchArgPreview();
  console.log(`node ${process.version}; 10-char deltas; medians in ms`);
  console.log(
    "shape    bytes     deltas   preview   JSON.parse  ×parse   partial-json/delta   ×preview",
  );
  for (const r of rows) {
    const pj =
      r.partialJsonMs === undefined
        ? "—"
        : `${fmt(r.partialJsonMs)}${r.partialJsonEstimated ? " (est.)" : ""}`;
    const pjx =
      r.partialJsonVsPreview === undefined ? "—" : `${r.partialJsonVsPreview.toFixed(0)}×`;
    console.log(
      [
        r.shape.padEnd(8),
        String(r.bytes).padEnd(9),
        String(r.deltas).padEnd(8),
        fmt(r.previewMs).padEnd(9),
        fmt(r.parseMs).padEnd(11),
        `${r.previewVsParse.toFixed(1)}×`.padEnd(8),
        pj.padEnd(20),
        pjx,
      ].join(" "),
    );
  }
  const target = rows.filter((r) => r.bytes >= 100_000 && r.bytes < 200_000);
  const worst = Math.max(...target.map((r) => r.previewVsParse));
  console.log(
    `target: 100 KB preview ≤ 20× one JSON.parse — worst ${worst.toFixed(1)}×: ${worst <= 20 ? "met" : "MISSED"}`,
  );
  if (worst > 20) process.exitCode = 1;
}
