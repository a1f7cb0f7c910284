import { describe, expect, it } from "vitest";
import { browserPlan } from "./support/chromium.ts";

describe("the browser tests' gate", () => {
  const none = () => false;

  it("runs a suite with the first Chromium found, KEEL_CHROMIUM first", () => {
    expect(browserPlan("s", {}, (p) => p === "/usr/bin/chromium")).toEqual({
      kind: "run",
      executablePath: "/usr/bin/chromium",
    });
    expect(browserPlan("s", { KEEL_CHROMIUM: "/opt/chrome" }, () => true)).toEqual({
      kind: "run",
      executablePath: "/opt/chrome",
    });
  });

  it("without Chromium skips loudly, naming the suite and the install command", () => {
    const plan = browserPlan("inspector e2e", {}, none);
    expect(plan.kind).toBe("skip");
    expect(plan.kind !== "run" && plan.message).toMatch(
      /SKIPPED.*inspector e2e.*apt-get install -y chromium/,
    );
  });

  it("under CI=true a missing Chromium fails the suite instead of skipping it", () => {
    const plan = browserPlan("inspector e2e", { CI: "true" }, none);
    expect(plan.kind).toBe("fail");
    expect(plan.kind !== "run" && plan.message).toContain("apt-get install -y chromium");
  });
});
