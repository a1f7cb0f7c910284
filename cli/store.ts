import { existsSync } from "node:fs";
import { relative } from "node:path";
import { defaultStorePath, type SqliteSessionStore, sqliteStore } from "../index.ts";
import { CliError, EXIT, oneLine } from "./errors.ts";

/** `--store memory`: keep nothing (the session lives as long as the command). */
export const MEMORY_STORE = "memory";

/** The project's store file: `--store` or `./.keel/keel.db` (never called with "memory"). */
export function storePath(option: string | undefined, cwd = process.cwd()): string {
  return option ?? defaultStorePath(cwd);
}

/**
 * For a command that reads what an earlier command stored: `--store memory` has nothing, so
 * it is refused with a usage error saying why (instead of opening a SQLite file named
 * `memory`).
 */
export function refuseMemoryStore(option: string | undefined, what: string): void {
  if (option === MEMORY_STORE) {
    throw new CliError(
      `--store memory keeps nothing between commands, so there is ${what} (pass the store file the session was run with, or leave --store out for ./.keel/keel.db)`,
      EXIT.usage,
    );
  }
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
