import { constants } from "node:fs";
import { type FileHandle, open, readdir, readlink, realpath, stat, unlink } from "node:fs/promises";
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

/** What a file is, in words, for refusals ("a FIFO", "a socket", …). */
export function kindOf(info: {
  isFIFO(): boolean;
  isSocket(): boolean;
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
}): string {
  if (info.isDirectory()) return "a directory";
  if (info.isFIFO()) return "a FIFO (named pipe)";
  if (info.isSocket()) return "a socket";
  if (info.isCharacterDevice()) return "a character device";
  if (info.isBlockDevice()) return "a block device";
  if (info.isSymbolicLink()) return "a symbolic link";
  return "not a regular file";
}

export type OpenedFile =
  | { ok: true; handle: FileHandle; size: number; created: boolean }
  | { ok: false; error: ToolFailure | "missing" };

/**
 * Opens a workspace file for the built-ins, refusing what could block, redirect or escape:
 * - never blocks in `open()`: `O_NONBLOCK`, so a FIFO without a writer (or a device) does not
 *   hold a thread of libuv's pool; the handle is then checked with `fstat` and anything but a
 *   regular file is refused (closed at once);
 * - `O_NOFOLLOW`: a last path component swapped for a symlink after `resolveInWorkspace`
 *   checked it is refused (ELOOP) instead of followed;
 * - for writes, a regular file with more than one hard link is refused: another name of it
 *   may be outside the workspace. Nothing is truncated before these checks pass.
 * - with `root` (the workspace's real root): the file opened must be inside it, read from the
 *   handle (a folder of the path swapped for a symlink after the check is followed by `open`
 *   and seen here); a file this call created outside is removed again.
 * The checks are on the handle the caller then reads or writes, so a rename between them and
 * the use cannot substitute another file. Missing file: `{ ok: false, error: "missing" }`
 * (created instead when `create` is set).
 */
export async function openWorkspaceFile(
  real: string,
  rel: string,
  mode: "read" | "write",
  options: { create?: boolean; root?: string } = {},
): Promise<OpenedFile> {
  const base = constants.O_NONBLOCK | constants.O_NOFOLLOW;
  const flags =
    mode === "read"
      ? constants.O_RDONLY | base
      : constants.O_RDWR | base | (options.create ? constants.O_CREAT : 0);
  let handle: FileHandle;
  let created = false;
  try {
    if (mode === "write" && options.create) {
      // Exclusive first, to know whether this call created the file.
      try {
        handle = await open(real, flags | constants.O_EXCL, 0o666);
        created = true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
        handle = await open(real, flags & ~constants.O_CREAT);
      }
    } else {
      handle = await open(real, flags);
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return { ok: false, error: "missing" };
    if (code === "ELOOP" || code === "EMLINK")
      return {
        ok: false,
        error: toolError(
          "PATH_OUTSIDE_WORKSPACE",
          `${JSON.stringify(rel)} became a symbolic link after it was checked; it is not followed. Re-run the call with the path of the real file inside the workspace.`,
        ),
      };
    if (code === "ENXIO")
      return {
        ok: false,
        error: toolError(
          "INVALID_ARGS",
          `${JSON.stringify(rel)} is a FIFO or socket with no reader; only regular files can be written.`,
        ),
      };
    if (code === "EISDIR")
      return {
        ok: false,
        error: toolError(
          "INVALID_ARGS",
          `${JSON.stringify(rel)} is a directory; give a file path.`,
        ),
      };
    throw err;
  }
  const info = await handle.stat();
  if (!info.isFile()) {
    await handle.close();
    return {
      ok: false,
      error: toolError(
        "INVALID_ARGS",
        `${JSON.stringify(rel)} is ${kindOf(info)}, not a regular file; only regular files can be ${mode === "read" ? "read" : "written"} (reading a FIFO or device could block forever). ${info.isDirectory() ? "Use list_dir to see its entries." : "Use shell if you really mean to use it."}`,
      ),
    };
  }
  if (mode === "write" && info.nlink > 1) {
    await handle.close();
    return {
      ok: false,
      error: toolError(
        "PATH_OUTSIDE_WORKSPACE",
        `${JSON.stringify(rel)} has ${info.nlink} hard links; another name of the same file may be outside the workspace, so it is not written. To edit it here, first replace it by a copy of its own (shell: cp f f.copy && mv f.copy f).`,
      ),
    };
  }
  const where = options.root === undefined ? undefined : await openedAt(handle, real, info);
  if (options.root !== undefined && !isInside(where, options.root)) {
    await handle.close();
    // Created outside by this call: removed by its real path, not through the swapped folder.
    if (created && where !== undefined) await unlink(where).catch(() => {});
    return {
      ok: false,
      error: toolError(
        "PATH_OUTSIDE_WORKSPACE",
        `${JSON.stringify(rel)} led outside the workspace when it was opened (a folder on its path was replaced by a symbolic link after the path was checked); nothing was ${mode === "read" ? "read" : "written"}. Re-run the call with a path inside the workspace.`,
      ),
    };
  }
  return { ok: true, handle, size: info.size, created };
}

/**
 * Where the file `handle` has open really is: from the handle itself on Linux
 * (`/proc/self/fd`), so a folder of its path swapped for a symlink between the check and the
 * open is seen; elsewhere `real`'s real path now, if it is still the handle's file (device and
 * inode). `undefined` when that cannot be told.
 */
async function openedAt(
  handle: FileHandle,
  real: string,
  info: { dev: number; ino: number },
): Promise<string | undefined> {
  const viaFd = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => undefined);
  if (viaFd !== undefined && path.isAbsolute(viaFd)) return viaFd;
  try {
    const [now, same] = await Promise.all([realpath(real), stat(real)]);
    return same.dev === info.dev && same.ino === info.ino ? now : undefined;
  } catch {
    return undefined;
  }
}

/** `where` (a real path) is `root` or inside it. */
function isInside(where: string | undefined, root: string): boolean {
  if (where === undefined) return false;
  return where === root || where.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}
