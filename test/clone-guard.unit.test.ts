import { mkdirSync, mkdtempSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { guardClone } from "./support/clone-guard.ts";

/** A stand-in for the clone: a root with a .keel/ that already holds a store. */
function fakeClone(): string {
  const root = mkdtempSync(path.join(tmpdir(), "keel-clone-guard-"));
  mkdirSync(path.join(root, ".keel"));
  writeFileSync(path.join(root, ".keel", "keel.db"), "old sessions");
  writeFileSync(path.join(root, "package.json"), "{}");
  return root;
}

describe("the clone guard (npm test's global setup)", () => {
  let exitCode: typeof process.exitCode;
  beforeEach(() => {
    exitCode = process.exitCode;
  });
  afterEach(() => {
    process.exitCode = exitCode; // the guard sets it on purpose; this run must not inherit it
  });

  it("passes, and leaves the exit code alone, when a run wrote nothing into the clone (or only where tests may)", () => {
    const root = fakeClone();
    const teardown = guardClone(root);
    mkdirSync(path.join(root, "test-output"));
    writeFileSync(path.join(root, "test-output", "report.json"), "{}");
    expect(() => teardown()).not.toThrow();
    expect(process.exitCode).toBe(exitCode);
  });

  it("fails the run naming the file when a test writes a session into the clone's .keel/", () => {
    const root = fakeClone();
    const teardown = guardClone(root);
    writeFileSync(path.join(root, ".keel", "demo.db"), "a demo session");
    expect(() => teardown()).toThrow(
      /npm test wrote into the clone[\s\S]*\.keel\/ changed:\n {2}\+ demo\.db 14 /,
    );
    expect(process.exitCode).toBe(1);
  });

  it("fails the run when a file of the clone's .keel/ is rewritten in place (same size, new mtime)", () => {
    const root = fakeClone();
    const db = path.join(root, ".keel", "keel.db");
    utimesSync(db, new Date(1_000_000), new Date(1_000_000));
    const teardown = guardClone(root);
    writeFileSync(db, "new sessions");
    expect(() => teardown()).toThrow(/\+ keel\.db 12 [\s\S]*- keel\.db 12 1000000\b/);
  });

  it("fails the run when a test creates an entry at the clone's root, and when it creates the clone's .keel/", () => {
    const root = mkdtempSync(path.join(tmpdir(), "keel-clone-guard-"));
    const teardown = guardClone(root);
    mkdirSync(path.join(root, ".keel"));
    writeFileSync(path.join(root, ".keel", "keel.db"), "x");
    writeFileSync(path.join(root, "memory"), "a SQLite file named memory");
    expect(() => teardown()).toThrow(
      /\+ keel\.db 1 [\s\S]*new at the root: (\.keel, memory|memory, \.keel)/,
    );
  });
});
