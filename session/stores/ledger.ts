import { createHash } from "node:crypto";
import type { Clock } from "../../contracts/clock.ts";
import type { ToolFailure } from "../../contracts/tool-result.ts";

/** `started`: the effect began and its end was not recorded; `done`: `result` is final. */
export type LedgerStatus = "started" | "done";

export interface LedgerRecord {
  caller: string;
  key: string;
  fingerprint: string;
  status: LedgerStatus;
  /** The stored result (JSON), when `done`. */
  result?: unknown;
  createdAt: number;
  updatedAt: number;
}

/** How one `run` ended. `ran`: `fn` ran now; `replayed`: the stored result, `fn` not called. */
export type LedgerOutcome<T> =
  | { type: "ran"; result: T }
  | { type: "replayed"; result: T }
  | { type: "failed"; failure: ToolFailure };

export interface RunOptions {
  /**
   * `true` (SQLite and PostgreSQL ledgers): `fn` must perform its effect through `ctx.transact(effect)`;
   * the effect and the ledger row commit in ONE transaction, so they happen together or not at all.
   */
  atomic?: boolean;
}

export interface RunContext {
  /**
   * Runs `effect` inside the ledger's transaction (atomic runs only), with the store's handle
   * (SQLite: the `better-sqlite3` database, and `effect` must be synchronous; PostgreSQL: the
   * `pg` client of the transaction). Its return value is the result recorded.
   */
  transact<R>(effect: (db: unknown) => R | Promise<R>): Promise<R>;
}

/**
 * An idempotency ledger: `(caller, key) → fingerprint, status, result`.
 *
 * `run(caller, key, payload, fn)`:
 * - no row (or an expired one): runs `fn` and records its result (`ran`);
 * - same key, different payload fingerprint → `failed` with `PARAMETER_MISMATCH`, `fn` not called;
 * - same key already `done` → `replayed` with the stored result, `fn` not called;
 * - same key in flight in this process → waits for it and replays its result;
 * - same key `started` by a run that has not finished (a crash, or another process running it
 *   now) → `failed` with `OUTCOME_UNKNOWN`: the effect may or may not have happened; `fn` is not
 *   called.
 *
 * Across processes the decision is one statement: the `started` row is claimed by an insert
 * that does nothing when a live row exists (claim-or-get), so of two processes racing one key
 * exactly one runs `fn`.
 *
 * Atomicity. External effects (files, HTTP): the ledger claims `started` (durably) BEFORE
 * calling `fn` and writes `done` after; the effect itself is not in any transaction, so a crash
 * between them leaves `started` — reported as outcome unknown, never silently re-run. If `fn`
 * throws, the row stays `started` and the error propagates (the effect may have partly happened).
 * Store effects (`{ atomic: true }`, SQLite or PostgreSQL ledger): the claim, the effect and the
 * `done` row commit in one transaction — a crash or throw before commit leaves none of them, so
 * a retry runs it again safely; a concurrent claim waits for that transaction.
 *
 * Retention: rows not updated for `retentionMs` are treated as absent and purged (`purge()`,
 * also run lazily). A key reused after that runs again.
 */
export interface Ledger {
  /** How long a finished key is remembered. */
  readonly retentionMs: number;
  /**
   * Runs `fn` once per (caller, key): a finished key returns its recorded result without
   * running `fn`, the same key with a different payload is `PARAMETER_MISMATCH`.
   */
  run<T>(
    caller: string,
    key: string,
    payload: unknown,
    fn: (ctx: RunContext) => Promise<T> | T,
    options?: RunOptions,
  ): Promise<LedgerOutcome<T>>;
  /** The live (unexpired) row, if any. */
  get(caller: string, key: string): Promise<LedgerRecord | undefined>;
  /** Deletes rows older than the retention window; resolves to how many. */
  purge(): Promise<number>;
}

/** How an atomic claim ended: claimed (the effect ran and committed with its row), or the live row. */
export type AtomicClaim<R> = { claimed: true; result: R } | { claimed: false; row: LedgerRecord };

/** Where a ledger keeps rows (memory, SQLite, PostgreSQL). */
export interface LedgerBackend {
  /**
   * Claim-or-get, atomically: stores `row` (status `started`) unless a row of (caller, key)
   * updated at or after `liveAfter` exists (an older one is replaced). Contract: resolves null
   * when this call claimed the key, else the live row; two concurrent claims never both win.
   */
  claim(row: LedgerRecord, liveAfter: number): Promise<LedgerRecord | null>;
  /** Contract: replaces the row of (row.caller, row.key) with `row` (status `done`). */
  finish(row: LedgerRecord): Promise<void>;
  read(caller: string, key: string): Promise<LedgerRecord | undefined>;
  purgeBefore(at: number): Promise<number>;
  /**
   * Optional (stores with transactions). In ONE transaction: claim as {@link claim}; when
   * claimed, run `effect(handle)` and store `row` as `done` with its result. A throw rolls all
   * of it back. Contract: resolves `{ claimed: false, row }` when a live row exists (nothing ran).
   */
  atomic?<R>(
    row: LedgerRecord,
    liveAfter: number,
    effect: (handle: unknown) => R | Promise<R>,
  ): Promise<AtomicClaim<R>>;
}

/** `memoryLedger` / `sqliteLedger` options. */
export interface LedgerOptions {
  /** Contract: `now()` in epoch-like ms, comparable across restarts and processes (stamps rows). */
  clock: Clock;
  /** How long a finished key is remembered (default 24 h). */
  retentionMs?: number;
}

/** SHA-256 of `payload` as canonical JSON (object keys sorted). This is a pure function. */
export function fingerprint(payload: unknown): string {
  return createHash("sha256").update(canonicalJson(payload)).digest("hex");
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const keys = Object.keys(value).sort();
    const obj = value as Record<string, unknown>;
    return `{${keys
      .filter((k) => obj[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** A ledger held in memory (tests, single process); atomic runs are not supported. */
export function memoryLedger(options: LedgerOptions): Ledger {
  const rows = new Map<string, LedgerRecord>();
  const id = (caller: string, key: string) => `${caller}\u0000${key}`;
  return createLedger(
    {
      async claim(row, liveAfter) {
        const existing = rows.get(id(row.caller, row.key));
        if (existing && existing.updatedAt >= liveAfter) return structuredClone(existing);
        rows.set(id(row.caller, row.key), structuredClone(row));
        return null;
      },
      async finish(row) {
        rows.set(id(row.caller, row.key), structuredClone(row));
      },
      read: async (caller, key) => structuredClone(rows.get(id(caller, key))),
      async purgeBefore(at) {
        let n = 0;
        for (const [k, row] of rows) if (row.updatedAt < at && rows.delete(k)) n++;
        return n;
      },
    },
    options,
  );
}

/** Builds a ledger over a backend (memory, SQLite, PostgreSQL). */
export function createLedger(backend: LedgerBackend, options: LedgerOptions): Ledger {
  const { clock } = options;
  const retentionMs = options.retentionMs ?? 24 * 60 * 60 * 1000;
  const inflight = new Map<
    string,
    { fingerprint: string; done: Promise<LedgerOutcome<unknown>> }
  >();
  let lastPurge = Number.NEGATIVE_INFINITY;
  const liveAfter = () => clock.now() - retentionMs;
  const live = async (caller: string, key: string) => {
    const row = await backend.read(caller, key);
    return row && row.updatedAt >= liveAfter() ? row : undefined;
  };
  const purge = () => backend.purgeBefore(liveAfter());

  const decide = (
    row: LedgerRecord,
    print: string,
  ): LedgerOutcome<never> | { type: "replayed"; result: unknown } => {
    if (row.fingerprint !== print) return { type: "failed", failure: mismatch(row) };
    if (row.status === "done") return { type: "replayed", result: row.result };
    return { type: "failed", failure: unknown(row) };
  };

  async function execute<T>(
    caller: string,
    key: string,
    print: string,
    fn: (ctx: RunContext) => Promise<T> | T,
    atomic: boolean,
  ): Promise<LedgerOutcome<T>> {
    const now = clock.now();
    const base = { caller, key, fingerprint: print, createdAt: now };
    if (atomic) {
      const runAtomic = backend.atomic!.bind(backend);
      let recorded = false;
      let lost: LedgerRecord | undefined;
      const transact = async <R>(effect: (db: unknown) => R | Promise<R>): Promise<R> => {
        if (recorded || lost)
          throw new Error(`ledger ${caller}/${key}: transact called twice in one atomic run`);
        const claim = await runAtomic(
          { ...base, status: "started", updatedAt: now },
          liveAfter(),
          effect,
        );
        if (!claim.claimed) {
          lost = claim.row;
          throw new RaceLost(claim.row);
        }
        recorded = true;
        return claim.result;
      };
      let value: T;
      try {
        value = await fn({ transact });
      } catch (error) {
        if (lost) return decide(lost, print) as LedgerOutcome<T>;
        throw error;
      }
      if (lost) return decide(lost, print) as LedgerOutcome<T>;
      if (!recorded)
        throw new Error(
          `ledger ${caller}/${key}: an atomic run must perform its effect through ctx.transact`,
        );
      return { type: "ran", result: value };
    }
    const existing = await backend.claim(
      { ...base, status: "started", updatedAt: now },
      liveAfter(),
    );
    if (existing) return decide(existing, print) as LedgerOutcome<T>;
    const noTransact = () => {
      throw new Error(
        `ledger ${caller}/${key}: ctx.transact needs { atomic: true } and a SQLite or PostgreSQL ledger`,
      );
    };
    const result = await fn({ transact: noTransact });
    await backend.finish({ ...base, status: "done", result, updatedAt: clock.now() });
    return { type: "ran", result };
  }

  return {
    retentionMs,
    get: live,
    purge,
    async run<T>(
      caller: string,
      key: string,
      payload: unknown,
      fn: (ctx: RunContext) => Promise<T> | T,
      options: RunOptions = {},
    ) {
      if (options.atomic && !backend.atomic) {
        throw new TypeError(
          `ledger ${caller}/${key}: { atomic: true } needs a store ledger (sqliteLedger or postgresLedger); this one is in memory`,
        );
      }
      const print = fingerprint(payload);
      const slot = `${caller}\u0000${key}`;
      const running = inflight.get(slot);
      if (running) {
        if (running.fingerprint !== print) {
          return { type: "failed", failure: mismatch({ caller, key }) } as LedgerOutcome<T>;
        }
        const first = (await running.done.catch(() => null)) as LedgerOutcome<T> | null;
        if (first?.type === "ran" || first?.type === "replayed")
          return { type: "replayed", result: first.result };
        return first ?? { type: "failed", failure: unknown({ caller, key }) };
      }
      const done = (async () => {
        if (clock.now() - lastPurge > retentionMs / 10) {
          lastPurge = clock.now();
          await purge();
        }
        return execute(caller, key, print, fn, options.atomic === true);
      })();
      inflight.set(slot, { fingerprint: print, done });
      try {
        return await done;
      } finally {
        inflight.delete(slot);
      }
    },
  };
}

class RaceLost extends Error {
  constructor(readonly row: LedgerRecord) {
    super("another run recorded this key first");
  }
}

function mismatch(row: Pick<LedgerRecord, "caller" | "key">): ToolFailure {
  return {
    ok: false,
    code: "PARAMETER_MISMATCH",
    message: `idempotency key ${row.key} (${row.caller}) was already used with different parameters; use a new key for a different request, or repeat the original parameters exactly`,
    retryable: false,
  };
}

function unknown(row: Pick<LedgerRecord, "caller" | "key">): ToolFailure {
  return {
    ok: false,
    code: "OUTCOME_UNKNOWN",
    message: `an earlier run with idempotency key ${row.key} (${row.caller}) started and never recorded its end, so it may or may not have taken effect; check the current state before doing it again with a new key`,
    retryable: false,
  };
}

/** A ledger row as the SQL stores keep it (snake case, the result as JSON text). */
export interface LedgerRow {
  caller: string;
  key: string;
  fingerprint: string;
  status: LedgerStatus;
  result: string | null;
  created_at: number;
  updated_at: number;
}

/** The record a stored {@link LedgerRow} holds. This is a pure function. */
export function decodeLedgerRow(r: LedgerRow): LedgerRecord {
  return {
    caller: r.caller,
    key: r.key,
    fingerprint: r.fingerprint,
    status: r.status,
    ...(r.result === null ? {} : { result: JSON.parse(r.result) }),
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}
