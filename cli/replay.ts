import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { builtinTools, type Divergence, replaySession, type ToolDefinition } from "../index.ts";
import { CliError, EXIT, type ExitCode, oneLine } from "./errors.ts";
import { loadSession } from "./sessions.ts";

/** `keel replay` options. */
export interface ReplayCommandOptions {
  store?: string;
  /** An ES module whose default export is the tools (an array, or a function returning one). */
  tools?: string;
  /** A file whose text replaces the instructions the log recorded. */
  instructions?: string;
  /** The recorded model's context window in tokens (when the runtime compacts). */
  contextWindow?: number;
  json?: boolean;
}

/**
 * `keel replay <id>`: replays a stored session through this Keel's charts and hosts with its
 * recorded model answers and tool results (no model or tool runs) and compares what the replay
 * writes with the log. Prints one OK line and returns 0 when they agree; prints the first
 * divergence (entry seq and type, the field, what the log holds, what the replay wrote) and
 * returns `EXIT.diverged` when they do not.
 */
export async function runReplay(
  id: string,
  options: ReplayCommandOptions,
  out: { write(text: string): unknown } = process.stdout,
): Promise<ExitCode> {
  const entries = await loadSession(id, options.store);
  const tools = options.tools
    ? await toolsFrom(options.tools)
    : builtinTools({ root: process.cwd() });
  const instructions = options.instructions ? readText(options.instructions) : undefined;
  const report = await replaySession({
    sessionId: id,
    entries,
    tools,
    ...(instructions !== undefined ? { instructions } : {}),
    ...(options.contextWindow ? { model: { contextWindow: options.contextWindow } } : {}),
  });
  const d = report.divergence;
  if (options.json) {
    out.write(
      `${JSON.stringify({ sessionId: id, entries: report.recorded, divergence: d ?? null })}\n`,
    );
  } else if (d === undefined) {
    out.write(`replay of ${id}: OK, ${report.recorded} entries, no divergence\n`);
  } else {
    out.write(described(id, d));
  }
  return d === undefined ? EXIT.ok : EXIT.diverged;
}

/** A divergence for a person: where, then what the log holds and what the replay wrote. */
function described(id: string, d: Divergence): string {
  const field = d.path === "" ? "" : ` at ${d.path}`;
  return [
    `replay of ${id}: diverges at entry ${d.seq} (${d.type})${field}`,
    `  expected: ${d.expected}`,
    `  got:      ${d.got}`,
    "",
  ].join("\n");
}

/** The tools a module exports (default export: an array of tools, or a function making one). */
async function toolsFrom(file: string): Promise<ToolDefinition[]> {
  const url = pathToFileURL(resolve(file)).href;
  let made: unknown;
  try {
    const mod = (await import(url)) as { default?: unknown };
    made =
      typeof mod.default === "function"
        ? await mod.default({ workspace: process.cwd() })
        : mod.default;
  } catch (error) {
    throw new CliError(`--tools ${file}: cannot load it: ${oneLine(error)}`, EXIT.config);
  }
  if (!Array.isArray(made)) {
    throw new CliError(
      `--tools ${file}: its default export must be an array of tools (or a function returning one), got ${typeof made}`,
      EXIT.config,
    );
  }
  return made as ToolDefinition[];
}

function readText(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (error) {
    throw new CliError(`--instructions ${file}: cannot read it: ${oneLine(error)}`, EXIT.config);
  }
}
