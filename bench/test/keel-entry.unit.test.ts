import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { BUILT_ENTRY, KEEL_ENTRY_ENV, keelEntry } from "../lib/keel-entry.ts";
import { repoDir } from "../lib/workload.ts";

describe("keelEntry", () => {
  it("is the built package, dist/index.js, unless KEEL_ENTRY names another", () => {
    expect(keelEntry({})).toMatchObject({
      file: join(repoDir, "dist", "index.js"),
      built: true,
      shown: "dist/index.js",
    });
    expect(BUILT_ENTRY).toBe(join(repoDir, "dist", "index.js"));
  });
  it("takes KEEL_ENTRY relative to the working directory and says it is not the package", () => {
    const e = keelEntry({ [KEEL_ENTRY_ENV]: "index.ts" });
    expect(e.file).toBe(resolve("index.ts"));
    expect(e.built).toBe(false);
    expect(e.label).toContain("not the built package: TypeScript through tsx");
  });
  it("shows a path outside the repository in full", () => {
    const e = keelEntry({ [KEEL_ENTRY_ENV]: "/tmp/other-keel/index.ts" });
    expect(e.shown).toBe("/tmp/other-keel/index.ts");
  });
});
