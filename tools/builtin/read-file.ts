import { z } from "zod";
import { defineTool, type Tool } from "../define-tool.ts";
import { truncateUtf8, utf8Length } from "../utf8.ts";
import {
  BUILTIN_MAX_BYTES,
  looksBinary,
  MAX_FILE_BYTES,
  notFound,
  openWorkspaceFile,
} from "./common.ts";
import { resolveInWorkspace, toolError, type Workspace } from "./workspace.ts";

const DEFAULT_LIMIT = 2000;

const parameters = z.object({
  path: z.string().describe('File path relative to the workspace root (e.g. "src/index.ts").'),
  offset: z.number().int().min(1).optional().describe("First line to show, 1-based (default 1)."),
  limit: z
    .number()
    .int()
    .min(1)
    .max(100_000)
    .optional()
    .describe(`Maximum number of lines (default ${DEFAULT_LIMIT}).`),
});

/** `read_file`: numbered lines of a text file, paged by line with a continuation. */
export function readFileTool(ws: Workspace): Tool<z.output<typeof parameters>> {
  return defineTool({
    name: "read_file",
    description: [
      "Read a text file in the workspace. Use it to look at a file's contents before editing it.",
      "Do not use it for directories (use list_dir), to find files (use glob) or to search content (use grep).",
      "Paths are relative to the workspace root.",
      `Returns the lines prefixed with their 1-based line number and a tab ("    12\\tcode"), at most ${DEFAULT_LIMIT} lines or ${BUILTIN_MAX_BYTES / 1024} KiB per call.`,
      "When more remains, the output ends with a note and a continuation: call read_file again with the given offset.",
    ].join(" "),
    parameters,
    examples: [
      { args: { path: "src/index.ts" } },
      { args: { path: "README.md", offset: 200, limit: 100 } },
    ],
    traits: {
      readOnly: true,
      concurrencySafe: true,
      idempotent: true,
      cancellable: true,
      risk: "low",
      outputBudget: { maxBytes: BUILTIN_MAX_BYTES + 1024, overflow: "truncate" },
    },
    async execute({ path, offset = 1, limit = DEFAULT_LIMIT }, ctx) {
      const resolved = await resolveInWorkspace(ws, path);
      if (!resolved.ok) return resolved.error;
      const { real, rel } = resolved;
      // Opened without blocking and checked on the handle: a FIFO, socket or device is refused
      // before anything waits on it (a FIFO without a writer blocks open() forever).
      const opened = await openWorkspaceFile(real, rel, "read", { root: ws.realRoot });
      if (!opened.ok) return opened.error === "missing" ? notFound(real, rel) : opened.error;
      let buf: Buffer;
      try {
        if (opened.size > MAX_FILE_BYTES) {
          return toolError(
            "INVALID_ARGS",
            `${JSON.stringify(rel)} is ${opened.size} bytes, over the ${MAX_FILE_BYTES}-byte read limit. Use grep to find the part you need, or shell with head/sed -n.`,
          );
        }
        buf = await opened.handle.readFile({ signal: ctx?.signal });
      } finally {
        await opened.handle.close();
      }
      if (looksBinary(buf))
        return `${rel} is a binary file (${buf.length} bytes); its contents are not shown.`;
      if (buf.length === 0) return `${rel} is empty (0 bytes).`;
      return renderLines(rel, buf.toString("utf8"), offset, limit);
    },
  });
}

/** Numbered lines from `offset`, within `limit` lines and the byte budget, with a continuation. */
export function renderLines(rel: string, text: string, offset: number, limit: number) {
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  const total = lines.length;
  if (offset > total) {
    return toolError(
      "INVALID_ARGS",
      `offset ${offset} is past the end of ${JSON.stringify(rel)}, which has ${total} line${total === 1 ? "" : "s"}. Use an offset between 1 and ${total}.`,
    );
  }
  const width = String(Math.min(total, offset + limit - 1)).length;
  let out = "";
  let bytes = 0;
  let next = offset;
  const last = Math.min(total, offset + limit - 1);
  while (next <= last) {
    const body = lines[next - 1].endsWith("\r") ? lines[next - 1].slice(0, -1) : lines[next - 1];
    const line = `${String(next).padStart(Math.max(6, width))}\t${body}\n`;
    const size = utf8Length(line);
    if (bytes + size > BUILTIN_MAX_BYTES) {
      if (next === offset) {
        const cut = truncateUtf8(line, BUILTIN_MAX_BYTES - 200);
        out = `${cut.text}\n[line ${next} is ${size} bytes; only its first ${cut.bytes} bytes are shown. Use grep or shell (e.g. cut -c) to read the rest of it.]\n`;
        next++;
      }
      break;
    }
    out += line;
    bytes += size;
    next++;
  }
  if (next > total) return out.endsWith("\n") ? out.slice(0, -1) : out;
  const args = { path: rel, offset: next, ...(limit !== DEFAULT_LIMIT && { limit }) };
  return {
    ok: true as const,
    content: `${out}[showing lines ${offset}–${next - 1} of ${total}. Continue with read_file ${JSON.stringify(args)}]`,
    truncated: true,
    continuation: { tool: "read_file", args },
  };
}
