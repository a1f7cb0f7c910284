import type { SessionStore } from "../../../session/store.ts";

/**
 * MUTANT — a store that acknowledges an append as soon as it is queued for the next group,
 * before the transaction holding it commits (the bug of resolving a caller at enqueue instead of
 * at its group's commit). A crash or a refusal after the acknowledgement then loses entries the
 * caller was told were durable. Tests assert that the durability check FAILS on it.
 */
export function storeAcksEarly<S extends SessionStore>(store: S): S {
  const wrapped = Object.create(store) as S;
  wrapped.append = (sessionId, entries, options) => {
    void store.append(sessionId, entries, options).catch(() => {});
    return Promise.resolve();
  };
  return wrapped;
}
