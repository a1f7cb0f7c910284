import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "bench/test/**/*.test.ts"],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: "forks",
    // Fails the run when a test wrote into the clone's .keel/ or root (test/support/clone-guard.ts).
    globalSetup: ["test/support/clone-guard.ts"],
  },
});
