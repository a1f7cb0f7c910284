import type { Clock } from "../contracts/clock.ts";

/** A {@link Clock} whose time the replay moves, and whose timers fire when the session is quiet. */
export interface ReplayClock extends Clock {
  /** Moves the time forward to `t` (never back): the recorded time of what happens next. */
  advanceTo(t: number): void;
  /** Tells the clock something happened (an entry, an event): the session is not quiet. */
  touch(): void;
  /** Stops firing timers; pending ones are dropped. */
  stop(): void;
}

interface Timer {
  id: number;
  due: number;
  fn: () => void;
}

/** Real milliseconds between two looks at whether the session is quiet. */
const LOOK_MS = 1;
/** Looks in a row with nothing happening before the next timer fires. */
const QUIET_LOOKS = 5;

/**
 * The replay's time: virtual, starting at `start`, moved by the replay to the recorded time of
 * each model response, tool result and input, so what the replay writes and shows carries the
 * recording's times. A timer (a retry wait, a stop deadline) does not wait for real: when the
 * session has been quiet for a few real milliseconds (nothing touched the clock), the earliest
 * timer fires and the time jumps to its due time. Timers fire in due order, one at a time.
 */
export function replayClock(start: number): ReplayClock {
  let now = start;
  let nextId = 1;
  let timers: Timer[] = [];
  let quietLooks = 0;
  let stopped = false;
  let looking: ReturnType<typeof setTimeout> | undefined;

  const look = () => {
    looking = undefined;
    if (stopped || timers.length === 0) return;
    quietLooks++;
    if (quietLooks >= QUIET_LOOKS) {
      quietLooks = 0;
      let first = timers[0];
      for (const t of timers)
        if (t.due < first.due || (t.due === first.due && t.id < first.id)) first = t;
      timers = timers.filter((t) => t !== first);
      now = Math.max(now, first.due);
      first.fn();
    }
    schedule();
  };
  const schedule = () => {
    if (looking === undefined && !stopped && timers.length > 0) looking = setTimeout(look, LOOK_MS);
  };

  return {
    now: () => now,
    setTimeout(fn, ms) {
      const id = nextId++;
      const delay = Number.isFinite(ms) && ms > 0 ? ms : 0;
      timers.push({ id, due: now + delay, fn });
      quietLooks = 0;
      schedule();
      return id;
    },
    clearTimeout(handle) {
      timers = timers.filter((t) => t.id !== handle);
    },
    advanceTo(t) {
      if (t > now) now = t;
      quietLooks = 0;
    },
    touch() {
      quietLooks = 0;
    },
    stop() {
      stopped = true;
      timers = [];
      if (looking !== undefined) clearTimeout(looking);
      looking = undefined;
    },
  };
}
