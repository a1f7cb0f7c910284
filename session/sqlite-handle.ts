import type Database from "better-sqlite3";
import type { SqliteSessionStore } from "./sqlite-store.ts";

// Kept out of sqlite-store.ts so that no declaration an embedder compiles against names
// `better-sqlite3`'s types (a package whose types Keel does not ship).
const handles = new WeakMap<SqliteSessionStore, Database.Database>();

/** Called once by `sqliteStore` with the store it returns and its connection. */
export function rememberDatabase(store: SqliteSessionStore, db: Database.Database): void {
  handles.set(store, db);
}

/** The store's `better-sqlite3` handle, for what shares its transactions (the ledger, tests). */
export function sqliteDatabase(store: SqliteSessionStore): Database.Database {
  const db = handles.get(store);
  if (!db) throw new TypeError("sqliteDatabase: not a store made by sqliteStore()");
  return db;
}
