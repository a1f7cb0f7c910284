import type { FileHandle } from "node:fs/promises";
import { z } from "zod";
import { defineTool, type Tool } from "../define-tool.ts";
import { lineAt, looksBinary, MAX_FILE_BYTES, notFound, openWorkspaceFile } from "./common.ts";
import {
  isKeelOwn,
  keelOwnError,
  resolveInWorkspace,
  toolError,
  type Workspace,
} from "./workspace.ts";

const parameters = z.object({
  path: z.string().describe("File path relative to the workspace root."),
  old_string: z
    .string()
    .min(1)
    .describe(
      "Exact text to replace, including whitespace and indentation; must occur exactly once unless replace_all is true.",
    ),
  new_string: z.string().describe("The replacement text."),
  replace_all: z.boolean().optional().describe("Replace every occurrence (default false)."),
});

/** Start offsets of every non-overlapping occurrence of `needle`. Linear (indexOf). */
export function occurrences(haystack: string, needle: string): number[] {
  const found: number[] = [];
  for (let i = haystack.indexOf(needle); i !== -1; i = haystack.indexOf(needle, i + needle.length))
    found.push(i);
  return found;
}

/** 1-based line numbers of sorted offsets, in one pass. */
function linesOf(text: string, offsets: number[]): number[] {
  const lines: number[] = [];
  let line = 1;
  let from = 0;
  for (const offset of offsets) {
    line = lineAt(text, offset, from, line);
    from = offset;
    lines.push(line);
  }
  return lines;
}

/** `edit_file`: exact string replacement; refuses absent or ambiguous matches. Not concurrency-safe (see write_file). */
export function editFileTool(ws: Workspace): Tool<z.output<typeof parameters>> {
  return defineTool({
    name: "edit_file",
    description: [
      "Replace an exact piece of text in an existing file of the workspace. Paths are relative to the workspace root.",
      "old_string must match the file exactly (whitespace included) and occur once; add surrounding lines to make it unique, or set replace_all to change every occurrence.",
      "Use write_file to create a file or rewrite it entirely; read_file first to copy the exact text.",
      "Returns one line: how many occurrences were replaced and at which line numbers.",
    ].join(" "),
    parameters,
    examples: [
      {
        args: {
          path: "src/app.ts",
          old_string: "const port = 3000;",
          new_string: "const port = 8080;",
        },
      },
    ],
    traits: {
      readOnly: false,
      concurrencySafe: false,
      idempotent: false,
      cancellable: false,
      risk: "medium",
    },
    async execute({ path, old_string, new_string, replace_all = false }) {
      const resolved = await resolveInWorkspace(ws, path);
      if (!resolved.ok) return resolved.error;
      const { real, rel } = resolved;
      if (isKeelOwn(ws, real)) return keelOwnError(rel, "write");
      // One handle for the read and the write, opened without following a symlink swapped in
      // after the check and refused when hard-linked: the file edited is the file read.
      const opened = await openWorkspaceFile(real, rel, "write", { root: ws.realRoot });
      if (!opened.ok) return opened.error === "missing" ? notFound(real, rel) : opened.error;
      try {
        return await editOpened(
          opened.handle,
          opened.size,
          rel,
          old_string,
          new_string,
          replace_all,
        );
      } finally {
        await opened.handle.close();
      }
    },
  });
}

async function editOpened(
  handle: FileHandle,
  size: number,
  rel: string,
  old_string: string,
  new_string: string,
  replace_all: boolean,
) {
  if (size > MAX_FILE_BYTES)
    return toolError(
      "INVALID_ARGS",
      `${JSON.stringify(rel)} is larger than ${MAX_FILE_BYTES} bytes; edit it with shell tools.`,
    );
  const buf = await handle.readFile();
  if (looksBinary(buf))
    return toolError(
      "INVALID_ARGS",
      `${JSON.stringify(rel)} is a binary file; edit_file only edits text.`,
    );
  const text = buf.toString("utf8");
  if (old_string === new_string)
    return toolError(
      "INVALID_ARGS",
      "old_string and new_string are identical; nothing would change. Give the new text in new_string.",
    );
  const found = occurrences(text, old_string);
  if (found.length === 0) return toolError("INVALID_ARGS", absentMessage(rel, text, old_string));
  const lines = linesOf(text, found);
  if (found.length > 1 && !replace_all) {
    return toolError(
      "INVALID_ARGS",
      `old_string occurs ${found.length} times in ${JSON.stringify(rel)} (lines ${lines.join(", ")}); nothing was changed. Include more surrounding lines in old_string to make it unique, or set replace_all: true to replace all ${found.length}.`,
    );
  }
  const parts: string[] = [];
  let from = 0;
  for (const at of found) {
    parts.push(text.slice(from, at), new_string);
    from = at + old_string.length;
  }
  parts.push(text.slice(from));
  const next = Buffer.from(parts.join(""), "utf8");
  await handle.truncate(0);
  await handle.write(next, 0, next.length, 0);
  return `Edited ${rel}: replaced ${found.length} occurrence${found.length === 1 ? "" : "s"} (line${lines.length === 1 ? "" : "s"} ${lines.join(", ")}).`;
}

function absentMessage(rel: string, text: string, oldString: string): string {
  const base = `old_string was not found in ${JSON.stringify(rel)}; nothing was changed.`;
  const firstLine = oldString
    .split("\n")
    .find((l) => l.trim() !== "")
    ?.trim();
  if (firstLine) {
    const at = text.indexOf(firstLine);
    if (at !== -1) {
      return `${base} Its first non-blank line appears (ignoring indentation) at line ${lineAt(text, at)}, so the whitespace or the following lines differ. Re-read that part with read_file and copy the text exactly.`;
    }
  }
  return `${base} Re-read the file with read_file and copy the exact text (whitespace and indentation included).`;
}
