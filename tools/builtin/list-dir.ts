import type { Dirent } from "node:fs";
import { readdir, readlink } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { defineTool, type Tool } from "../define-tool.ts";
import { notFound, statOrUndefined } from "./common.ts";
import {
  isKeelOwn,
  keelOwnError,
  resolveInWorkspace,
  toolError,
  type Workspace,
} from "./workspace.ts";

const MAX_ENTRIES = 1000;

const parameters = z.object({
  path: z
    .string()
    .optional()
    .describe('Directory relative to the workspace root (default ".", the root).'),
  offset: z.number().int().min(0).optional().describe("Entries to skip, for paging (default 0)."),
});

/** `list_dir`: the entries of one directory, not recursive. */
export function listDirTool(ws: Workspace): Tool<z.output<typeof parameters>> {
  return defineTool({
    name: "list_dir",
    description: [
      "List the entries of one directory in the workspace (not recursive). Paths are relative to the workspace root; the default is the root.",
      "Use glob to find files by name pattern across directories, grep to search file contents.",
      `Returns one entry per line, sorted: directories end with "/", symlinks show "-> target". At most ${MAX_ENTRIES} entries per call; when more remain, a note gives the offset to continue with.`,
    ].join(" "),
    parameters,
    examples: [{ args: { path: "src" } }],
    traits: {
      readOnly: true,
      concurrencySafe: true,
      idempotent: true,
      cancellable: true,
      risk: "low",
    },
    async execute({ path = ".", offset = 0 }) {
      const resolved = await resolveInWorkspace(ws, path);
      if (!resolved.ok) return resolved.error;
      const { real, rel } = resolved;
      if (isKeelOwn(ws, real)) return keelOwnError(rel, "list");
      const info = await statOrUndefined(real);
      if (!info) return notFound(real, rel, "directory");
      if (!info.isDirectory())
        return toolError(
          "INVALID_ARGS",
          `${JSON.stringify(rel)} is a file, not a directory. Use read_file to read it.`,
        );
      const entries = (await readdir(real, { withFileTypes: true }))
        .filter((e) => !isKeelOwn(ws, join(real, e.name)))
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      if (entries.length === 0) return `${rel} is empty.`;
      if (offset >= entries.length)
        return toolError(
          "INVALID_ARGS",
          `offset ${offset} is past the last entry of ${JSON.stringify(rel)} (${entries.length} entries).`,
        );
      const page = entries.slice(offset, offset + MAX_ENTRIES);
      const lines = await Promise.all(page.map((e) => describe(e)));
      const shown = `${lines.join("\n")}`;
      if (offset + MAX_ENTRIES >= entries.length) return shown;
      const args = { path: rel, offset: offset + MAX_ENTRIES };
      return {
        ok: true as const,
        content: `${shown}\n[showing entries ${offset + 1}–${offset + page.length} of ${entries.length}. Continue with list_dir ${JSON.stringify(args)}]`,
        truncated: true,
        continuation: { tool: "list_dir", args },
      };
    },
  });
}

async function describe(entry: Dirent): Promise<string> {
  if (entry.isDirectory()) return `${entry.name}/`;
  if (entry.isSymbolicLink()) {
    const target = await readlink(`${entry.parentPath}/${entry.name}`).catch(() => "?");
    return `${entry.name} -> ${target}`;
  }
  return entry.name;
}
