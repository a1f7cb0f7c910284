// The SQLite store's error helpers: how a better-sqlite3 error becomes a StoreError that names
// the file and the fix, which errors are a lock to wait out and which a refusal of one batch, and
// the backoff between retries. A leaf, so that the store, its opening and its migrations share
// one wording of each failure without importing one another.
import { StoreError } from "../store-error.ts";

/**
 * What went wrong opening the file, in one message that names the path and the fix for that
 * cause: corrupted (`CORRUPT`), locked by another process (`LOCKED`), or not writable
 * (`NOT_WRITABLE`). A `StoreError` passes through unchanged.
 */
export function openError(error: unknown, path: string): unknown {
  if (error instanceof StoreError) return error;
  const code = (error as { code?: string }).code ?? "";
  const sqlite = `SQLite: ${(error as Error).message}`;
  if (code === "SQLITE_NOTADB" || code.startsWith("SQLITE_CORRUPT")) {
    return new StoreError(
      "CORRUPT",
      `the session store ${path} is not a SQLite database or is corrupted (${sqlite}): move it aside and run again to start a new store, or pass another store path`,
      { cause: error },
    );
  }
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) {
    return new StoreError(
      "LOCKED",
      `the session store ${path} is locked by another process (${sqlite}): wait for it to finish, or stop it`,
      { cause: error },
    );
  }
  if (
    code.startsWith("SQLITE_READONLY") ||
    code.startsWith("SQLITE_CANTOPEN") ||
    code === "SQLITE_PERM" ||
    code === "SQLITE_AUTH"
  ) {
    return new StoreError(
      "NOT_WRITABLE",
      `the session store ${path} cannot be opened for writing by this user (${sqlite}): make the file and its folder writable, or pass another store path`,
      { cause: error },
    );
  }
  if (code.startsWith("SQLITE_")) {
    return new StoreError("IO", `the session store ${path} cannot be opened (${sqlite})`, {
      cause: error,
    });
  }
  return error;
}

/** A refusal of one call's batch, which fails that call alone (see `appendGroup`). */
export function isRefusal(error: unknown): boolean {
  if (!(error instanceof StoreError)) return false;
  return error.code === "FENCED" || error.code === "SEQ_CONFLICT" || error.code === "DUPLICATE_ID";
}

/** Another connection holds the lock this write needs (nothing of the try was written). */
export function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && code.startsWith("SQLITE_BUSY");
}

/** The failure of a write that found the file locked for all of `busyTimeoutMs`. */
export function busy(path: string, what: string, ms: number, cause: unknown): StoreError {
  return new StoreError(
    "BUSY",
    `sqlite store ${path}: ${what}: the file stayed locked by other writing processes for ${ms} ms (busyTimeoutMs), so nothing was written. Processes writing one SQLite file take turns on its lock; past a few busy writers use PostgreSQL (postgresStore, docs/many-processes.md), or raise busyTimeoutMs`,
    { cause },
  );
}

/** The wait before retry `attempt` (0-based) of a write that found the file locked: 1 … 16 ms, jittered. */
export function backoff(attempt: number): number {
  return 2 ** Math.min(attempt, 4) * (0.5 + Math.random());
}

/** Resolves after `ms` milliseconds: the timer a write waits on between tries. */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * A better-sqlite3 error of operation `what` as a `StoreError` naming the file and the fix
 * (`DUPLICATE_ID`, `LOCKED`, `NOT_WRITABLE`, `IO`); anything else passes through unchanged.
 */
export function asStoreError(error: unknown, path: string, what: string): unknown {
  if (error instanceof StoreError) return error;
  const code = (error as { code?: string }).code ?? "";
  if (code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY") {
    return new StoreError(
      "DUPLICATE_ID",
      `sqlite store ${path}: ${what}: an entry with this id or seq is already stored (${(error as Error).message})`,
      { cause: error },
    );
  }
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) {
    return new StoreError(
      "LOCKED",
      `sqlite store ${path}: ${what} failed: the file is locked by another process (${code}); wait for it to finish, or stop it`,
      { cause: error },
    );
  }
  if (code.startsWith("SQLITE_READONLY") || code === "SQLITE_CANTOPEN" || code === "SQLITE_PERM") {
    return new StoreError(
      "NOT_WRITABLE",
      `sqlite store ${path}: ${what} failed (${code}): make the file and its directory writable, or pass another store path`,
      { cause: error },
    );
  }
  if (code.startsWith("SQLITE_")) {
    return new StoreError(
      "IO",
      `sqlite store ${path}: ${what} failed (${code}: ${(error as Error).message})`,
      { cause: error },
    );
  }
  return error;
}
