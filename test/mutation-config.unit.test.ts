import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
// @ts-expect-error: a plain .mjs script without types
import { moduleMatcher } from "../scripts/mutate-ci.mjs";
// @ts-expect-error: a plain .mjs config without types
import { HOST_MINIMUM, HOSTS, MUTATED } from "../stryker.config.mjs";
import mutateConfig from "../vitest.mutate.config.ts";

// Stryker runs only the test files vitest.mutate.config.ts includes. A test of a mutated module
// left out of that list kills nothing, and the module's score silently drops (loop-guard's unit
// test was missing: 41.8 % instead of its real score). This keeps the list complete.

const root = join(import.meta.dirname, "..");

/** `a{b,c}d` → `abd`, `acd` (the include list uses braces, no wildcards). */
function expandBraces(pattern: string): string[] {
  const m = /\{([^{}]*)\}/.exec(pattern);
  if (!m) return [pattern];
  return m[1]
    .split(",")
    .flatMap((alt) =>
      expandBraces(pattern.slice(0, m.index) + alt + pattern.slice(m.index + m[0].length)),
    );
}

/** Modules under test/ or the repo root that a test file imports (relative paths, resolved). */
function importsOf(file: string): string[] {
  const text = readFileSync(join(root, "test", file), "utf8");
  return [...text.matchAll(/from\s+"\.\.\/([^"]+)"/g)].map((m) => m[1]);
}

describe("the mutation run's test list (vitest.mutate.config.ts)", () => {
  const include = new Set(
    (mutateConfig.test?.include ?? []).flatMap((p: string) => expandBraces(p)),
  );
  const isMutated = moduleMatcher(MUTATED);

  it("has no pattern with a wildcard (the check below compares names)", () => {
    for (const p of mutateConfig.test?.include ?? []) expect(p).not.toMatch(/\*/);
  });

  it("includes every non-e2e test file that imports a mutated module directly", () => {
    const tests = readdirSync(join(root, "test")).filter(
      (f) => f.endsWith(".test.ts") && !f.endsWith(".e2e.test.ts"),
    );
    const missing = tests.filter(
      (f) => importsOf(f).some((m) => isMutated(m)) && !include.has(`test/${f}`),
    );
    expect(missing, "add these to vitest.mutate.config.ts, or Stryker never runs them").toEqual([]);
  });

  it("lists only files that exist", () => {
    const tests = new Set(readdirSync(join(root, "test")).map((f) => `test/${f}`));
    expect([...include].filter((f) => !tests.has(f))).toEqual([]);
  });

  it("names host modules that exist, each with tests that exist and a floor CI holds it to", () => {
    const tests = new Set(readdirSync(join(root, "test")).map((f) => `test/${f}`));
    const hosts = HOSTS as Record<string, string[]>;
    expect(Object.keys(hosts).length).toBeGreaterThan(0);
    for (const [host, list] of Object.entries(hosts)) {
      expect(existsSync(join(root, host)), host).toBe(true);
      expect(isMutated(host), `${host} is mutated as a host, not as a pure module`).toBe(false);
      expect(list.length, host).toBeGreaterThan(0);
      expect(
        list.filter((t) => !tests.has(t)),
        host,
      ).toEqual([]);
    }
    expect(Object.keys(HOST_MINIMUM).sort()).toEqual(Object.keys(hosts).sort());
    for (const floor of Object.values(HOST_MINIMUM as Record<string, number>)) {
      expect(floor).toBeGreaterThan(0);
      expect(floor).toBeLessThanOrEqual(100);
    }
  });
});
