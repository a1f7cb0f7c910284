import { mkdir } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { defineTool, type Tool } from "../define-tool.ts";
import { utf8Length } from "../utf8.ts";
import { openWorkspaceFile } from "./common.ts";
import {
  isKeelOwn,
  keelOwnError,
  resolveInWorkspace,
  toolError,
  type Workspace,
} from "./workspace.ts";

const parameters = z.object({
  path: z
    .string()
    .describe("File path relative to the workspace root; parent directories are created."),
  content: z.string().describe("The complete new content of the file."),
});

/**
 * `write_file`: creates or overwrites a whole file. Not concurrency-safe (it runs alone in its
 * batch): a concurrent read_file of the same file has no resource key and could see a torn
 * write, and models expect "write then read" in one message to happen in that order.
 */
export function writeFileTool(ws: Workspace): Tool<z.output<typeof parameters>> {
  return defineTool({
    name: "write_file",
    description: [
      "Create a file, or replace a file's whole content, in the workspace. Paths are relative to the workspace root; missing parent directories are created.",
      "Use edit_file instead to change part of an existing file (cheaper and safer), and read_file first if you have not seen the file.",
      "Returns one line: the path, bytes and lines written, and whether the file was created or overwritten.",
    ].join(" "),
    parameters,
    examples: [{ args: { path: "notes/todo.md", content: "# TODO\n- write tests\n" } }],
    traits: {
      readOnly: false,
      concurrencySafe: false,
      idempotent: false,
      cancellable: false,
      risk: "medium",
    },
    async execute({ path: input, content }) {
      const resolved = await resolveInWorkspace(ws, input);
      if (!resolved.ok) return resolved.error;
      const { real, rel } = resolved;
      if (isKeelOwn(ws, real)) return keelOwnError(rel, "write");
      await mkdir(path.dirname(real), { recursive: true });
      // Not truncated until checked on the handle: a regular file, not a symlink swapped in
      // after the path check, not hard-linked (another name may be outside the workspace).
      const opened = await openWorkspaceFile(real, rel, "write", {
        create: true,
        root: ws.realRoot,
      });
      if (!opened.ok) {
        return opened.error === "missing"
          ? toolError("NOT_FOUND", `the directory of ${JSON.stringify(rel)} disappeared; retry.`)
          : opened.error;
      }
      try {
        const bytes = Buffer.from(content, "utf8");
        await opened.handle.truncate(0);
        await opened.handle.write(bytes, 0, bytes.length, 0);
      } finally {
        await opened.handle.close();
      }
      const before = !opened.created;
      const lines =
        content === "" ? 0 : content.split("\n").length - (content.endsWith("\n") ? 1 : 0);
      return `${before ? "Overwrote" : "Created"} ${rel}: ${utf8Length(content)} bytes, ${lines} line${lines === 1 ? "" : "s"}.`;
    },
  });
}
