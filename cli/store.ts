import { existsSync } from "node:fs";
import { relative } from "node:path";
import { defaultStorePath, postgresStore, type SessionStore, sqliteStore } from "../index.ts";
import { CliError, EXIT, oneLine } from "./errors.ts";

/** `--store memory`: keep nothing (the session lives as long as the command). */
export const MEMORY_STORE = "memory";

/**
 * What `--store` names: nothing kept, a SQLite file, or a PostgreSQL database. A URL is never
 * taken for a file path: `postgres://…` and `postgresql://…` open PostgreSQL, any other scheme
 * is refused.
 */
export type StoreChoice =
  | { kind: "memory" }
  | { kind: "sqlite"; path: string }
  | { kind: "postgres"; url: string };

const POSTGRES_URL = /^postgres(ql)?:\/\//i;
const ANY_URL = /^([a-z][a-z0-9+.-]*):\/\//i;

/** Reads `--store` (default `./.keel/keel.db`). Throws a usage error for a URL of another scheme. */
export function storeChoice(option: string | undefined, cwd = process.cwd()): StoreChoice {
  if (option === MEMORY_STORE) return { kind: "memory" };
  if (option !== undefined && POSTGRES_URL.test(option)) return { kind: "postgres", url: option };
  const scheme = option === undefined ? null : ANY_URL.exec(option);
  if (scheme) {
    throw new CliError(
      `--store takes a SQLite file path, "memory" or a postgres:// URL; "${scheme[1]}://" is none of them (for a SQLite file, give its path without a scheme)`,
      EXIT.usage,
    );
  }
  return { kind: "sqlite", path: option ?? defaultStorePath(cwd) };
}

/** The project's store file: `--store` or `./.keel/keel.db` (never called with "memory" or a URL). */
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

/** The store for messages: its file as the user would type it, or its URL without a password. */
export function shownStore(choice: StoreChoice): string {
  switch (choice.kind) {
    case "memory":
      return "--store memory";
    case "sqlite":
      return shown(choice.path);
    case "postgres":
      return choice.url.replace(/^([^:]+:\/\/[^:@/]*):[^@/]*@/, "$1:***@");
  }
}

/**
 * Opens the store `choice` names (never the memory store: callers make their own). `create:
 * false` returns undefined when a SQLite file does not exist (reading commands never create
 * `.keel/`); `readOnly` opens a SQLite file for reading only, so a store the user cannot write
 * can still be listed and shown. A store's own error (corrupted, read-only, locked, a server
 * that does not answer) is the one line the user sees; anything else is wrapped once.
 */
export async function openStore(
  choice: Exclude<StoreChoice, { kind: "memory" }>,
  options: { create: boolean; readOnly?: boolean },
): Promise<SessionStore | undefined> {
  if (choice.kind === "sqlite" && !options.create && !existsSync(choice.path)) return undefined;
  try {
    return choice.kind === "sqlite"
      ? sqliteStore(choice.path, options.readOnly ? { readOnly: true } : {})
      : await postgresStore(choice.url);
  } catch (error) {
    // A store's own error (session/store-error.ts) already names the store and the fix.
    if (error instanceof Error && error.name === "StoreError") {
      throw new CliError(error.message, EXIT.config);
    }
    if (error instanceof Error && error.name === "MissingPeerError") {
      throw new CliError(
        `${error.message} (beside keel: with -g for a keel installed with npm install -g); or keep nothing with --store memory`,
        EXIT.config,
      );
    }
    throw new CliError(
      `cannot open the session store ${shownStore(choice)}: ${oneLine(error)}`,
      EXIT.config,
    );
  }
}
