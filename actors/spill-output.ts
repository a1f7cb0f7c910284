import { createHash } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";

/** Where a spilled output went: the file and the SHA-256 (hex) of its content. */
export interface SpillRecord {
  path: string;
  sha256: string;
}

/**
 * The runtime's `spill` for tools whose `outputBudget` says `overflow: "spill"`: writes the whole
 * output, UTF-8, to `<dir>/<callId>-<first 12 hex digits of its SHA-256>.txt` and resolves to
 * that path (`dir` joined as given, so relative when `dir` is: a `read_file` tool rooted at the
 * working directory can page through it) and the content's SHA-256. The hash in the name keeps
 * two outputs of one call id apart (models reuse ids across messages); the same output twice is
 * one file.
 * Contract of the returned function: may reject (disk full, no permission); the output is then
 * truncated instead, and the note says saving failed.
 */
export function createSpill(dir: string) {
  return async (content: string, callId: string): Promise<SpillRecord> => {
    const sha256 = createHash("sha256").update(content, "utf8").digest("hex");
    const safeId = callId.replace(/[^A-Za-z0-9_.-]/g, "_") || "call";
    const file = path.join(dir, `${safeId}-${sha256.slice(0, 12)}.txt`);
    await mkdir(dir, { recursive: true });
    try {
      await writeFile(file, content, { encoding: "utf8", flag: "wx" });
    } catch (err) {
      // Same call id and same content hash: the file already holds this output.
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    return { path: file, sha256 };
  };
}

/** A session's spill folder under the agent's `dataDir`: `<dataDir>/sessions/<folder>/spill`. */
export function sessionSpillDir(dataDir: string, sessionId: string): string {
  return path.join(sessionDataDir(dataDir, sessionId), "spill");
}

/**
 * The folder of the files a session writes beside its log, `<dataDir>/sessions/<folder>`, where
 * `<folder>` is {@link sessionFolderName}: always a direct child of `<dataDir>/sessions`, and
 * one session's alone, so deleting the session can remove it whole.
 */
export function sessionDataDir(dataDir: string, sessionId: string): string {
  return path.join(dataDir, "sessions", sessionFolderName(sessionId));
}

/**
 * A session id as one folder name, one-to-one: letters, digits, `_`, `-` and `.` stay, every
 * other byte of its UTF-8 becomes `%XX`, and so does a `.` of an id that is only dots (no `.` or
 * `..` segment); the empty id is `%`. Two ids never share a folder. This is a pure function.
 */
export function sessionFolderName(sessionId: string): string {
  if (sessionId === "") return "%";
  const encode = (ch: string) =>
    [...Buffer.from(ch, "utf8")]
      .map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`)
      .join("");
  const name = sessionId.replace(/[^A-Za-z0-9_.-]/gu, encode);
  return /^\.+$/.test(name) ? name.replaceAll(".", "%2E") : name;
}
