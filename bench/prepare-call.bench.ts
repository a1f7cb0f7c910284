import { pathToFileURL } from "node:url";
import { z } from "zod";
import { defineTool } from "../tools/define-tool.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import { createRegistry } from "../tools/registry.ts";

/** One size's figures: medians in microseconds per call. */
export interface PrepareCallFigure {
  label: string;
  bytes: number;
  /** prepareCall on valid arguments (parse + validate). */
  prepareUs: number;
  /** One JSON.parse of the same text. */
  jsonParseUs: number;
  /** Median over rounds of (prepareCall time / JSON.parse time), sampled back to back. */
  ratio: number;
  /** prepareCall on the same text cut 10 bytes short (the error path: locate + message). */
  truncatedUs: number;
}

const registry = createRegistry([
  defineTool({
    name: "write_file",
    description: "write a file",
    parameters: z.object({ path: z.string(), content: z.string() }),
    execute: () => "ok",
  }),
]);

/** Realistic file content: code lines with quotes, backslashes, tabs and non-ASCII. */
function argumentsOfSize(bytes: number): string {
  const line = '\tconst s = "caf\u00e9 \\\\ path";  // a \'comment\' with "quotes"\n';
  const content = line.repeat(Math.ceil(bytes / line.length)).slice(0, bytes);
  return JSON.stringify({ path: "src/generated.ts", content });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** µs per call of `fn` over one sample of `iterations` calls. */
function sample(fn: () => unknown, iterations: number): number {
  const start = performance.now();
  for (let i = 0; i < iterations; i++) fn();
  return ((performance.now() - start) * 1000) / iterations;
}

/**
 * Medians (µs per call) of each function over `samples` rounds after a warm-up. The functions
 * are sampled in alternation within each round, so load drift on a shared machine hits all of
 * them alike; `pairedRatio` is the median of the per-round ratios first/second.
 */
function measure(
  fns: (() => unknown)[],
  iterations: number,
  samples: number,
): { medians: number[]; pairedRatio: number } {
  for (const fn of fns) sample(fn, iterations * 2);
  const times: number[][] = fns.map(() => []);
  const ratios: number[] = [];
  for (let s = 0; s < samples; s++) {
    const round = fns.map((fn) => sample(fn, iterations));
    for (const [i, t] of round.entries()) times[i].push(t);
    ratios.push(round[0] / round[1]);
  }
  return { medians: times.map(median), pairedRatio: median(ratios) };
}

/**
 * prepareCall vs one JSON.parse of the same text for 10 KB, 100 KB and 1 MB arguments
 * (median of 15 interleaved samples after warm-up), plus the error path on a truncated copy.
 */
export function benchPrepareCall(options: { samples?: number } = {}): PrepareCallFigure[] {
  const samples = Math.max(7, options.samples ?? 15);
  return [
    ["10 KB", 10 * 1024],
    ["100 KB", 100 * 1024],
    ["1 MB", 1024 * 1024],
  ].map(([label, size]) => {
    const text = argumentsOfSize(size as number);
    const truncated = text.slice(0, -10);
    const iterations = Math.max(3, Math.floor((2 * 1024 * 1024) / (size as number)));
    const call = { id: "c", name: "write_file", argumentsText: text };
    const cut = { id: "c", name: "write_file", argumentsText: truncated };
    if (!prepareCall(call, registry).ok || prepareCall(cut, registry).ok)
      throw new Error("bench inputs are wrong");
    const { medians, pairedRatio } = measure(
      [() => prepareCall(call, registry), () => JSON.parse(text), () => prepareCall(cut, registry)],
      iterations,
      samples,
    );
    const [prepareUs, jsonParseUs, truncatedUs] = medians;
    return {
      label: label as string,
      bytes: Buffer.byteLength(text),
      prepareUs,
      jsonParseUs,
      ratio: pairedRatio,
      truncatedUs,
    };
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = benchPrepareCall();
  console.log("prepareCall vs JSON.parse (median µs per call, Node", process.version, ")");
  console.table(
    rows.map((r) => ({
      size: r.label,
      bytes: r.bytes,
      "prepareCall µs": r.prepareUs.toFixed(1),
      "JSON.parse µs": r.jsonParseUs.toFixed(1),
      ratio: r.ratio.toFixed(2),
      "truncated (error) µs": r.truncatedUs.toFixed(1),
    })),
  );
}
