import type { UserPart } from "../../contracts/messages.ts";
import type { InboxLane, InboxSource } from "../../contracts/status.ts";

/**
 * One asynchronous input (docs/architecture.md). `body` is data: whatever it says, it never changes
 * permissions or triggers anything by itself. `seq` is the host's arrival number (the log seq
 * of its `inbox` entry).
 */
export interface InboxEvent {
  id: string;
  source: InboxSource;
  lane: InboxLane;
  /** The text (the text parts joined). */
  body: string;
  /** With an image: every part of the input, in order. */
  parts?: readonly UserPart[];
  seq: number;
}

/** An append-only id index shared by inbox versions; a version owns its first `count` ids. */
interface IdIndex {
  readonly order: Map<string, number>;
  size: number;
}

/**
 * The queue of received-but-unconsumed events, in arrival order, plus every id ever received
 * (the dedup set). Immutable: every function returns a new inbox and leaves its argument valid.
 */
export interface Inbox {
  readonly queue: readonly InboxEvent[];
  readonly ids: { readonly index: IdIndex; readonly count: number };
}

export type ReceiveResult =
  | { type: "accepted"; inbox: Inbox }
  /** The id was received before (queued or already consumed): the event is dropped. */
  | { type: "duplicate"; inbox: Inbox }
  | { type: "invalid"; inbox: Inbox; reason: string };

export type DrainMode = "all" | "one-at-a-time";

const LANES: readonly InboxLane[] = ["interrupt", "next-step", "next-turn"];
const SOURCES: readonly InboxSource[] = ["user", "tool", "job", "system"];

/** An empty inbox. */
export function emptyInbox(): Inbox {
  return { queue: [], ids: { index: { order: new Map(), size: 0 }, count: 0 } };
}

function seen(inbox: Inbox, id: string): boolean {
  const at = inbox.ids.index.order.get(id);
  return at !== undefined && at < inbox.ids.count;
}

/** Adds `id` to the dedup set; O(1) unless an older version is extended (then it forks). */
function remember(ids: Inbox["ids"], id: string): Inbox["ids"] {
  let index = ids.index;
  if (index.size !== ids.count) {
    const order = new Map<string, number>();
    for (const [key, at] of index.order) if (at < ids.count) order.set(key, at);
    index = { order, size: ids.count };
  }
  index.order.set(id, index.size);
  index.size += 1;
  return { index, count: index.size };
}

function validate(event: InboxEvent): string | null {
  if (typeof event.id !== "string" || event.id.length === 0) {
    return "inbox event needs a non-empty string `id` (used to deduplicate replays)";
  }
  if (!LANES.includes(event.lane)) {
    return `inbox event ${event.id}: lane ${JSON.stringify(event.lane)} is not one of ${LANES.join(", ")}`;
  }
  if (!SOURCES.includes(event.source)) {
    return `inbox event ${event.id}: source ${JSON.stringify(event.source)} is not one of ${SOURCES.join(", ")}`;
  }
  if (typeof event.body !== "string") return `inbox event ${event.id}: body must be a string`;
  if (!Number.isSafeInteger(event.seq) || event.seq < 0) {
    return `inbox event ${event.id}: seq must be a non-negative integer (the arrival number)`;
  }
  return null;
}

/**
 * Queues `event` unless its id was ever received before (queued or consumed): a replayed or
 * doubled event is consumed once. The host persists an `inbox` entry before acknowledging.
 * This is a pure function.
 */
export function receive(inbox: Inbox, event: InboxEvent): ReceiveResult {
  const reason = validate(event);
  if (reason !== null) return { type: "invalid", inbox, reason };
  if (seen(inbox, event.id)) return { type: "duplicate", inbox };
  return {
    type: "accepted",
    inbox: { queue: [...inbox.queue, event], ids: remember(inbox.ids, event.id) },
  };
}

/**
 * Takes the queued events of `lane` in arrival order: all of them, or only the oldest. The host
 * persists an `inbox_consumed` entry for each. This is a pure function.
 */
export function drain(
  inbox: Inbox,
  lane: InboxLane,
  mode: DrainMode,
): { events: InboxEvent[]; inbox: Inbox } {
  const events: InboxEvent[] = [];
  const queue: InboxEvent[] = [];
  for (const event of inbox.queue) {
    if (event.lane === lane && (mode === "all" || events.length === 0)) events.push(event);
    else queue.push(event);
  }
  return events.length === 0 ? { events, inbox } : { events, inbox: { queue, ids: inbox.ids } };
}

/** The queued (received, not consumed) events, optionally of one lane, in arrival order. */
export function queued(inbox: Inbox, lane?: InboxLane): readonly InboxEvent[] {
  return lane === undefined ? inbox.queue : inbox.queue.filter((e) => e.lane === lane);
}

/**
 * Discards the queued events (of `lane`, or all); they count as consumed, so a replay is still
 * dropped. The host persists `inbox_consumed` for each `cleared` event. This is a pure function.
 */
export function clear(inbox: Inbox, lane?: InboxLane): { cleared: InboxEvent[]; inbox: Inbox } {
  const cleared = inbox.queue.filter((e) => lane === undefined || e.lane === lane);
  const queue = inbox.queue.filter((e) => lane !== undefined && e.lane !== lane);
  return { cleared, inbox: { queue, ids: inbox.ids } };
}

/**
 * Marks one id consumed (e.g. replaying an `inbox_consumed` entry): removes it from the queue
 * and remembers it even if it was never received, so a later copy is dropped.
 */
export function consume(inbox: Inbox, id: string): Inbox {
  const queue = inbox.queue.filter((e) => e.id !== id);
  return { queue, ids: seen(inbox, id) ? inbox.ids : remember(inbox.ids, id) };
}

/** An inbox as plain data (a log checkpoint keeps it, so reopening need not read the history). */
export interface InboxSnapshot {
  queue: InboxEvent[];
  /** Every id ever received or consumed, in the order they were first seen. */
  ids: string[];
}

/** The data of `inbox`. This is a pure function. */
export function inboxSnapshot(inbox: Inbox): InboxSnapshot {
  const ids: string[] = [];
  for (const [id, at] of inbox.ids.index.order) if (at < inbox.ids.count) ids.push(id);
  return { queue: [...inbox.queue], ids };
}

/** The inbox a snapshot was taken of; null when `data` is not one. This is a pure function. */
export function restoreInbox(data: unknown): Inbox | null {
  const s = data as Partial<InboxSnapshot> | null;
  if (!s || !Array.isArray(s.queue) || !Array.isArray(s.ids)) return null;
  let ids = emptyInbox().ids;
  for (const id of s.ids) if (typeof id === "string") ids = remember(ids, id);
  for (const event of s.queue) {
    if (validate(event) !== null) return null;
    if (!ids.index.order.has(event.id)) ids = remember(ids, event.id);
  }
  return { queue: [...s.queue], ids };
}

/**
 * The points at which the host polls the inbox (invariant 11 of docs/architecture.md). The runtime
 * polls at every one of them and drains exactly what {@link lanesToDrain} names.
 *
 * - `turn.started`: before the first model call; no call is open.
 * - `sampling`: a model call is in flight. `call.started` / `call.result`: a tool call began /
 *   one result arrived (the batch may still have open or uncommitted calls).
 * - `batch.committed`: every result of the batch is written in call order; the next model call
 *   has not started. THE safe point for steering.
 * - `step.prepared`: a slow preparation (e.g. compaction) finished before the next model call;
 *   `pendingBefore` says whether the poll before it found steering.
 * - `turn.natural_end`: the model answered without tool calls; the turn would end now.
 * - `turn.ended`: the turn has ended (any status); nothing of it runs any more.
 * - `idle`: no turn runs; what is taken here starts the next turn.
 */
export type PollPoint =
  | { type: "turn.started" }
  | { type: "sampling" }
  | { type: "call.started" }
  | { type: "call.result" }
  | { type: "batch.committed" }
  | { type: "step.prepared"; pendingBefore: boolean }
  | { type: "turn.natural_end" }
  | { type: "turn.ended" }
  | { type: "idle" };

/** Which lanes to drain at a poll point (the runtime's is {@link lanesToDrain}). */
export type DrainPolicy = (point: PollPoint) => readonly InboxLane[];

/**
 * Which lanes to drain at `point`, in order (see {@link pollInbox} for how they are drained).
 * Steering (`next-step`) is read only where no tool call is open or uncommitted and no model call
 * is in flight — never between a call and its result — and at a natural end, where it continues
 * the turn; after a slow preparation it is polled once more only if the poll before found
 * nothing (so a one-at-a-time queue does not yield two in one step). Follow-ups (`next-turn`)
 * are read only once no turn runs (`idle`), so they always start a turn of their own, after
 * the steering that arrived before the turn ended. An `interrupt` event aborts the turn at once
 * when it arrives; it is recorded (drained) at the next safe point or when the turn has ended.
 * This is a pure function.
 */
export const lanesToDrain: DrainPolicy = (point) => {
  switch (point.type) {
    case "turn.started":
    case "batch.committed":
    case "turn.natural_end":
      return STEP_LANES;
    case "step.prepared":
      return point.pendingBefore ? INTERRUPT_LANE : STEP_LANES;
    case "turn.ended":
      return INTERRUPT_LANE;
    case "idle":
      return IDLE_LANES;
    default:
      return NO_LANES;
  }
};

const NO_LANES: readonly InboxLane[] = Object.freeze([]);
const INTERRUPT_LANE: readonly InboxLane[] = Object.freeze(["interrupt"]);
const STEP_LANES: readonly InboxLane[] = Object.freeze(["interrupt", "next-step"]);
const IDLE_LANES: readonly InboxLane[] = Object.freeze(["interrupt", "next-turn", "next-step"]);

/** What one poll took: the interrupts it recorded and the inputs of the one lane it took. */
export interface PollResult {
  inbox: Inbox;
  /** Queued `interrupt` events, all of them, now consumed (the host logs each). */
  interrupts: InboxEvent[];
  /** The input lane taken, or null when none of the named lanes had events. */
  lane: "next-step" | "next-turn" | null;
  events: InboxEvent[];
}

/**
 * Polls `inbox` at `point`: drains the lanes `policy(point)` names, in order. The `interrupt`
 * lane is drained in full (its events only need recording: they acted when they arrived); of
 * the input lanes, the first that yields events is taken (`modes` says one or all) and the poll
 * stops there. The host then makes the taken inputs user messages of the running turn, or, at
 * `idle`, the inputs of the next turn. This is a pure function.
 */
export function pollInbox(
  inbox: Inbox,
  point: PollPoint,
  modes: { steer: DrainMode; followUp: DrainMode },
  policy: DrainPolicy = lanesToDrain,
): PollResult {
  const lanes = policy(point);
  let interrupts: InboxEvent[] = [];
  for (const lane of lanes) {
    if (lane === "interrupt") {
      const taken = drain(inbox, "interrupt", "all");
      inbox = taken.inbox;
      interrupts = taken.events;
      continue;
    }
    const taken = drain(inbox, lane, lane === "next-turn" ? modes.followUp : modes.steer);
    if (taken.events.length > 0) {
      return { inbox: taken.inbox, interrupts, lane, events: taken.events };
    }
  }
  return { inbox, interrupts, lane: null, events: [] };
}
