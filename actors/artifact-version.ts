import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFile, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

/**
 * The version of a workspace's files, for binding acceptance evidence to what it observed:
 * `git:<tree id>` of the files git would add (`.gitignore` respected, `.keel/` left out), in a
 * git repository or not.
 *
 * - In a git repository: `git add -A` of the workspace into a temporary index (a copy of the
 *   repository's index, so unchanged files are not hashed again) with `GIT_INDEX_FILE`, objects
 *   written to a temporary object directory (`GIT_OBJECT_DIRECTORY`, the repository's as an
 *   alternate), then `git write-tree`. The user's index, objects and refs are untouched.
 * - Elsewhere: the same with a private, empty repository in the temp directory, kept for the
 *   life of the function so later reads reuse its index (only changed files are hashed again).
 *
 * Contract: rejects with an Error saying what failed (no `git` on the PATH, the folder missing).
 */
export function workspaceVersion(root: string): () => Promise<string> {
  const abs = path.resolve(root);
  let scratch: Promise<string> | undefined;
  // Reads are serialised: two `git add` into one temporary index would race.
  let queue: Promise<unknown> = Promise.resolve();
  const read = async (): Promise<string> => {
    scratch ??= mkdtemp(path.join(tmpdir(), "keel-artifact-"));
    const dir = await scratch;
    const top = await git(["rev-parse", "--show-toplevel"], { cwd: abs }).catch(() => undefined);
    const index = path.join(dir, "index");
    const objects = path.join(dir, "objects");
    await mkdir(objects, { recursive: true });
    if (top !== undefined) {
      const repoTop = top.trim();
      const gitDir = path.resolve(
        abs,
        (await git(["rev-parse", "--git-dir"], { cwd: abs })).trim(),
      );
      const userIndex = path.join(gitDir, "index");
      await copyFile(userIndex, index).catch(() => rm(index, { force: true }));
      const env = {
        GIT_INDEX_FILE: index,
        GIT_OBJECT_DIRECTORY: objects,
        GIT_ALTERNATE_OBJECT_DIRECTORIES: path.join(gitDir, "objects"),
      };
      await git(["add", "-A", "--", ".", ":(exclude).keel"], { cwd: abs, env });
      const prefix = path.relative(repoTop, abs);
      const args = ["write-tree"];
      if (prefix !== "") args.push(`--prefix=${prefix.split(path.sep).join("/")}/`);
      return `git:${(await git(args, { cwd: abs, env })).trim()}`;
    }
    const gitDir = path.join(dir, "repo");
    const env = { GIT_DIR: gitDir, GIT_WORK_TREE: abs, GIT_INDEX_FILE: index };
    await git(["init", "-q", "--bare", gitDir], { cwd: abs });
    await git(["add", "-A", "--", ".", ":(exclude).keel"], { cwd: abs, env });
    return `git:${(await git(["write-tree"], { cwd: abs, env })).trim()}`;
  };
  return () => {
    const next = queue.then(read, read);
    queue = next.catch(() => {});
    return next;
  };
}

/** A version of a plain value (an embedder's `artifact()` result that is not a string). */
export function digestOf(value: unknown): string {
  return `sha256:${createHash("sha256").update(JSON.stringify(value)).digest("hex").slice(0, 40)}`;
}

function git(
  args: string[],
  options: { cwd: string; env?: Record<string, string> },
): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      "git",
      args,
      {
        cwd: options.cwd,
        env: { ...process.env, ...options.env, GIT_TERMINAL_PROMPT: "0" },
        maxBuffer: 16 * 1024 * 1024,
      },
      (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        const why =
          (err as NodeJS.ErrnoException).code === "ENOENT"
            ? "git is not installed (install git, or pass createAgent({ acceptance: { artifact } }))"
            : stderr.trim() || err.message;
        reject(
          new Error(`reading the workspace version of ${options.cwd}: git ${args[0]}: ${why}`),
        );
      },
    );
  });
}
