import { defineConfig } from "vitest/config";

/**
 * Tests that run many real processes against a real PostgreSQL server (workers SIGKILLed in a
 * soak, lease takeovers) or one SQLite file (three writers on short leases): they run after
 * every other file, so their load does not push the other end-to-end tests past their timeouts
 * on a 2-core machine, nor the other tests' load stall their processes past a lease.
 */
const PROCESS_HEAVY = [
  "test/postgres-lease.e2e.test.ts",
  "test/worker-soak.e2e.test.ts",
  "test/sqlite-writers.e2e.test.ts",
];

export default defineConfig({
  test: {
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: "forks",
    // Fails the run when a test wrote into the clone's .keel/ or root (test/support/clone-guard.ts).
    globalSetup: ["test/support/clone-guard.ts"],
    projects: [
      {
        extends: true,
        test: {
          name: "keel",
          include: ["test/**/*.test.ts", "bench/test/**/*.test.ts"],
          exclude: PROCESS_HEAVY,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: { name: "processes", include: PROCESS_HEAVY, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
