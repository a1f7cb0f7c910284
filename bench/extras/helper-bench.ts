/**
 * Runs another helper's benchmark function in its own process: imports `bench/<file>`, calls
 * the first export in `exports` that is a function with `args`, and prints what it returns.
 * A missing file or export is answered as `{ ok: false, error: "not available: …" }`.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describeError } from "../lib/measure.ts";
import { emitResult, readChildOptions } from "../lib/protocol.ts";
import { benchDir } from "../lib/workload.ts";

export interface HelperBenchOptions {
  file: string;
  exports: string[];
  args: unknown[];
}

export type HelperBenchResult =
  | { ok: true; exportName: string; value: unknown; ms: number }
  | { ok: false; error: string };

async function main(): Promise<HelperBenchResult> {
  const o = readChildOptions<HelperBenchOptions>();
  const path = join(benchDir, o.file);
  if (!existsSync(path))
    return { ok: false, error: `not available: bench/${o.file} does not exist` };
  const mod = (await import(path)) as Record<string, unknown>;
  const exportName = o.exports.find((name) => typeof mod[name] === "function");
  if (exportName === undefined) {
    return {
      ok: false,
      error: `not available: bench/${o.file} exports none of ${o.exports.join(", ")} (it exports ${Object.keys(mod).join(", ") || "nothing"})`,
    };
  }
  const fn = mod[exportName] as (...args: unknown[]) => unknown;
  const started = performance.now();
  const value = await fn(...o.args);
  return { ok: true, exportName, value, ms: performance.now() - started };
}

try {
  emitResult(await main());
  process.exit(0);
} catch (e) {
  emitResult({ ok: false, error: describeError(e) } satisfies HelperBenchResult);
  process.exit(1);
}
