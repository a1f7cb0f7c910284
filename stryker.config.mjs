// Mutation testing of Keel's pure modules (`npm run mutate`; docs/testing.md).
// KEEL_MUTATE=<comma-separated paths or globs> narrows the run (scripts/mutate-ci.mjs passes the
// modules a change touched); KEEL_MUTATE_CONCURRENCY raises the worker count (default 1: the
// machine is shared). Incremental by default: only mutants whose code or covering tests changed
// since test-output/mutation/incremental.json run again; `npm run mutate -- --force` reruns all,
// KEEL_MUTATE_INCREMENTAL=0 ignores and keeps the incremental file.

/** Every pure module under mutation testing; each must score ≥ 85 % (killed ÷ valid). */
export const MUTATED = [
  "machines/*.ts",
  "machines/policies/*.ts",
  "tools/prepare-call.ts",
  "tools/prepare/*.ts",
  "session/projection.ts",
  "session/compaction-cuts.ts",
  "session/branches.ts",
  "providers/stream-assembler.ts",
];

const only = process.env.KEEL_MUTATE?.split(",").filter(Boolean);

/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  testRunner: "vitest",
  vitest: { configFile: "vitest.mutate.config.ts", related: false },
  checkers: ["typescript"],
  tsconfigFile: "tsconfig.mutate.json",
  typescriptChecker: { prioritizePerformanceOverAccuracy: true },
  coverageAnalysis: "perTest",
  mutate: only && only.length > 0 ? only : MUTATED,
  concurrency: Number(process.env.KEEL_MUTATE_CONCURRENCY ?? 1),
  incremental: process.env.KEEL_MUTATE_INCREMENTAL !== "0",
  incrementalFile: "test-output/mutation/incremental.json",
  reporters: ["clear-text", "progress", "html", "json"],
  htmlReporter: { fileName: "test-output/mutation/index.html" },
  jsonReporter: { fileName: "test-output/mutation/mutation.json" },
  clearTextReporter: { allowColor: false, logTests: false, reportScoreTable: true },
  thresholds: { high: 90, low: 85, break: null },
  tempDirName: ".stryker-tmp",
  cleanTempDir: "always",
  ignorePatterns: ["dist", "bench", "test-output", ".keel", "docs"],
  timeoutMS: 5_000,
};
