import { join } from "node:path";
import { z } from "zod";
import { defineTool, type Tool } from "../define-tool.ts";
import { truncateUtf8, utf8Length } from "../utf8.ts";
import {
  BUILTIN_MAX_BYTES,
  looksBinary,
  MAX_FILE_BYTES,
  notFound,
  openWorkspaceFile,
  statOrUndefined,
} from "./common.ts";
import { globToRegExp } from "./glob-match.ts";
import {
  CALL_DEADLINE_MS,
  type PatternEngine,
  PatternTimeoutError,
  patternRunner,
} from "./pattern-runner.ts";
import { SKIPPED_DIRS, walkFiles } from "./walk.ts";
import {
  isKeelOwn,
  keelOwnError,
  resolveInWorkspace,
  toolError,
  type Workspace,
} from "./workspace.ts";

const DEFAULT_MAX = 100;
const LINE_BYTES = 300;

const parameters = z.object({
  pattern: z
    .string()
    .min(1)
    .describe('JavaScript regular expression searched in each line, e.g. "function\\\\s+main".'),
  path: z
    .string()
    .optional()
    .describe('File or directory to search, relative to the workspace root (default ".").'),
  glob: z
    .string()
    .optional()
    .describe(
      'Only search files whose path (relative to `path`) matches this glob, e.g. "**/*.ts".',
    ),
  ignore_case: z.boolean().optional().describe("Case-insensitive match (default false)."),
  max_results: z
    .number()
    .int()
    .min(1)
    .max(2000)
    .optional()
    .describe(`Maximum matching lines (default ${DEFAULT_MAX}).`),
  offset: z
    .number()
    .int()
    .min(0)
    .optional()
    .describe("Matching lines to skip, for paging (default 0)."),
});

/**
 * `grep`: regex search of file contents with line numbers. The pattern (and the `glob` filter)
 * run in a worker thread with deadlines (see `PatternRunner`): a catastrophic pattern fails the
 * call with `TIMEOUT` and never stalls the event loop. `engine` is a test seam.
 */
export function grepTool(
  ws: Workspace,
  engine: PatternEngine = patternRunner,
): Tool<z.output<typeof parameters>> {
  return defineTool({
    name: "grep",
    description: [
      "Search file contents in the workspace with a JavaScript regular expression, line by line. Use it to find where something is defined or used; use glob to find files by name, read_file to read a file.",
      `path (file or directory) is relative to the workspace root; binary files, files over ${MAX_FILE_BYTES / 1024 / 1024} MiB and ${SKIPPED_DIRS.join("/")} are skipped.`,
      `Returns "path:line: text" per matching line (paths relative to the workspace root, lines cut at ${LINE_BYTES} bytes), in path order; when more remain, a note gives the offset to continue with.`,
    ].join(" "),
    parameters,
    examples: [{ args: { pattern: "TODO", glob: "**/*.ts" } }],
    traits: {
      readOnly: true,
      concurrencySafe: true,
      idempotent: true,
      cancellable: true,
      risk: "low",
    },
    async execute(args, ctx) {
      const {
        pattern,
        path = ".",
        glob,
        ignore_case = false,
        max_results = DEFAULT_MAX,
        offset = 0,
      } = args;
      let re: RegExp;
      try {
        re = new RegExp(pattern, ignore_case ? "i" : "");
      } catch (err) {
        return toolError(
          "INVALID_ARGS",
          `pattern is not a valid JavaScript regular expression: ${(err as Error).message}. Escape special characters such as ( [ { . * + ? with a backslash.`,
        );
      }
      const deadline = performance.now() + CALL_DEADLINE_MS;
      const resolved = await resolveInWorkspace(ws, path);
      if (!resolved.ok) return resolved.error;
      const { real, rel } = resolved;
      if (isKeelOwn(ws, real)) return keelOwnError(rel, "search");
      const info = await statOrUndefined(real);
      if (!info) return notFound(real, rel, "file or directory");
      const prefix = rel === "." ? "" : `${rel}/`;
      let files: { abs: string; shown: string }[] = [{ abs: real, shown: rel }];
      const out: string[] = [];
      let found = 0;
      let bytes = 0;
      let full = false;
      try {
        if (info.isDirectory()) {
          const walk = await walkFiles(real, {
            signal: ctx?.signal,
            include: `${glob ?? ""} ${path}`,
            hidden: (abs) => isKeelOwn(ws, abs),
          });
          const listed = glob
            ? await engine.filterPaths(globToRegExp(glob).source, walk.files, deadline, ctx?.signal)
            : walk.files;
          files = [];
          for (const f of listed) {
            if (!walk.symlinks.has(f)) files.push({ abs: join(real, f), shown: prefix + f });
            else {
              const target = await resolveInWorkspace(ws, prefix + f);
              if (target.ok && !isKeelOwn(ws, target.real)) {
                files.push({ abs: target.real, shown: prefix + f });
              }
            }
          }
        }
        for (const { abs, shown: file } of files) {
          ctx?.signal?.throwIfAborted();
          const text = await readText(abs);
          if (text === undefined) continue;
          const room = max_results - out.length;
          const matches = await engine.matchLines(
            re.source,
            re.flags,
            text,
            { skip: Math.max(0, offset - found), limit: room + 1, lineChars: LINE_BYTES, deadline },
            ctx?.signal,
          );
          found += matches.count;
          for (const [n, lineText] of matches.lines) {
            const line = `${file}:${n}: ${truncateUtf8(lineText.replace(/\r$/, ""), LINE_BYTES).text}`;
            if (out.length >= max_results || bytes + utf8Length(line) + 1 > BUILTIN_MAX_BYTES) {
              full = true;
              break;
            }
            out.push(line);
            bytes += utf8Length(line) + 1;
          }
          if (full) break;
        }
      } catch (err) {
        if (!(err instanceof PatternTimeoutError)) throw err;
        return toolError(
          "TIMEOUT",
          `${err.message}. Pattern: /${pattern}/${ignore_case ? "i" : ""}${glob ? `, glob ${JSON.stringify(glob)}` : ""}.`,
        );
      }
      if (out.length === 0)
        return offset > 0
          ? `No matches after offset ${offset}.`
          : `No matches for /${pattern}/${ignore_case ? "i" : ""} in ${JSON.stringify(rel)}.`;
      if (!full) return out.join("\n");
      const next = { ...args, offset: offset + out.length };
      return {
        ok: true as const,
        content: `${out.join("\n")}\n[showing ${out.length} matching lines from offset ${offset}; more remain. Continue with grep ${JSON.stringify(next)}, or narrow pattern/path/glob]`,
        truncated: true,
        continuation: { tool: "grep", args: next },
      };
    },
  });
}

/** A text file's bytes, or undefined (missing, binary, too large, not a regular file). */
async function readText(abs: string): Promise<Uint8Array | undefined> {
  try {
    const opened = await openWorkspaceFile(abs, abs, "read");
    if (!opened.ok) return undefined;
    try {
      if (opened.size > MAX_FILE_BYTES) return undefined;
      const buf = await opened.handle.readFile();
      return looksBinary(buf) ? undefined : buf;
    } finally {
      await opened.handle.close();
    }
  } catch {
    return undefined;
  }
}
