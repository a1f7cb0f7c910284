import { lstat, realpath } from "node:fs/promises";
import path from "node:path";
import type { ToolFailure } from "../../contracts/tool-result.ts";

/**
 * The folder Keel keeps its own state in (the default session store, spilled outputs): at any
 * depth of the workspace, the tools never list, search or write inside one.
 */
export const KEEL_DIR = ".keel";

/** The directory every built-in tool is confined to. */
export interface Workspace {
  /** The root as given (absolute). */
  root: string;
  /** `realpath(root)`, what every resolved path is checked against. */
  realRoot: string;
  /**
   * Real absolute paths (files or folders) the tools never list, search or write, besides
   * `.keel/` folders: e.g. a session store file kept elsewhere in the workspace.
   */
  protected: readonly string[];
}

/**
 * True when `real` (an absolute real path, as `resolveInWorkspace` gives) is Keel's own: inside
 * a `.keel` folder of the workspace, or one of `ws.protected`.
 */
export function isKeelOwn(ws: Workspace, real: string): boolean {
  const rel = insideOf(ws.realRoot, real);
  if (rel?.split(path.sep).includes(KEEL_DIR)) return true;
  return ws.protected.some((p) => real === p || real.startsWith(p + path.sep));
}

/** The refusal for a path that is Keel's own (see {@link isKeelOwn}). */
export function keelOwnError(rel: string, action: "list" | "search" | "write"): ToolFailure {
  return toolError(
    "PATH_OUTSIDE_WORKSPACE",
    `${JSON.stringify(rel)} is where Keel keeps its session store: the tools do not ${action} there. Where: the "path" argument. How to fix: use a path outside ${KEEL_DIR}/ (and outside the store's files).`,
  );
}

export type ResolvedPath =
  | { ok: true; abs: string; real: string; rel: string; exists: boolean }
  | { ok: false; error: ToolFailure };

/**
 * Resolves a model-supplied path (relative to the workspace root, or absolute) and refuses,
 * with `PATH_OUTSIDE_WORKSPACE`, anything that lands outside the root: `..`, absolute paths
 * elsewhere, and symlinks leading out — the real path of the target, or of its nearest
 * existing ancestor when it does not exist yet, must be inside `realRoot`; a dangling symlink
 * is refused. (A concurrent rename between this check and the use is not defended against.)
 * Contract of the result: `rel` uses `/` and is `"."` for the root.
 */
export async function resolveInWorkspace(ws: Workspace, input: string): Promise<ResolvedPath> {
  if (typeof input !== "string" || input.includes("\0"))
    return outside(ws, String(input), "the path contains a NUL byte");
  const abs = path.resolve(ws.realRoot, input === "" ? "." : input);
  const lexical = insideOf(ws.realRoot, abs) ?? insideOf(ws.root, abs);
  if (lexical === undefined) return outside(ws, input, `it resolves to ${abs}`);
  const absInReal = path.join(ws.realRoot, lexical);
  let probe = absInReal;
  const missing: string[] = [];
  for (;;) {
    try {
      const real = await realpath(probe);
      if (insideOf(ws.realRoot, real) === undefined)
        return outside(ws, input, `a symlink leads to ${real}`);
      const full = path.join(real, ...missing);
      return {
        ok: true,
        abs: absInReal,
        real: full,
        rel: toRel(ws.realRoot, full),
        exists: missing.length === 0,
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      const link = await lstat(probe).catch(() => undefined);
      if (link?.isSymbolicLink())
        return outside(ws, input, `${toRel(ws.realRoot, probe)} is a symlink to a missing target`);
      missing.unshift(path.basename(probe));
      const parent = path.dirname(probe);
      if (parent === probe) return outside(ws, input, "no existing ancestor");
      probe = parent;
    }
  }
}

function insideOf(root: string, abs: string): string | undefined {
  const rel = path.relative(root, abs);
  if (rel === "") return ".";
  if (rel.startsWith("..") && (rel === ".." || rel.startsWith(`..${path.sep}`))) return undefined;
  if (path.isAbsolute(rel)) return undefined;
  return rel;
}

function toRel(realRoot: string, abs: string): string {
  const rel = path.relative(realRoot, abs);
  return rel === "" ? "." : rel.split(path.sep).join("/");
}

function outside(ws: Workspace, input: string, why: string): ResolvedPath {
  return {
    ok: false,
    error: {
      ok: false,
      code: "PATH_OUTSIDE_WORKSPACE",
      retryable: false,
      message: `Path ${JSON.stringify(input)} is outside the workspace (${why}). Where: the "path" argument. How to fix: use a path relative to the workspace root ${ws.realRoot} (e.g. "src/index.ts") that stays inside it; ".." and symlinks leading out are refused.`,
    },
  };
}

/** A `ToolFailure` with a code, for the built-ins' own errors. */
export function toolError(
  code: ToolFailure["code"],
  message: string,
  retryable = false,
): ToolFailure {
  return { ok: false, code, message, retryable };
}
