import { defineConfig } from "vitest/config";
// @ts-expect-error: a plain .mjs config without types
import { HOSTS } from "./stryker.config.mjs";

/** A host module's run (`KEEL_MUTATE_HOST`): only the tests that cover it (stryker.config.mjs). */
const hostTests: string[] | undefined = process.env.KEEL_MUTATE_HOST
  ? HOSTS[process.env.KEEL_MUTATE_HOST]
  : undefined;
/** `KEEL_MUTATE_TESTS=test/a.test.ts,…`: only these tests (a quick local run of one module). */
const onlyTests = process.env.KEEL_MUTATE_TESTS?.split(",").filter(Boolean);

/**
 * The tests Stryker runs against each mutant (`npm run mutate`): the unit, model, paths,
 * clock, property and race tests of the pure modules it mutates (stryker.config.mjs). No
 * e2e test: those start servers and child processes, and cover the same code far slower.
 * Per-test coverage then runs only the tests that reach a mutant.
 */
export default defineConfig({
  test: {
    include: onlyTests ??
      hostTests ?? [
        "test/acceptance.model.test.ts",
        "test/acceptance-chart.unit.test.ts",
        "test/batch.{unit,model,race}.test.ts",
        "test/batch-strangers.unit.test.ts",
        "test/charts.unit.test.ts",
        "test/clear-results.unit.test.ts",
        "test/compaction.{unit,model,race}.test.ts",
        "test/context-budget.unit.test.ts",
        "test/session.model.test.ts",
        "test/compaction-fallback.unit.test.ts",
        "test/crash.race.test.ts",
        "test/inbox.{unit,race}.test.ts",
        "test/inspector-chart.unit.test.ts",
        "test/json-scan.unit.test.ts",
        "test/loop-guard.unit.test.ts",
        "test/not-executed.unit.test.ts",
        "test/prepare-call.{unit,property}.test.ts",
        "test/prepare-messages.unit.test.ts",
        "test/prepare-steps.unit.test.ts",
        "test/tool-examples.unit.test.ts",
        "test/tool-repairs.unit.test.ts",
        "test/projection.unit.test.ts",
        "test/projection-incremental.unit.test.ts",
        "test/projection-notes.unit.test.ts",
        "test/remap-keys.unit.test.ts",
        "test/recover-calls.unit.test.ts",
        "test/recovery.unit.test.ts",
        "test/retry-classify.unit.test.ts",
        "test/retry-classify-advice.unit.test.ts",
        "test/retry-policy.{unit,clock}.test.ts",
        "test/retry-decide.unit.test.ts",
        "test/retry.race.test.ts",
        "test/timers.unit.test.ts",
        "test/session-branches.unit.test.ts",
        "test/session-compact.race.test.ts",
        "test/session.race.test.ts",
        "test/store-checkpoint.unit.test.ts",
        "test/stream-assembler.unit.test.ts",
        "test/tool-call.{clock,model,paths}.test.ts",
        "test/turn.{model,race}.test.ts",
        "test/turn-chart.unit.test.ts",
        "test/turn-limits.unit.test.ts",
        "test/slot-queue.unit.test.ts",
        "test/budget.{unit,model}.test.ts",
        "test/redaction.unit.test.ts",
        "test/retry-classify-hook.unit.test.ts",
      ],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
