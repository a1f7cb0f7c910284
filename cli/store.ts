import { existsSync } from "node:fs";
import { relative } from "node:path";
import { defaultStorePath, type SqliteSessionStore, sqliteStore } from "../index.ts";
import { CliError, EXIT, oneLine } from "./errors.ts";

/** The project's store file: `--store` or `./.keel/keel.db`. */
export function storePath(option: string | undefined, cwd = process.cwd()): string {
  return option ?? defaultStorePath(cwd);
}

/** A path as the user would type it (relative to the cwd when inside it). */
export function shown(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith("..") ? `./${rel}` : path;
}

/**
 * Opens the SQLite store. `create: false` returns undefined when the file does not exist
 * (reading commands never create `.keel/`). Failures become a config error with the fix.
 */
export function openStore(path: string, create: boolean): SqliteSessionStore | undefined {
  if (!create && !existsSync(path)) return undefined;
  try {
    return sqliteStore(path);
  } catch (error) {
    throw new CliError(
      `cannot open the session store ${shown(path)}: ${oneLine(error)} (check permissions, or pass --store <file>)`,
      EXIT.config,
    );
  }
}
