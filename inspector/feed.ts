import type { InspectionEvent } from "xstate";
import type { InspectSink } from "../actors/events.ts";
import type { Clock } from "../contracts/clock.ts";
import { systemClock } from "../contracts/clock.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { type ChartSource, isMachine } from "./chart-source.ts";
import { agentRecord, type InspectRecord, inspectionRecord } from "./records.ts";

export interface FeedOptions {
  /** Records kept for clients that connect later (oldest dropped first). Default 20 000. */
  capacity?: number;
  /** A pending batch is sent at most this long after its first record. Default 50 ms. */
  flushMs?: number;
  /** A pending batch is sent at once when it reaches this many records. Default 500. */
  flushSize?: number;
  /** Stamps XState inspection events (AgentEvents carry their own `at`). Default systemClock. */
  clock?: Clock;
  /** Told the machine of every actor created (one map lookup each), for the statechart view. */
  charts?: ChartSource;
}

/**
 * Receives every batch of new records.
 * Contract: must return quickly and must not throw.
 */
export type FeedListener = (records: InspectRecord[]) => void;

/** An InspectSink that turns events into records, keeps a bounded ring and batches fan-out. */
export interface Feed extends InspectSink {
  /** The ring's records, oldest first (a copy). */
  records(): InspectRecord[];
  /**
   * Adds a listener of future batches; returns the unsubscribe function. Everything pushed
   * before this call is in `records()` and will not be sent to this listener.
   */
  subscribe(listener: FeedListener): () => void;
  /** Replaces the ring with `records` (replay); listeners should be sent a reset by the caller. */
  reset(records: InspectRecord[]): void;
  /** Sends the pending batch now. */
  flush(): void;
  /** Stops timers; later events are ignored. */
  close(): void;
}

const MAX_DELTA = 2000;

/**
 * Creates the inspector's feed. With no listener it only converts and stores records in the
 * ring (no timers, no serialisation); with listeners, records are sent in batches every
 * `flushMs` or every `flushSize` records. Consecutive `text.streamed` records of one attempt that
 * have not been sent yet are merged into one (up to 2000 characters).
 */
export function createFeed(options: FeedOptions = {}): Feed {
  const capacity = options.capacity ?? 20_000;
  const flushMs = options.flushMs ?? 50;
  const flushSize = options.flushSize ?? 500;
  const clock = options.clock ?? systemClock;
  if (!Number.isInteger(capacity) || capacity < 1) {
    throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  }
  const ring: InspectRecord[] = new Array(capacity);
  let head = 0;
  let size = 0;
  const listeners = new Set<FeedListener>();
  let pending: InspectRecord[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  let lastUnsent: InspectRecord | undefined;
  let closed = false;
  const lastStates = new Map<string, string>();

  const flush = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    lastUnsent = undefined;
    if (pending.length === 0) return;
    const batch = pending;
    pending = [];
    for (const listener of listeners) {
      try {
        listener(batch);
      } catch {
        // Contract says listeners do not throw; a faulty one must not break the runtime.
      }
    }
  };

  const mergeDelta = (record: InspectRecord): boolean => {
    if (record.k !== "agent" || record.e.type !== "text.streamed") return false;
    const prev = lastUnsent;
    if (prev?.k !== "agent" || prev.e.type !== "text.streamed") return false;
    if (prev.e.attemptId !== record.e.attemptId) return false;
    if (prev.e.text.length + record.e.text.length > MAX_DELTA) return false;
    prev.e = { ...prev.e, text: prev.e.text + record.e.text };
    return true;
  };

  const push = (record: InspectRecord) => {
    if (mergeDelta(record)) return;
    ring[(head + size) % capacity] = record;
    if (size < capacity) size++;
    else head = (head + 1) % capacity;
    lastUnsent = record;
    if (listeners.size === 0) return;
    pending.push(record);
    if (pending.length >= flushSize) flush();
    else if (timer === undefined) {
      timer = setTimeout(flush, flushMs);
      timer.unref?.();
    }
  };

  return {
    observe(event: InspectionEvent) {
      if (closed) return;
      try {
        if (event.type === "@xstate.actor" && options.charts) {
          const logic = (event.actorRef as { logic?: unknown }).logic;
          if (isMachine(logic)) options.charts.register(logic);
        }
        const record = inspectionRecord(event, clock.now(), lastStates);
        if (record) push(record);
      } catch {
        // Contract: observe never throws into the runtime.
      }
    },
    publish(event: AgentEvent) {
      if (closed) return;
      try {
        push(agentRecord(event));
      } catch {
        // Contract: publish never throws into the runtime.
      }
    },
    records() {
      const out: InspectRecord[] = new Array(size);
      for (let i = 0; i < size; i++) out[i] = ring[(head + i) % capacity];
      return out;
    },
    subscribe(listener) {
      // Pending records go to the existing listeners; the new one reads them from the ring.
      flush();
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
        if (listeners.size === 0) {
          pending = [];
          if (timer !== undefined) clearTimeout(timer);
          timer = undefined;
        }
      };
    },
    reset(records) {
      pending = [];
      lastUnsent = undefined;
      head = 0;
      size = 0;
      lastStates.clear();
      for (const record of records.slice(-capacity)) {
        ring[size++] = record;
      }
    },
    flush,
    close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      pending = [];
      listeners.clear();
    },
  };
}
