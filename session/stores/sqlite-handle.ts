import type Database from "better-sqlite3";
import type { SessionStore } from "../store.ts";

/**
 * Runs `fn` now, and again from a timer while another process holds the file's lock, until the
 * store's busy timeout (see `LOCK_SPIN_MS` in session/stores/sqlite-store.ts). `what` names it in errors.
 */
export type RetryBusy = <T>(what: string, fn: () => T) => Promise<T>;

// Kept out of sqlite-store.ts so that no declaration an embedder compiles against names
// `better-sqlite3`'s types (a package whose types Keel does not ship).
const handles = new WeakMap<SessionStore, { db: Database.Database; retryBusy: RetryBusy }>();

/** Called once by `sqliteStore` with the store it returns, its connection and its busy retry. */
export function rememberDatabase(
  store: SessionStore,
  db: Database.Database,
  retryBusy: RetryBusy,
): void {
  handles.set(store, { db, retryBusy });
}

function handle(store: SessionStore) {
  const h = handles.get(store);
  if (!h) throw new TypeError("sqliteDatabase: not a store made by sqliteStore()");
  return h;
}

/** The store's `better-sqlite3` handle, for what shares its transactions (the ledger, tests). */
export function sqliteDatabase(store: SessionStore): Database.Database {
  return handle(store).db;
}

/**
 * Runs `fn` in one IMMEDIATE transaction of the store's connection (joining the current one when
 * called inside a transaction) and waits for another process's lock without stopping the event
 * loop: the asynchronous form of `store.transaction` (the ledger's writes use it).
 */
export function sqliteTransaction<T>(store: SessionStore, fn: () => T): Promise<T> {
  const { db, retryBusy } = handle(store);
  return retryBusy("transaction", () =>
    db.inTransaction ? db.transaction(fn)() : db.transaction(fn).immediate(),
  );
}
