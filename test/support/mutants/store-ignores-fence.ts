import type { LeaseStore, SessionStore } from "../../../session/store.ts";

/**
 * MUTANT — a shared store that does not fence: an append carrying a lost lease is written with
 * whatever lease is current, as if the runner still owned the session (the bug of checking the
 * lease in the runner's memory instead of in the append's transaction). A runner paused past
 * its lease then writes beside the new owner. Tests assert that the invariant-13 search FAILS
 * on it.
 */
export function storeIgnoresFence<S extends SessionStore & LeaseStore>(store: S): S {
  const wrapped = Object.create(store) as S;
  wrapped.append = async (sessionId, entries, options = {}) => {
    if (!options.lease) return store.append(sessionId, entries);
    const current = await store.readLease(sessionId);
    const lease = current ? { ...options.lease, token: current.token } : options.lease;
    return store.append(sessionId, entries, { lease });
  };
  return wrapped;
}
