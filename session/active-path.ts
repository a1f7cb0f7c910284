import type { LogEntry } from "./entries.ts";

/**
 * The active leaf after replaying `entries` (seq order): the last entry, or the target of the
 * last `leaf` entry after it. A `leaf` entry naming an unknown id is ignored.
 * This is a pure function.
 */
export function activeLeaf(
  entries: readonly LogEntry[],
  byId?: ReadonlyMap<string, LogEntry>,
): string | null {
  const known = byId ?? new Map(entries.map((e) => [e.id, e]));
  let leaf: string | null = null;
  for (const e of entries) {
    if (e.type !== "leaf") leaf = e.id;
    else if (e.leafId === null || known.has(e.leafId)) leaf = e.leafId;
  }
  return leaf;
}

/**
 * The path root → `leafId` following `parentId` links (stops at an unknown parent).
 * This is a pure function.
 */
export function pathTo(leafId: string | null, byId: ReadonlyMap<string, LogEntry>): LogEntry[] {
  const path: LogEntry[] = [];
  for (let id = leafId; id !== null; ) {
    const e = byId.get(id);
    if (!e) break;
    path.push(e);
    id = e.parentId;
  }
  return path.reverse();
}

/** The active path of a whole log (replay + walk). This is a pure function. */
export function activePath(entries: readonly LogEntry[]): LogEntry[] {
  const byId = new Map(entries.map((e) => [e.id, e]));
  return pathTo(activeLeaf(entries, byId), byId);
}

/**
 * Adds `entries` (as the store returned them) to `all` and `byId`, frozen, after `seq`; returns
 * the last seq. Throws when the store returned them out of order.
 */
export function replayInto(
  sessionId: string,
  seq: number,
  entries: readonly LogEntry[],
  all: LogEntry[],
  byId: Map<string, LogEntry>,
): number {
  for (const e of entries) {
    if (e.seq <= seq) {
      throw new Error(
        `session ${sessionId}: entry ${e.id} has seq ${e.seq} after seq ${seq}; the store returned entries out of order`,
      );
    }
    seq = e.seq;
    const frozen = Object.freeze(e);
    all.push(frozen);
    byId.set(e.id, frozen);
  }
  return seq;
}
