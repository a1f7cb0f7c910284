// `keel eval` writes each task's files into a fresh workspace; a task set is input like any
// other (issue 27: task files with `../` paths were written outside the workspace).
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadTaskSet, outsideWorkspace } from "../cli/eval-tasks.ts";

const budget = { maxSteps: 3, maxSpendTokens: 1000, timeMs: 10_000 };
const checks = [{ name: "t", command: "true" }];

function taskSet(task: Record<string, unknown>): string {
  const dir = mkdtempSync(path.join(tmpdir(), "keel-evalset-"));
  const file = path.join(dir, "tasks.json");
  writeFileSync(file, JSON.stringify({ budget, tasks: [{ prompt: "p", checks, ...task }] }));
  return file;
}

describe("eval task paths stay inside the run's workspace", () => {
  it.each([
    ["../escaped.txt", /leaves the run's workspace/],
    ["a/../../escaped.txt", /leaves the run's workspace/],
    ["/etc/keel-escaped", /is absolute/],
    ["..\\\\escaped.txt", /leaves the run's workspace/],
  ])(
    "a task file named %s is refused when the task set is read (it was written there)",
    (rel, why) => {
      const file = taskSet({ id: "t1", files: { [rel]: "x" } });
      expect(() => loadTaskSet(file)).toThrow(why);
      expect(existsSync(path.resolve(tmpdir(), "escaped.txt"))).toBe(false);
    },
  );

  it("a task id that is a path is refused (it names the run's temporary folder)", () => {
    expect(() => loadTaskSet(taskSet({ id: "../../x", files: {} }))).toThrow(
      /may hold only letters/,
    );
  });

  it("ordinary nested paths are fine", () => {
    expect(outsideWorkspace("src/a.ts")).toBeUndefined();
    expect(outsideWorkspace("a/./b/../c.txt")).toBeUndefined();
    expect(loadTaskSet(taskSet({ id: "ok-1", files: { "src/a.ts": "x" } })).tasks).toHaveLength(1);
  });
});
