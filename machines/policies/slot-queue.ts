/**
 * The bookkeeping of a counting semaphore with a FIFO queue: at most `limit` holders, and
 * waiters served strictly in the order they asked. Deterministic and free of I/O, timers and
 * promises: the host (actors/provider-slots.ts) turns its answers into resolved waits.
 *
 * Invariants (test/slot-queue.unit.test.ts checks them under random operation sequences):
 * `held ≤ limit`; a waiter is never granted while an earlier one still waits; a slot is never
 * left free while someone waits; a cancelled waiter is never granted.
 */
export class SlotQueue<T> {
  private holders = 0;
  /** Insertion-ordered: the first is served first; a cancel removes from anywhere in O(1). */
  private readonly waiters = new Set<T>();

  /** Throws a RangeError unless `limit` is an integer ≥ 1. */
  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1)
      throw new RangeError(`a slot limit must be an integer ≥ 1, got ${String(limit)}`);
  }

  /** Slots held now. */
  get held(): number {
    return this.holders;
  }

  /** Waiters now. */
  get waiting(): number {
    return this.waiters.size;
  }

  /**
   * `who` asks for a slot: granted at once when one is free and nobody waits (FIFO: a free
   * slot never jumps the queue), else queued at `position` (1 = next to be served).
   * Contract: `who` is not already waiting.
   */
  request(who: T): { granted: true } | { granted: false; position: number } {
    if (this.holders < this.limit && this.waiters.size === 0) {
      this.holders++;
      return { granted: true };
    }
    this.waiters.add(who);
    return { granted: false, position: this.waiters.size };
  }

  /** `who` stops waiting (an abort). True when it was waiting; a holder is not affected. */
  cancel(who: T): boolean {
    return this.waiters.delete(who);
  }

  /**
   * A holder gives its slot back: the first waiter, if any, now holds it and is returned (the
   * host wakes it). Throws a RangeError when nobody holds a slot (a double release is a bug
   * the host must not make: its release functions are idempotent).
   */
  release(): T | undefined {
    if (this.holders === 0) throw new RangeError("a slot was released that nobody held");
    for (const next of this.waiters) {
      this.waiters.delete(next);
      return next; // the slot passes from the releaser to the waiter: `held` is unchanged
    }
    this.holders--;
    return undefined;
  }
}
