import { z } from "zod";
import { defineTool, type Tool } from "../define-tool.ts";
import { notFound, statOrUndefined } from "./common.ts";
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

const DEFAULT_MAX = 500;

const parameters = z.object({
  pattern: z
    .string()
    .min(1)
    .describe(
      'Glob matched against paths relative to `path`: ** (any depth), *, ?, [abc], {a,b}. E.g. "**/*.ts", "src/*.{js,ts}".',
    ),
  path: z
    .string()
    .optional()
    .describe('Directory to search from, relative to the workspace root (default ".").'),
  max_results: z
    .number()
    .int()
    .min(1)
    .max(10_000)
    .optional()
    .describe(`Maximum paths returned (default ${DEFAULT_MAX}).`),
  offset: z.number().int().min(0).optional().describe("Matches to skip, for paging (default 0)."),
});

/**
 * `glob`: file paths by name pattern; never reads contents. The pattern is matched in a worker
 * thread with deadlines (see `PatternRunner`): a pattern that backtracks catastrophically fails
 * the call with `TIMEOUT` and never stalls the event loop. `engine` is a test seam.
 */
export function globTool(
  ws: Workspace,
  engine: PatternEngine = patternRunner,
): Tool<z.output<typeof parameters>> {
  return defineTool({
    name: "glob",
    description: [
      "Find files in the workspace whose path matches a glob pattern. It matches names only and does NOT search file contents (use grep for that).",
      'The pattern is matched against paths relative to `path` (default: the workspace root): "*.ts" matches only that directory, "**/*.ts" every depth.',
      `Symlinked directories are not followed; ${SKIPPED_DIRS.join(" and ")} are skipped unless named in the pattern or path.`,
      "Returns matching paths relative to the workspace root, one per line, sorted; when more remain a note gives the offset to continue with.",
    ].join(" "),
    parameters,
    examples: [
      { args: { pattern: "**/*.test.ts" } },
      { args: { pattern: "*.{json,md}", path: "docs" } },
    ],
    traits: {
      readOnly: true,
      concurrencySafe: true,
      idempotent: true,
      cancellable: true,
      risk: "low",
    },
    async execute({ pattern, path = ".", max_results = DEFAULT_MAX, offset = 0 }, ctx) {
      const resolved = await resolveInWorkspace(ws, path);
      if (!resolved.ok) return resolved.error;
      const { real, rel } = resolved;
      if (isKeelOwn(ws, real)) return keelOwnError(rel, "search");
      const info = await statOrUndefined(real);
      if (!info) return notFound(real, rel, "directory");
      if (!info.isDirectory())
        return toolError(
          "INVALID_ARGS",
          `${JSON.stringify(rel)} is a file; give a directory as path.`,
        );
      const re = globToRegExp(pattern.startsWith("./") ? pattern.slice(2) : pattern);
      const walk = await walkFiles(real, {
        signal: ctx?.signal,
        include: `${pattern} ${path}`,
        hidden: (abs) => isKeelOwn(ws, abs),
      });
      const prefix = rel === "." ? "" : `${rel}/`;
      let kept: string[];
      try {
        const deadline = performance.now() + CALL_DEADLINE_MS;
        kept = await engine.filterPaths(re.source, walk.files, deadline, ctx?.signal);
      } catch (err) {
        if (!(err instanceof PatternTimeoutError)) throw err;
        return toolError("TIMEOUT", `${err.message}. Pattern: ${JSON.stringify(pattern)}.`);
      }
      const matches = kept.map((f) => prefix + f);
      const note = walk.incomplete
        ? "\n[the search stopped after visiting 200000 entries; narrow the path]"
        : "";
      if (matches.length === 0) {
        const hint =
          !pattern.includes("/") && !pattern.startsWith("**")
            ? ` "${pattern}" matches only directly inside ${JSON.stringify(rel)}; use "**/${pattern}" for every depth.`
            : "";
        return `No files match ${JSON.stringify(pattern)} under ${JSON.stringify(rel)}.${hint}${note}`;
      }
      const page = matches.slice(offset, offset + max_results);
      if (offset + max_results >= matches.length) return page.join("\n") + note;
      const args = {
        pattern,
        path: rel,
        offset: offset + max_results,
        ...(max_results !== DEFAULT_MAX && { max_results }),
      };
      return {
        ok: true as const,
        content: `${page.join("\n")}\n[showing matches ${offset + 1}–${offset + page.length} of ${matches.length}. Continue with glob ${JSON.stringify(args)}]${note}`,
        truncated: true,
        continuation: { tool: "glob", args },
      };
    },
  });
}
