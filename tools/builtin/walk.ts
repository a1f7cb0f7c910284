import type { Dirent } from "node:fs";
import { readdir } from "node:fs/promises";
import path from "node:path";

/** Directories a walk never enters unless the search names them. */
export const SKIPPED_DIRS = [".git", "node_modules"];

/** Most directory entries one walk visits; past it the result says it stopped early. */
export const MAX_VISITED = 200_000;

export interface WalkResult {
  /** Files (and symlinks) as paths relative to the start directory, `/`-separated, sorted. */
  files: string[];
  /** The entries of `files` that are symlinks (their targets may lie outside the workspace). */
  symlinks: Set<string>;
  /** True when `MAX_VISITED` stopped the walk. */
  incomplete: boolean;
}

/**
 * Lists the files under `dir` iteratively (no recursion), without following symlinked
 * directories (so it cannot leave the workspace or loop), skipping `SKIPPED_DIRS` unless
 * `include` names them, and always skipping what `hidden` says (Keel's own folders and files).
 * Checks `signal` between directories.
 */
export async function walkFiles(
  dir: string,
  options: { signal?: AbortSignal; include?: string; hidden?: (abs: string) => boolean } = {},
): Promise<WalkResult> {
  const skip = SKIPPED_DIRS.filter((d) => !options.include?.includes(d));
  const files: string[] = [];
  const symlinks = new Set<string>();
  const queue: string[] = [""];
  let visited = 0;
  while (queue.length > 0) {
    options.signal?.throwIfAborted();
    const rel = queue.pop()!;
    let entries: Dirent[];
    try {
      entries = await readdir(path.join(dir, rel), { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      if (++visited > MAX_VISITED) return { files: files.sort(), symlinks, incomplete: true };
      const child = rel === "" ? entry.name : `${rel}/${entry.name}`;
      if (options.hidden?.(path.join(dir, child))) continue;
      if (entry.isDirectory()) {
        if (!skip.includes(entry.name)) queue.push(child);
      } else {
        files.push(child);
        if (entry.isSymbolicLink()) symlinks.add(child);
      }
    }
  }
  return { files: files.sort(), symlinks, incomplete: false };
}
