import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { workspaceVersion } from "../actors/artifact-version.ts";

const git = (cwd: string, ...args: string[]) =>
  execFileSync("git", args, {
    cwd,
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: "t",
      GIT_AUTHOR_EMAIL: "t@t",
      GIT_COMMITTER_NAME: "t",
      GIT_COMMITTER_EMAIL: "t@t",
    },
  }).toString();

function objectCount(repo: string): number {
  const dir = path.join(repo, ".git", "objects");
  return readdirSync(dir)
    .filter((d) => /^[0-9a-f]{2}$/.test(d))
    .reduce((n, d) => n + readdirSync(path.join(dir, d)).length, 0);
}

describe("the default artifact version of a workspace", () => {
  it("outside git: changes with a file's content, not with an ignored file or .keel/", async () => {
    const ws = mkdtempSync(path.join(tmpdir(), "keel-ver-"));
    writeFileSync(path.join(ws, "a.txt"), "one");
    writeFileSync(path.join(ws, ".gitignore"), "build/\n");
    const version = workspaceVersion(ws);
    const v1 = await version();
    expect(v1).toMatch(/^git:[0-9a-f]{40}$/);
    mkdirSync(path.join(ws, "build"));
    writeFileSync(path.join(ws, "build", "out.js"), "ignored");
    mkdirSync(path.join(ws, ".keel"));
    writeFileSync(path.join(ws, ".keel", "keel.db"), "log");
    expect(await version()).toBe(v1);
    writeFileSync(path.join(ws, "a.txt"), "two");
    const v2 = await version();
    expect(v2).not.toBe(v1);
    writeFileSync(path.join(ws, "a.txt"), "one");
    expect(await version()).toBe(v1); // content, not time
  });

  it("in a git repository: the tree of the working files, with the user's index, objects and refs untouched", async () => {
    const repo = mkdtempSync(path.join(tmpdir(), "keel-ver-git-"));
    git(repo, "init", "-q");
    writeFileSync(path.join(repo, "a.txt"), "one");
    mkdirSync(path.join(repo, "sub"));
    writeFileSync(path.join(repo, "sub", "b.txt"), "bee");
    git(repo, "add", "a.txt");
    git(repo, "commit", "-qm", "first");
    writeFileSync(path.join(repo, "a.txt"), "changed, not staged");
    const index = readFileSync(path.join(repo, ".git", "index"));
    const objects = objectCount(repo);
    const status = git(repo, "status", "--porcelain");

    const v = await workspaceVersion(repo)();
    expect(objectCount(repo)).toBe(objects); // its blobs and trees went to a scratch directory
    // The same tree git itself would write for the working files (computed here in a scratch index).
    const scratch = path.join(mkdtempSync(path.join(tmpdir(), "keel-idx-")), "index");
    const env = { ...process.env, GIT_INDEX_FILE: scratch };
    execFileSync("git", ["add", "-A"], { cwd: repo, env });
    const expected = execFileSync("git", ["write-tree"], { cwd: repo, env }).toString().trim();
    expect(v).toBe(`git:${expected}`);

    expect(readFileSync(path.join(repo, ".git", "index")).equals(index)).toBe(true);
    expect(git(repo, "status", "--porcelain")).toBe(status);
    const sub = await workspaceVersion(path.join(repo, "sub"))();
    const subTree = execFileSync("git", ["rev-parse", `${expected}:sub`], { cwd: repo })
      .toString()
      .trim();
    expect(sub).toBe(`git:${subTree}`);
  });
});
