/**
 * Pending timers of a chart explored through `transition()` (which runs nothing): delayed
 * `raise`/`sendTo` actions arm a timer, `xstate.cancel` disarms it, and leaving a state with an
 * `after` cancels its timer the same way. A search that deduplicates states puts `timerKey` into
 * its key, so a timer cancelled and re-armed under the same id (a later due time) is a different
 * state from one left alone (TESTING.md, "Oracles that are not the code").
 *
 * Time in a search is logical: every event the search delivers takes `tick` ms; a timer's event
 * jumps the clock to its due time.
 */
export interface Timers {
  now: number;
  /** Timer id → due time (logical ms). */
  due: Readonly<Record<string, number>>;
}

export const noTimers: Timers = { now: 0, due: {} };

interface ActionLike {
  type: string;
  params?: unknown;
}

/**
 * The timers after one step: the clock advances by `tick` (or jumps to the due time of the
 * timer whose event was delivered), then the step's actions arm and cancel timers in order.
 * `rearmed` lists timers armed again while still pending, with their old and new due times.
 * This is a pure function.
 */
export function stepTimers(
  timers: Timers,
  eventType: string,
  actions: readonly ActionLike[],
  tick = 100,
): { timers: Timers; rearmed: { id: string; from: number; to: number }[] } {
  const due: Record<string, number> = { ...timers.due };
  let now = timers.now + tick;
  if (eventType in due) {
    now = Math.max(timers.now, due[eventType]);
    delete due[eventType];
  }
  const rearmed: { id: string; from: number; to: number }[] = [];
  const cancelled = new Set<string>();
  for (const a of actions) {
    const p = (a.params ?? {}) as { id?: string; delay?: number; sendId?: string };
    if (a.type === "xstate.cancel" && typeof p.sendId === "string") {
      delete due[p.sendId];
      cancelled.add(p.sendId);
    } else if (typeof p.delay === "number" && typeof p.id === "string") {
      const prior = timers.due[p.id];
      const to = now + p.delay;
      if (prior !== undefined && p.id in timers.due && prior !== to)
        rearmed.push({ id: p.id, from: prior, to });
      due[p.id] = to;
    }
  }
  return { timers: { now, due }, rearmed };
}

/** Each pending timer with what remains of it (0 = due): the part of a state key time decides. */
export function timerKey(timers: Timers): string {
  return Object.entries(timers.due)
    .map(([id, at]) => `${id}@${Math.max(0, at - timers.now)}`)
    .sort()
    .join(",");
}
