import { StoreError } from "../store-error.ts";

/**
 * How a PostgreSQL store names its server and its failures: the URL without its password, and
 * the pg driver's errors (SQLSTATEs, connection codes) turned into `StoreError`s that say what
 * to fix. A leaf file so both the store and its append path can use them without a cycle.
 */

/** A URL without its password, for messages. */
export function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(unparseable URL)";
  }
}

/** `error` as the `StoreError` a caller can act on when pg reports it; any other error unchanged. */
export function asStoreError(error: unknown, where: string, what: string): unknown {
  if (error instanceof StoreError) return error;
  const e = error as { code?: string; constraint?: string; message?: string };
  if (e.code === "23505") {
    const seq = e.constraint === "entries_pkey";
    return new StoreError(
      seq ? "SEQ_CONFLICT" : "DUPLICATE_ID",
      seq
        ? `postgres store ${where}: ${what}: another writer appended the same seq to this session first (one writer per session: reopen it to continue)`
        : `postgres store ${where}: ${what}: an entry with this id is already stored (${e.message})`,
      { cause: error },
    );
  }
  if (
    e.code === "ECONNREFUSED" ||
    e.code === "ENOTFOUND" ||
    e.code === "28P01" ||
    e.code === "3D000"
  ) {
    return new StoreError(
      "IO",
      `postgres store ${where}: ${what} failed (${e.code}: ${e.message}): check that the server runs, the URL (host, port, database, user, password) and that this user may connect`,
      { cause: error },
    );
  }
  if (typeof e.code === "string" && /^[0-9A-Z]{5}$/.test(e.code)) {
    return new StoreError(
      "IO",
      `postgres store ${where}: ${what} failed (${e.code}: ${e.message})`,
      {
        cause: error,
      },
    );
  }
  return error;
}
