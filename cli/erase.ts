import { deleteStoredSession, redactStoredSession, type SessionStore } from "../index.ts";
import { CliError, EXIT, type ExitCode, oneLine } from "./errors.ts";
import { openStore, refuseMemoryStore, shown, shownStore, storeChoice } from "./store.ts";

export interface EraseOptions {
  json?: boolean;
  store?: string;
  /** Where sessions wrote their files (`keel run`'s: `.keel` in the current directory). */
  dataDir?: string;
}

/** The store, with the session in it, or "not found" naming the fix. */
async function withSession<T>(
  id: string,
  options: EraseOptions,
  what: string,
  fn: (store: SessionStore) => Promise<T>,
): Promise<T> {
  refuseMemoryStore(options.store, `no session "${id}" to ${what}`);
  const choice = storeChoice(options.store);
  if (choice.kind === "memory") throw new Error("unreachable: refuseMemoryStore let memory by");
  const store = await openStore(choice, { create: false });
  const missing = new CliError(
    `no session "${id}" in ${shownStore(choice)} (list them with \`keel sessions\`)`,
    EXIT.notFound,
  );
  if (!store) throw missing;
  try {
    if (!(await store.list()).some((s) => s.sessionId === id)) throw missing;
    return await fn(store);
  } catch (error) {
    if (error instanceof CliError) throw error;
    if ((error as { code?: unknown }).code === "FENCED")
      throw new CliError(`cannot ${what} session "${id}": ${oneLine(error)}`, EXIT.config);
    throw error;
  } finally {
    await store.close();
  }
}

/**
 * `keel rm <id>`: deletes a session from the project's store, with everything it owns (entries,
 * checkpoint, posted inputs, lease, ledger rows), and its folder of files under `.keel/sessions/`.
 * The removed bytes are gone from the SQLite file and its WAL when it returns (docs/stores.md).
 */
export async function removeSession(
  id: string,
  options: EraseOptions,
  out = process.stdout,
): Promise<ExitCode> {
  const removed = await withSession(id, options, "delete", (store) =>
    deleteStoredSession(store, id, { dataDir: options.dataDir }),
  );
  if (options.json) {
    out.write(`${JSON.stringify(removed)}\n`);
    return EXIT.ok;
  }
  const parts = [
    `${removed.entries} entries`,
    removed.inputs ? `${removed.inputs} posted inputs` : "",
    removed.ledgerRows ? `${removed.ledgerRows} ledger rows` : "",
    removed.folder ? `its files (${shown(removed.folder)})` : "",
  ].filter(Boolean);
  out.write(`deleted session ${id}: ${parts.join(", ")}\n`);
  return EXIT.ok;
}

/**
 * `keel redact <id> <entry…> --reason <why>`: replaces the content of those entries (and of the
 * entries holding a copy of it) with `[redacted: <why>]` in the stored log, keeping its shape.
 */
export async function redactEntries(
  id: string,
  entryIds: string[],
  options: EraseOptions & { reason: string },
  out = process.stdout,
): Promise<ExitCode> {
  let result: Awaited<ReturnType<typeof redactStoredSession>>;
  try {
    result = await withSession(id, options, "redact", (store) =>
      redactStoredSession(store, id, entryIds, { reason: options.reason }),
    );
  } catch (error) {
    if (error instanceof TypeError) throw new CliError(error.message, EXIT.usage);
    throw error;
  }
  if (!result.ok) {
    throw new CliError(
      `${result.message}`,
      result.code === "UNKNOWN_ENTRY" ? EXIT.notFound : EXIT.usage,
    );
  }
  if (options.json) {
    out.write(`${JSON.stringify(result)}\n`);
    return EXIT.ok;
  }
  const also = result.redacted.filter((e) => !entryIds.includes(e));
  out.write(
    `redacted ${result.redacted.length} entries of session ${id}${also.length ? ` (${also.join(", ")} held a copy)` : ""}${result.files.length ? `; removed ${result.files.map(shown).join(", ")}` : ""}\n`,
  );
  return EXIT.ok;
}
