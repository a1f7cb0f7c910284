import type { CheckpointLoad, CheckpointStore } from "../checkpoint.ts";
import type { LogEntry } from "../entries.ts";
import { redactEntry } from "../redaction.ts";
import type { SessionStore, SessionSummary } from "../store.ts";
import { checkBatch, StoreError } from "../store-error.ts";

interface MemorySession {
  /** Each entry as a JSON copy (see `jsonCopy`): nobody can mutate what is stored. */
  entries: LogEntry[];
  /** Each entry's seq, parallel to `entries` (ascending). */
  seqs: number[];
  ids: Set<string>;
  lastSeq: number;
  createdAt: number;
  updatedAt: number;
}

/**
 * A session store held in memory, for tests and ephemeral sessions. Entries are stored as JSON
 * copies (the same round trip as the SQLite store, see `jsonCopy`), so neither
 * the writer nor a reader can change stored data by mutating its objects. "Durable" means: in
 * this process's memory.
 * Same contract as every store (the conformance suite runs against it): a batch that breaks
 * seq order or repeats an id is rejected whole. It keeps projection checkpoints like SQLite, so
 * a log over it can drop checkpointed history from memory (the JSON here is the only copy then).
 */
export function memoryStore(): SessionStore & CheckpointStore {
  const sessions = new Map<string, MemorySession>();
  /** The latest projection checkpoint of each session (like SQLite's `checkpoints` table). */
  const saved = new Map<string, { seq: number; body: string }>();
  let closed = false;
  const ensureOpen = () => {
    if (closed)
      throw new StoreError("CLOSED", "memory store: used after close(); open a new store");
  };
  function loadFromCheckpointSync(sessionId: string): CheckpointLoad | null {
    ensureOpen();
    const session = sessions.get(sessionId);
    const checkpoint = saved.get(sessionId);
    if (!session || !checkpoint) return null;
    const end = upTo(session, checkpoint.seq);
    return {
      seq: checkpoint.seq,
      body: checkpoint.body,
      tail: decode(session, end, session.entries.length),
      loadPrefix: async () => {
        ensureOpen();
        return decode(session, 0, end);
      },
      loadPrefixSync: () => {
        ensureOpen();
        return decode(session, 0, end);
      },
    };
  }

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
      const encoded = entries.map((e) => jsonCopy(e) as LogEntry);
      const session: MemorySession = existing ?? {
        entries: [],
        seqs: [],
        ids: new Set<string>(),
        lastSeq: 0,
        createdAt: entries[0].at,
        updatedAt: 0,
      };
      for (let i = 0; i < entries.length; i++) {
        session.entries.push(encoded[i]);
        session.seqs.push(entries[i].seq);
        session.ids.add(entries[i].id);
      }
      session.lastSeq = entries[entries.length - 1].seq;
      session.updatedAt = entries[entries.length - 1].at;
      sessions.set(sessionId, session);
    },
    async load(sessionId) {
      ensureOpen();
      return (sessions.get(sessionId)?.entries ?? []).map((e) => jsonCopy(e) as LogEntry);
    },
    async loadAfter(sessionId, afterSeq) {
      ensureOpen();
      const session = sessions.get(sessionId);
      return session ? decode(session, upTo(session, afterSeq), session.entries.length) : [];
    },
    async deleteSession(sessionId) {
      ensureOpen();
      const entries = sessions.get(sessionId)?.entries.length ?? 0;
      sessions.delete(sessionId);
      const checkpoints = saved.delete(sessionId) ? 1 : 0;
      return { sessionId, entries, checkpoints, inputs: 0, leases: 0, ledgerRows: 0 };
    },
    async redactEntries(sessionId, entryIds, redaction) {
      ensureOpen();
      const session = sessions.get(sessionId);
      const at = new Map<string, number>();
      session?.entries.forEach((e, i) => {
        at.set(e.id, i);
      });
      const ids = [...new Set(entryIds)];
      const missing = ids.find((id) => !at.has(id));
      if (!session || missing !== undefined)
        throw new StoreError(
          "NOT_FOUND",
          `memory store: session ${sessionId} has no entry ${JSON.stringify(missing ?? ids[0])}; nothing was redacted`,
        );
      // Every copy is made before any is stored: a type that cannot be redacted changes nothing.
      const redacted = ids.map(
        (id) => jsonCopy(redactEntry(session.entries[at.get(id)!], redaction)) as LogEntry,
      );
      redacted.forEach((e, i) => {
        session.entries[at.get(ids[i])!] = e;
      });
      saved.delete(sessionId);
      return redacted.map((e) => jsonCopy(e) as LogEntry).sort((a, b) => a.seq - b.seq);
    },
    async saveCheckpoint(sessionId, seq, body) {
      ensureOpen();
      const current = saved.get(sessionId);
      if (!current || seq >= current.seq) saved.set(sessionId, { seq, body });
    },
    async loadFromCheckpoint(sessionId) {
      return loadFromCheckpointSync(sessionId);
    },
    loadFromCheckpointSync,
    async loadUpTo(sessionId, seq) {
      ensureOpen();
      const session = sessions.get(sessionId);
      return session ? decode(session, 0, upTo(session, seq)) : [];
    },
    loadUpToSync(sessionId, seq) {
      ensureOpen();
      const session = sessions.get(sessionId);
      return session ? decode(session, 0, upTo(session, seq)) : [];
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

/** How many of the session's entries have seq ≤ `seq` (binary search). */
function upTo(session: MemorySession, seq: number): number {
  let lo = 0;
  let hi = session.seqs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (session.seqs[mid] <= seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function decode(session: MemorySession, from: number, to: number): LogEntry[] {
  const out: LogEntry[] = [];
  for (let i = from; i < to; i++) out.push(jsonCopy(session.entries[i]) as LogEntry);
  return out;
}

/**
 * What `JSON.parse(JSON.stringify(value))` gives, built without the text: objects and arrays are
 * copied, `toJSON` is called, `undefined`, functions and symbols are dropped from objects (null
 * in arrays), non-finite numbers become null, a BigInt throws as JSON does — but strings are
 * shared, not copied (they are immutable), so the cost is the value's structure, not its bytes:
 * a 10 MB prompt is not encoded, flattened and decoded on the event loop at every append and read.
 * This is a pure function.
 */
export function jsonCopy(value: unknown): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? value : null;
    case "bigint":
      throw new TypeError("Do not know how to serialize a BigInt");
    case "object": {
      if (value === null) return null;
      const toJSON = (value as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === "function") return jsonCopy(toJSON.call(value, ""));
      if (Array.isArray(value)) {
        const out = new Array(value.length);
        for (let i = 0; i < value.length; i++) {
          const v = jsonCopy(value[i]);
          out[i] = v === undefined ? null : v;
        }
        return out;
      }
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(value)) {
        const v = jsonCopy((value as Record<string, unknown>)[key]);
        if (v === undefined) continue;
        if (key === "__proto__")
          Object.defineProperty(out, key, {
            value: v,
            enumerable: true,
            writable: true,
            configurable: true,
          });
        else out[key] = v;
      }
      return out;
    }
    default:
      return undefined;
  }
}
