// Taking a session's lease (docs/many-processes.md): free, released or expired, or held by a
// process of this host that no longer exists. Apart from SessionLease so that what takes a
// lease without running the session (an answer applied by `keel approve`) needs none of it.

import { hostname } from "node:os";
import type { Lease } from "../session/store.ts";
import type { SessionLeaseOptions } from "./session-options.ts";

/** `host:pid`: the default lease owner, which lets a process of the same host see a dead holder. */
export function defaultLeaseOwner(): string {
  return `${hostname()}:${process.pid}`;
}

/**
 * Takes the session's lease: free, released or expired; or held by a process of this host that
 * no longer exists (its `host:pid` owner name says so), by compare-and-set on its token.
 */
export async function takeLease(
  options: SessionLeaseOptions,
  sessionId: string,
): Promise<(Lease & { takeover: boolean }) | null> {
  const { store, owner, ttlMs } = options;
  const held = await store.acquireLease(sessionId, owner, ttlMs);
  if (held) return held;
  const current = await store.readLease(sessionId);
  const match = current && /^(.*):(\d+)$/.exec(current.owner);
  if (!current || !match || match[1] !== hostname() || processAlive(Number(match[2]))) return null;
  const taken = await store.acquireLease(sessionId, owner, ttlMs, { ifToken: current.token });
  return taken && { ...taken, takeover: true };
}

function processAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
