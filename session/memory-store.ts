import type { LogEntry } from "./entries.ts";
import type { SessionStore, SessionSummary } from "./store.ts";
import { checkBatch, StoreError } from "./store-error.ts";

interface MemorySession {
  /** Each entry as JSON: the same round trip as SQLite, and nobody can mutate what is stored. */
  entries: string[];
  ids: Set<string>;
  lastSeq: number;
  createdAt: number;
  updatedAt: number;
}

/**
 * A session store held in memory, for tests and ephemeral sessions. Entries are stored as JSON
 * text (the same round trip as the SQLite store, and cheaper than `structuredClone`), so neither
 * the writer nor a reader can change stored data by mutating its objects. "Durable" means: in
 * this process's memory.
 * Same contract as every store (the conformance suite runs against it): a batch that breaks
 * seq order or repeats an id is rejected whole.
 */
export function memoryStore(): SessionStore {
  const sessions = new Map<string, MemorySession>();
  let closed = false;
  const ensureOpen = () => {
    if (closed)
      throw new StoreError("CLOSED", "memory store: used after close(); open a new store");
  };
  return {
    kind: "memory",
    async append(sessionId, entries) {
      ensureOpen();
      const existing = sessions.get(sessionId);
      const error = checkBatch(sessionId, existing?.lastSeq ?? 0, entries);
      if (error) throw error;
      const dup = existing && entries.find((e) => existing.ids.has(e.id));
      if (dup) {
        throw new StoreError(
          "DUPLICATE_ID",
          `session ${sessionId}: entry id ${dup.id} is already stored`,
        );
      }
      if (entries.length === 0) return;
      const encoded = entries.map((e) => JSON.stringify(e));
      const session = existing ?? {
        entries: [],
        ids: new Set<string>(),
        lastSeq: 0,
        createdAt: entries[0].at,
        updatedAt: 0,
      };
      for (let i = 0; i < entries.length; i++) {
        session.entries.push(encoded[i]);
        session.ids.add(entries[i].id);
      }
      session.lastSeq = entries[entries.length - 1].seq;
      session.updatedAt = entries[entries.length - 1].at;
      sessions.set(sessionId, session);
    },
    async load(sessionId) {
      ensureOpen();
      return (sessions.get(sessionId)?.entries ?? []).map((e) => JSON.parse(e) as LogEntry);
    },
    async list(): Promise<SessionSummary[]> {
      ensureOpen();
      return [...sessions].map(([sessionId, s]) => ({
        sessionId,
        entries: s.entries.length,
        createdAt: s.createdAt,
        updatedAt: s.updatedAt,
      }));
    },
    async close() {
      closed = true;
    },
  };
}
