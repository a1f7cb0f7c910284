import { type Model, ModelError } from "../contracts/model.ts";
import { SlotQueue } from "../machines/policies/slot-queue.ts";

/**
 * Gives a held slot back. Idempotent: only the first call releases. Never throws. `lost`, when
 * present, aborts (with a {@link SlotLostError}) if the slot is lost while held — a shared
 * slot whose lease ran out because this process was stopped past it, and which another process
 * may hold now: the request holding it must end (the agent retries it once it holds a slot).
 */
export type SlotRelease = (() => void) & { readonly lost?: AbortSignal };

/**
 * A request's provider slot was lost while it ran (see {@link SlotRelease}): a retryable
 * failure (kind `network`), so the attempt is retried under the retry policy, after a new slot.
 */
export class SlotLostError extends ModelError {
  constructor(message: string) {
    super(message, { kind: "network" });
  }
}

/** What a request waiting for a slot is told. */
export interface SlotWait {
  /** Aborting it takes the waiter out of the queue at once; `acquire` rejects with its reason. */
  signal: AbortSignal;
  /**
   * Called once when the request has to wait, with its place in the queue (1 = next): at once in
   * a process's own slots, after the database said "full" for shared ones. Contract: must not
   * throw (a throw is ignored; the wait goes on).
   */
  onQueued?: (position: number) => void;
}

/**
 * Bounds the model requests in flight per provider (docs/providers.md, "Concurrency"): the
 * agent takes a slot before each request is sent and gives it back when its stream ends,
 * fails or is aborted. `processSlots` bounds one process; `postgresProviderSlots` shares the
 * bound between every process on one database.
 */
export interface ProviderSlots {
  /** The bound for `providerKey`, or undefined when its requests are not bounded. */
  limitOf(providerKey: string): number | undefined;
  /**
   * Resolves with the release once the request holds a slot: at once when one is free and
   * nobody waits, else in the order requests asked (FIFO). A key without a limit resolves at
   * once. Contract: rejects with `signal.reason` when the signal aborts before the slot is
   * held, or with an Error when the slots were closed; nothing is held by a request whose
   * promise rejected.
   */
  acquire(providerKey: string, wait: SlotWait): Promise<SlotRelease>;
}

/** A release that releases nothing (an unbounded key). */
const NOTHING: SlotRelease = () => {};

/**
 * The provider key of a model, the key of `createAgent({ concurrency })`: `model.provider`
 * when the model sets it, else the part of `model.name` before its first `:` and `.`:
 * `openai:gpt-4o` (openaiModel) and `openai.chat:gpt-4o` (aiSdkModel) both give `openai`,
 * `anthropic.messages:claude-…` gives `anthropic`. Name a model `vllm-east:llama` to give it
 * a key of its own.
 */
export function providerKeyOf(model: Pick<Model, "name" | "provider">): string {
  if (model.provider) return model.provider;
  const head = model.name.split(":")[0] ?? model.name;
  return head.split(".")[0] || model.name;
}

/**
 * Checks a `concurrency` map: every value an integer ≥ 1 (or `Infinity`: unbounded).
 * Throws a TypeError naming the key and what is expected.
 */
export function checkConcurrency(
  where: string,
  limits: Readonly<Record<string, number>>,
): Map<string, number> {
  if (limits === null || typeof limits !== "object" || Array.isArray(limits))
    throw new TypeError(
      `${where} must be an object of provider key → number of requests in flight, e.g. { openai: 8 }`,
    );
  const out = new Map<string, number>();
  for (const [key, n] of Object.entries(limits)) {
    if (n === Number.POSITIVE_INFINITY) continue;
    if (!Number.isInteger(n) || n < 1)
      throw new TypeError(
        `${where}.${key} must be an integer ≥ 1 (requests in flight to that provider) or Infinity for no bound, got ${String(n)}`,
      );
    out.set(key, n);
  }
  return out;
}

/**
 * In-process provider slots: one FIFO queue per provider key with a limit (machines/policies/
 * slot-queue.ts holds the queue's rules). Share one instance between agents of one process that
 * talk to the same account; `createAgent({ concurrency: { openai: 8 } })` makes one per agent.
 * Throws a TypeError on a bad limit.
 */
export function processSlots(limits: Readonly<Record<string, number>>): ProviderSlots {
  const bounds = checkConcurrency("processSlots", limits);
  const queues = new Map<string, SlotQueue<object>>();
  const wakers = new Map<object, () => void>();
  const queueOf = (key: string, limit: number) => {
    let q = queues.get(key);
    if (!q) {
      q = new SlotQueue<object>(limit);
      queues.set(key, q);
    }
    return q;
  };
  const releaseOf = (q: SlotQueue<object>): SlotRelease => {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = q.release();
      if (next !== undefined) wakers.get(next)?.();
    };
  };
  return {
    limitOf: (key) => bounds.get(key),
    acquire(key, { signal, onQueued }) {
      const limit = bounds.get(key);
      if (limit === undefined) return Promise.resolve(NOTHING);
      if (signal.aborted) return Promise.reject(signal.reason);
      const q = queueOf(key, limit);
      const ticket = {};
      const asked = q.request(ticket);
      if (asked.granted) return Promise.resolve(releaseOf(q));
      return new Promise<SlotRelease>((resolve, reject) => {
        const onAbort = () => {
          // Still waiting: out of the queue, nothing held. Already granted: the waker ran first.
          if (q.cancel(ticket)) {
            wakers.delete(ticket);
            reject(signal.reason);
          }
        };
        wakers.set(ticket, () => {
          wakers.delete(ticket);
          signal.removeEventListener("abort", onAbort);
          resolve(releaseOf(q));
        });
        signal.addEventListener("abort", onAbort, { once: true });
        // Told after the waker is in place: a listener that throws cannot strand the ticket
        // (a slot handed to a waiter nobody resolves would be held for good).
        try {
          onQueued?.(asked.position);
        } catch {}
      });
    },
  };
}
