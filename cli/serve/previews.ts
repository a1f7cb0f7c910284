import type { AgentEvent } from "../../index.ts";

/** The most characters of preview one `call.previewed` frame carries (JSON text, about). */
export const PREVIEW_CHARS = 4096;
/** At most one `call.previewed` frame per call this often (the first at once). */
export const PREVIEW_EVERY_MS = 100;
/** Past this length a string is sent as its length only (see `boundedPreview`). */
export const LONG_STRING = 64 * 1024;

type Previewed = Extract<AgentEvent, { type: "call.previewed" }>;

/**
 * A preview value bounded to about `max` characters of JSON, as a JSON value: strings cut (with
 * `…`), members past the bound left out (an object gets `"…": "<n> more"`, an array a last
 * `"…"`). A string longer than {@link LONG_STRING} becomes `"[<n> characters]"` without being
 * read: the preview's open string is a growing V8 rope, and reading any of it copies all of it,
 * so one read per delta was quadratic. Cost: O(max) whatever the value's size.
 * This is a pure function.
 */
export function boundedPreview(value: unknown, max = PREVIEW_CHARS): unknown {
  const budget = { left: max };
  return bound(value, budget, 0);
}

function bound(value: unknown, budget: { left: number }, depth: number): unknown {
  if (typeof value === "string") {
    if (value.length > LONG_STRING) {
      budget.left -= 24;
      return `[${value.length} characters]`;
    }
    const room = Math.max(0, budget.left);
    budget.left -= Math.min(value.length, room) + 2;
    return value.length > room ? `${value.slice(0, room)}…` : value;
  }
  if (typeof value !== "object" || value === null) {
    budget.left -= 8;
    return typeof value === "number" && !Number.isFinite(value) ? null : value;
  }
  if (depth >= 16) return "…";
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    for (let i = 0; i < value.length; i++) {
      if (budget.left <= 0) {
        out.push("…");
        break;
      }
      out.push(bound(value[i], budget, depth + 1));
    }
    return out;
  }
  const out: Record<string, unknown> = {};
  const keys = Object.keys(value);
  for (let i = 0; i < keys.length; i++) {
    if (budget.left <= 0) {
      out["…"] = `${keys.length - i} more`;
      break;
    }
    const key = keys[i].length > 256 ? `${keys[i].slice(0, 256)}…` : keys[i];
    budget.left -= key.length + 3;
    out[key] = bound((value as Record<string, unknown>)[keys[i]], budget, depth + 1);
  }
  return out;
}

/**
 * The `call.previewed` frames of one subscription: the first preview of a call at once, then at
 * most one every {@link PREVIEW_EVERY_MS}, each bounded by {@link boundedPreview}. Previews in
 * between are dropped (each one replaces the last; `call.started` carries the final arguments),
 * so a megabyte argument streamed in 256-character deltas costs the client a few kilobytes,
 * not the argument once per delta. Other events pass unchanged.
 * `now` is a monotonic clock in ms.
 */
export function previewThrottle(now: () => number) {
  const last = new Map<string, number>();
  return (event: AgentEvent): AgentEvent | undefined => {
    if (event.type === "attempt.ended") {
      for (const key of last.keys()) if (key.startsWith(`${event.attemptId}:`)) last.delete(key);
      return event;
    }
    if (event.type !== "call.previewed") return event;
    const key = `${event.attemptId}:${event.index}`;
    const at = now();
    const before = last.get(key);
    if (before !== undefined && at - before < PREVIEW_EVERY_MS) return undefined;
    last.set(key, at);
    return { ...event, preview: boundedPreview(event.preview) } satisfies Previewed;
  };
}
