// The browser tests' gate: where Chromium is, and what a suite does without it. Without
// Chromium a suite is skipped with a loud line saying how to install it; under CI=true it
// fails instead (a green CI run must have run the browser tests).
import { existsSync } from "node:fs";
import { describe, it } from "vitest";

/** How to get the browser the tests use (Debian's package; .ci/run installs it). */
export const CHROMIUM_INSTALL = "apt-get install -y chromium";

/** Where to look, in order: KEEL_CHROMIUM, then Debian's and other usual paths. */
export function chromiumCandidates(env: NodeJS.ProcessEnv): string[] {
  return [
    ...(env.KEEL_CHROMIUM ? [env.KEEL_CHROMIUM] : []),
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "/usr/bin/google-chrome",
  ];
}

export type BrowserPlan =
  | { kind: "run"; executablePath: string }
  | { kind: "skip"; message: string }
  | { kind: "fail"; message: string };

/** What a browser suite named `suite` does here. A pure function of its inputs. */
export function browserPlan(
  suite: string,
  env: NodeJS.ProcessEnv,
  exists: (path: string) => boolean,
): BrowserPlan {
  const candidates = chromiumCandidates(env);
  const found = candidates.find((p) => exists(p));
  if (found) return { kind: "run", executablePath: found };
  const missing = `${suite}: no Chromium at ${candidates.join(", ")}. Install it with \`${CHROMIUM_INSTALL}\` (or set KEEL_CHROMIUM to a Chromium or Chrome binary)`;
  return env.CI === "true"
    ? { kind: "fail", message: `${missing}. CI=true: a skipped browser test fails the run.` }
    : { kind: "skip", message: `!!! BROWSER TESTS SKIPPED !!! ${missing}.` };
}

/** Chromium flags for headless tests in a container. */
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

/**
 * `describe` for a suite that needs Chromium: `body` gets the browser's path. Without one the
 * suite is skipped after a loud line on stderr, or, under CI=true, is a single failing test.
 */
export function describeInChromium(name: string, body: (executablePath: string) => void): void {
  const plan = browserPlan(name, process.env, existsSync);
  if (plan.kind === "run") {
    describe(name, () => body(plan.executablePath));
    return;
  }
  process.stderr.write(`\n${"!".repeat(100)}\n${plan.message}\n${"!".repeat(100)}\n\n`);
  if (plan.kind === "fail") {
    describe(name, () => {
      it("runs in Chromium", () => {
        throw new Error(plan.message);
      });
    });
  } else describe.skip(name, () => body(""));
}
