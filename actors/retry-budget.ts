import type { Clock } from "../contracts/clock.ts";
import { systemClock } from "../contracts/clock.ts";

/**
 * A shared allowance of EXTRA model requests (retries and continues) per provider, so that a
 * hundred sessions failing at once do not turn into a retry storm (docs/providers.md). It never
 * gates first requests: those need their own admission and concurrency control.
 *
 * Share one instance across every session that talks to the same provider/account; creating
 * one full bucket per session multiplies the allowance again.
 *
 * A process-wide implementation fills the same synchronous interface:
 * - across processes on one host: one row per provider key `(tokens, updatedAt)` in a shared
 *   SQLite file (better-sqlite3 is synchronous; WAL mode), refilled and decremented inside one
 *   `BEGIN IMMEDIATE` transaction — the same arithmetic as `tokenBucketBudget`;
 * - across hosts (Redis, a coordinator service): keep a small local lease of tokens, taken
 *   asynchronously in the background by an atomic script (refill + decrement), and answer
 *   `tryAcquire` from the lease; an empty lease answers `false`, never blocks.
 */
export interface RetryBudget {
  /**
   * Takes one token for an extra request to `providerKey` (e.g. `"openai:gpt-4o"` or a
   * baseURL). Contract: synchronous, never throws; `false` means "do not retry now", and the
   * caller stops with `budget_exhausted` rather than waiting for a token.
   */
  tryAcquire(providerKey: string): boolean;
  /**
   * Optional: called when a model request to `providerKey` starts, before any failure asks
   * {@link tryAcquire}. A budget that answers from a local reserve filled asynchronously
   * (`postgresRetryBudget`) fills it here, so the first retry of a process is not refused only
   * because its reserve was still empty. Contract: synchronous, never throws, cheap when the
   * reserve is already full.
   */
  warm?(providerKey: string): void;
}

export interface TokenBucketOptions {
  /** Tokens added per second per provider key (≥ 0; 0 = only the initial burst). */
  ratePerSec: number;
  /** Bucket size, and the tokens each key starts with (≥ 1). */
  burst: number;
  /** Contract: monotonic ms. Default: `systemClock`. */
  clock?: Clock;
}

/** A token bucket that can also report its level, for the inspector and tests. */
export interface TokenBucketBudget extends RetryBudget {
  /** Tokens currently available for `providerKey` (fractional while refilling). */
  available(providerKey: string): number;
}

/**
 * An in-process token bucket per provider key: each key starts full with `burst` tokens,
 * refills continuously at `ratePerSec` up to `burst`, and each extra attempt costs one token.
 * Throws a RangeError on invalid options (a construction-time boundary).
 */
export function tokenBucketBudget(options: TokenBucketOptions): TokenBucketBudget {
  const { ratePerSec, burst, clock = systemClock } = options;
  if (!Number.isFinite(ratePerSec) || ratePerSec < 0)
    throw new RangeError(
      `tokenBucketBudget: ratePerSec must be a finite number ≥ 0, got ${ratePerSec}`,
    );
  if (!Number.isInteger(burst) || burst < 1)
    throw new RangeError(
      `tokenBucketBudget: burst must be an integer ≥ 1, got ${burst} (it is also the number of tokens each provider starts with)`,
    );
  const buckets = new Map<string, { tokens: number; at: number }>();

  const refill = (key: string) => {
    const now = clock.now();
    const b = buckets.get(key);
    if (!b) {
      const fresh = { tokens: burst, at: now };
      buckets.set(key, fresh);
      return fresh;
    }
    // A clock that steps backwards (a misbehaving source) must not drain the bucket.
    const elapsed = Math.max(0, now - b.at);
    b.tokens = Math.min(burst, b.tokens + (elapsed * ratePerSec) / 1000);
    b.at = Math.max(b.at, now);
    return b;
  };

  return {
    tryAcquire(providerKey) {
      const b = refill(providerKey);
      // The epsilon absorbs float drift from fractional refills (0.1 + 0.2 + …).
      if (b.tokens < 1 - 1e-9) return false;
      b.tokens = Math.max(0, b.tokens - 1);
      return true;
    },
    available(providerKey) {
      return refill(providerKey).tokens;
    },
  };
}

/** A budget that always allows: for single sessions and tests where the bound is not wanted. */
export const unlimitedRetryBudget: RetryBudget = { tryAcquire: () => true };
