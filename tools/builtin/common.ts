import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import type { ToolFailure } from "../../contracts/tool-result.ts";
import { closestName } from "../edit-distance.ts";
import { toolError } from "./workspace.ts";

/** Output budget of the built-ins that page their own output (read_file, grep, glob, list_dir). */
export const BUILTIN_MAX_BYTES = 32 * 1024;

/** Files larger than this are not read into memory by read_file / grep / edit_file. */
export const MAX_FILE_BYTES = 64 * 1024 * 1024;

/** True when the first 8 KiB contain a NUL byte. */
export function looksBinary(buf: Buffer): boolean {
  return buf.subarray(0, 8192).includes(0);
}

/** NOT_FOUND naming the path and, when the parent exists, the closest sibling name. */
export async function notFound(abs: string, rel: string, what = "file"): Promise<ToolFailure> {
  let hint = "";
  try {
    const siblings = await readdir(path.dirname(abs));
    const close = closestName(path.basename(abs), siblings);
    if (close)
      hint = ` Did you mean ${JSON.stringify(path.posix.join(path.posix.dirname(rel), close))}?`;
  } catch {
    hint = ` The directory ${JSON.stringify(path.posix.dirname(rel))} does not exist either.`;
  }
  return toolError(
    "NOT_FOUND",
    `No such ${what}: ${JSON.stringify(rel)} (paths are relative to the workspace root).${hint} Use list_dir or glob to find it.`,
  );
}

/** stat, or undefined when the path does not exist. */
export async function statOrUndefined(abs: string) {
  try {
    return await stat(abs);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw err;
  }
}

/** 1-based line number of UTF-16 `offset` in `text`. Linear. */
export function lineAt(text: string, offset: number, fromOffset = 0, fromLine = 1): number {
  let line = fromLine;
  for (
    let i = text.indexOf("\n", fromOffset);
    i !== -1 && i < offset;
    i = text.indexOf("\n", i + 1)
  )
    line++;
  return line;
}
