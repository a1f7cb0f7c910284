import { existsSync, realpathSync, statSync } from "node:fs";
import path from "node:path";
import type { Tool } from "../define-tool.ts";
import { editFileTool } from "./edit-file.ts";
import { globTool } from "./glob.ts";
import { grepTool } from "./grep.ts";
import { listDirTool } from "./list-dir.ts";
import { readFileTool } from "./read-file.ts";
import { checkSandboxOptions, type ShellSandbox } from "./sandbox.ts";
import { shellTool } from "./shell.ts";
import type { Workspace } from "./workspace.ts";
import { writeFileTool } from "./write-file.ts";

export interface BuiltinToolsOptions {
  /** The workspace: an existing directory every tool is confined to. */
  root: string;
  /**
   * Files or folders (absolute, or relative to `root`) the tools must never list, search or
   * write, besides every `.keel/` folder: e.g. a session store file kept in the workspace and
   * its `-wal` / `-shm` companions. (`shell` is not confined: it refuses a command that names
   * them or `.keel`, and fails one that removed or replaced them; see `tools/builtin/store-guard.ts`.)
   */
  protect?: readonly string[];
  /**
   * How `shell` commands are confined (docs/tools.md, "The shell's sandbox"). Default `{}`: under
   * bubblewrap on Linux when it is installed (workspace writable, the rest read-only, a private
   * `/tmp`, no network), unconfined otherwise. `false`: always unconfined.
   */
  sandbox?: ShellSandbox;
}

/**
 * The built-in tools, all confined to `root` (which must be an existing directory; throws
 * otherwise): read_file, write_file, edit_file, list_dir, glob, grep, shell. `.keel/` folders
 * (where Keel keeps sessions and spilled outputs) and `protect`ed paths are hidden from
 * list_dir, glob and grep, and refused to write_file and edit_file; read_file still reads them
 * (a spilled output's continuation points there).
 */
export function builtinTools({ root, protect = [], sandbox = {} }: BuiltinToolsOptions): Tool[] {
  const abs = path.resolve(root);
  if (!statSync(abs, { throwIfNoEntry: false })?.isDirectory()) {
    throw new Error(`builtinTools: root ${JSON.stringify(root)} is not an existing directory`);
  }
  checkSandboxOptions(abs, sandbox);
  const ws: Workspace = {
    root: abs,
    realRoot: realpathSync(abs),
    protected: protect.map((p) => realPathOf(path.resolve(abs, p))),
  };
  return [
    readFileTool(ws),
    writeFileTool(ws),
    editFileTool(ws),
    listDirTool(ws),
    globTool(ws),
    grepTool(ws),
    shellTool(ws, sandbox),
  ];
}

/** The real path of `abs`, or of its nearest existing ancestor joined with the rest. */
function realPathOf(abs: string): string {
  if (existsSync(abs)) return realpathSync(abs);
  const parent = path.dirname(abs);
  return parent === abs ? abs : path.join(realPathOf(parent), path.basename(abs));
}
