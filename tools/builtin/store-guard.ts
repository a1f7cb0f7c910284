import { lstatSync, readdirSync } from "node:fs";
import path from "node:path";
import type { ToolFailure } from "../../contracts/tool-result.ts";
import { KEEL_DIR, toolError, type Workspace } from "./workspace.ts";

/**
 * Names SQLite creates and deletes by itself beside a database (`-wal`, `-shm`, `-journal`):
 * their identity changes without anyone touching the store, so it is not compared.
 */
const COMPANION = /-(wal|shm|journal)$/;

/**
 * The refusal of a `shell` command whose text names Keel's own files: a `.keel` path component
 * or a protected path (absolute, or relative to the workspace root), or undefined. A guard
 * against a command that means to touch the store, not a boundary: a command can reach the
 * same files without naming them (a glob, `find`, `git clean -x`). This is a pure function.
 */
export function namesKeelOwn(ws: Workspace, command: string): ToolFailure | undefined {
  const named = /(?<![\w.-])\.keel(?![\w.-])/.test(command)
    ? `${KEEL_DIR}/`
    : ws.protected
        .flatMap((p) => forms(ws, p))
        // As a whole path: not inside a longer name (`data/store.db` is not in `mydata/store.db`).
        .find((form) => new RegExp(`(?<![\\w.-])${escapeRegExp(form)}(?![\\w.])`).test(command));
  if (named === undefined) return undefined;
  return toolError(
    "PATH_OUTSIDE_WORKSPACE",
    `The command names ${JSON.stringify(named)}, where Keel keeps its session store: shell commands that name it are refused, whatever they do there. Where: the "command" argument. How to fix: leave ${KEEL_DIR}/ (and the store's files) out of the command; to read a spilled output, use read_file with the path it gave.`,
  );
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** How a command can name protected path `p`: absolute (real and as given), and relative. */
function forms(ws: Workspace, p: string): string[] {
  const out = [p];
  for (const root of [ws.realRoot, ws.root]) {
    const rel = path.relative(root, p);
    if (rel && !rel.startsWith("..") && !path.isAbsolute(rel)) out.push(rel, path.join(root, rel));
  }
  return [...new Set(out)];
}

/**
 * The identity (device and inode) of Keel's own files that a command could remove or replace:
 * the workspace's `.keel/` folder and what it holds at its top, and every protected path, but
 * not SQLite's companion files. Missing ones are left out. Contract: never throws.
 */
export function storeIdentity(ws: Workspace): Map<string, string> {
  const ids = new Map<string, string>();
  const note = (p: string) => {
    if (COMPANION.test(p)) return;
    try {
      const info = lstatSync(p);
      ids.set(p, `${info.dev}:${info.ino}`);
    } catch {}
  };
  const dir = path.join(ws.realRoot, KEEL_DIR);
  note(dir);
  if (ids.has(dir)) {
    try {
      for (const name of readdirSync(dir)) note(path.join(dir, name));
    } catch {}
  }
  for (const p of ws.protected) note(p);
  return ids;
}

/**
 * The paths (relative to the workspace root when inside it) that were in `before` and are now
 * missing or another file; what appeared since is Keel's own doing and not reported. This reads
 * the file system.
 */
export function replacedSince(ws: Workspace, before: Map<string, string>): string[] {
  const now = storeIdentity(ws);
  const gone: string[] = [];
  for (const [p, id] of before) {
    if (now.get(p) === id) continue;
    const rel = path.relative(ws.realRoot, p);
    gone.push(rel.startsWith("..") || path.isAbsolute(rel) ? p : rel.split(path.sep).join("/"));
  }
  return gone.sort();
}
