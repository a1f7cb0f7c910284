import type { LogEntry } from "../../../session/entries.ts";
import type { SessionStore } from "../../../session/store.ts";

/** A broken reopen for the crash search (test/crash.race.test.ts). */
export interface CrashMutant {
  /** Wraps the store the new process opens. */
  store?: (durable: SessionStore) => SessionStore;
  /** Opens the log without running crash recovery. */
  skipRecovery?: boolean;
}

export const crashMutants = {
  /**
   * Broken on purpose (invariant 8 of docs/architecture.md): the store does not keep a start record's `idempotent` flag
   * and reads every start as idempotent, so recovery re-runs a call logged as non-idempotent
   * whenever its tool is idempotent now.
   */
  everyStartIdempotent: {
    store: (durable) => ({
      ...durable,
      kind: durable.kind,
      append: (id, entries) => durable.append(id, entries),
      list: () => durable.list(),
      close: () => durable.close(),
      load: async (id) =>
        (await durable.load(id)).map(
          (e): LogEntry => (e.type === "call_started" ? { ...e, idempotent: true } : e),
        ),
    }),
  },
  /** Broken on purpose (invariant 1 of docs/architecture.md): the reopened session skips crash recovery. */
  skipsRecovery: { skipRecovery: true },
} satisfies Record<string, CrashMutant>;
