import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import path from "node:path";
import { canErase, type DeletedSession, type SessionStore } from "../session/store.ts";
import { sessionDataDir } from "./spill-output.ts";

/** What deleting a session removed: the store's counts, and the folder of its files, if any. */
export interface DeletedSessionData extends DeletedSession {
  /** `<dataDir>/sessions/<folder>` when it existed and was removed (its spilled outputs). */
  folder?: string;
}

/**
 * Deletes a stored session and everything it owns: `store.deleteSession` (entries, checkpoint,
 * posted inputs, lease, ledger rows; all or nothing), then the folder of the files it wrote
 * beside its log, `<dataDir>/sessions/<folder>` (spilled outputs; `dataDir` as the agent's,
 * default `.keel`). The store goes first: if it refuses (`FENCED`, another runner owns the
 * session), nothing is removed. What `agent.deleteSession(id)` does after closing the session,
 * and `keel rm`. Throws a TypeError when the store cannot delete sessions.
 */
export async function deleteStoredSession(
  store: SessionStore,
  sessionId: string,
  options: { dataDir?: string } = {},
): Promise<DeletedSessionData> {
  if (typeof sessionId !== "string") {
    throw new TypeError(`deleteSession: the session id must be a string, got ${typeof sessionId}`);
  }
  if (!canErase(store)) {
    throw new TypeError(
      `deleteSession: the store (${store.kind}) cannot delete sessions (it has no deleteSession); Keel's memory, SQLite and PostgreSQL stores can`,
    );
  }
  const removed = await store.deleteSession(sessionId);
  const dataDir = options.dataDir ?? ".keel";
  const folder = sessionDataDir(dataDir, sessionId);
  // The folder name is one session's alone and a direct child of sessions/ (sessionFolderName).
  const parent = path.resolve(dataDir, "sessions");
  if (path.dirname(path.resolve(folder)) !== parent || !existsSync(folder)) return removed;
  await rm(folder, { recursive: true, force: true });
  return { ...removed, folder };
}
