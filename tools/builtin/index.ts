import { realpathSync, statSync } from "node:fs";
import path from "node:path";
import type { Tool } from "../define-tool.ts";
import { editFileTool } from "./edit-file.ts";
import { globTool } from "./glob.ts";
import { grepTool } from "./grep.ts";
import { listDirTool } from "./list-dir.ts";
import { readFileTool } from "./read-file.ts";
import { shellTool } from "./shell.ts";
import type { Workspace } from "./workspace.ts";
import { writeFileTool } from "./write-file.ts";

/**
 * The built-in tools, all confined to `root` (which must be an existing directory; throws
 * otherwise): read_file, write_file, edit_file, list_dir, glob, grep, shell.
 */
export function builtinTools({ root }: { root: string }): Tool[] {
  const abs = path.resolve(root);
  if (!statSync(abs, { throwIfNoEntry: false })?.isDirectory()) {
    throw new Error(`builtinTools: root ${JSON.stringify(root)} is not an existing directory`);
  }
  const ws: Workspace = { root: abs, realRoot: realpathSync(abs) };
  return [
    readFileTool(ws),
    writeFileTool(ws),
    editFileTool(ws),
    listDirTool(ws),
    globTool(ws),
    grepTool(ws),
    shellTool(ws),
  ];
}
