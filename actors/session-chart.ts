import { type Actor, createActor, type InspectionEvent, type SnapshotFrom } from "xstate";
import type { SessionMachine } from "../machines/session.machine.ts";
import type {
  OpenRole,
  PendingWake,
  RunOutcome,
  SessionChartEvent,
  SessionChartInput,
  SessionEffects,
} from "../machines/session.types.ts";
import { bindEffects, hostedSessionMachine } from "./charts.ts";

type Snapshot = SnapshotFrom<SessionMachine>;

/** A read-only view of the session chart's work region (the coordinator), for callers and tests. */
export interface WorkState {
  /** `idle`, `starting`, `running`, `stopping` or `cleaning`; `closed` once the session closed. */
  value: string;
  /** Starts of the work region so far. */
  execution: number;
  /** Turns run so far. */
  turns: number;
  pendingWake: PendingWake | null;
  lastOutcome: RunOutcome | null;
  lastError: string | null;
}

/** Who hosts a session's chart (its runner, so a session at rest holds no closure for it). */
export interface SessionChartHost {
  /** The effects to bind to a new actor of the chart. Contract: must not throw. */
  chartEffects(): SessionEffects;
  /** The chart to host (a test's variant; undefined: `sessionMachine`). */
  readonly chartMachine?: SessionMachine;
  /** Passed to `createActor(…, { inspect })`. Contract: must return quickly, must not throw. */
  readonly chartInspect?: (event: InspectionEvent) => void;
  /** Called after every snapshot the chart takes. Contract: must not throw, must not send. */
  chartChanged(snapshot: SnapshotFrom<SessionMachine>): void;
}

/** What a chart at rest starts from again: its role, and whether it sleeps; or closed. */
type Resting = OpenRole | `${OpenRole}:asleep` | typeof CLOSED;
const CLOSED = "closed";
const ASLEEP = { solo: "solo:asleep", owner: "owner:asleep", follower: "follower:asleep" } as const;

interface Waiter {
  /** For settlement: the execution being awaited; for idle: -1. */
  execution: number;
  resolve: () => void;
}

/**
 * Hosts one session's chart (machines/session.machine.ts): makes its actor, binds its effects,
 * sends it what happens, and answers `awaitSettlement`/`awaitIdle` from its snapshots. The
 * chart decides; this class keeps only the waiters' promises, which are not state.
 *
 * A session at rest holds no actor: once the chart is open with no turn, no edit, no sleep
 * being written, no takeover and nothing pending (its doorbell, a follower's forwarded prompts),
 * the actor is stopped after its transition, and the next event makes a new one that starts
 * open with the role it had, awake or asleep (`resume`), so the event itself (an input's
 * `wake`, a read's `rouse`) is the first it takes. What it forgets (how many turns it ran, the
 * last outcome) decides nothing.
 */
export class SessionChart {
  private actor: Actor<SessionMachine> | undefined;
  /** What the chart rests as while it holds no actor (undefined before it is made). */
  private resting: Resting | undefined;
  private seq = 0;
  /** `awaitSettlement` (an execution) and `awaitIdle` (-1) callers, made at the first. */
  private waiters: Waiter[] | undefined;
  /** Called after each snapshot the chart takes, once (a close's or a sleep's end waits on it). */
  onSnapshot: ((snapshot: Snapshot) => void) | undefined;

  constructor(private readonly host: SessionChartHost) {}

  /** Starts the chart in `opening` (the session is loading its log). */
  start(): void {
    this.make(undefined);
  }

  /** Whether the chart reached `closed`. */
  get closed(): boolean {
    return this.resting === CLOSED;
  }

  /** Whether the session sleeps (at rest asleep, or the chart's residency is `asleep`). */
  get asleep(): boolean {
    if (this.actor === undefined) return this.resting?.endsWith(":asleep") === true;
    return this.matches({ open: { residency: "asleep" } });
  }

  /** The chart's snapshot (a sleeping session's is made on demand). */
  snapshot(): Snapshot {
    return this.live().getSnapshot();
  }

  /** Whether the chart's state matches `value` (a chart at rest is made again to answer). */
  matches(value: Parameters<Snapshot["matches"]>[0]): boolean {
    if (this.resting === CLOSED) return false;
    return this.live().getSnapshot().matches(value);
  }

  /** Sends `event`; a sleeping session's chart is made again first (it starts asleep). */
  send(event: SessionChartEvent): void {
    if (this.resting === CLOSED) return;
    this.live().send(event);
  }

  /** Rings the doorbell with the inbox's runnable count. Returns the wake's seq. */
  wake(runnable: number): number {
    this.seq += 1;
    this.send({ type: "wake", seq: this.seq, runnable });
    return this.seq;
  }

  /** Records an interrupt: the wakes before it are cleared, a later one is kept. */
  interrupt(): number {
    this.seq += 1;
    this.send({ type: "interrupt", seq: this.seq });
    return this.seq;
  }

  /** The work region's state (the coordinator's view). */
  work(): WorkState {
    if (this.resting === CLOSED || this.actor === undefined) {
      return {
        value: this.resting === CLOSED ? "closed" : "idle",
        execution: 0,
        turns: 0,
        pendingWake: null,
        lastOutcome: null,
        lastError: null,
      };
    }
    const snap = this.actor.getSnapshot();
    const { execution, turns, pendingWake, lastOutcome, lastError } = snap.context;
    return { value: workValue(snap), execution, turns, pendingWake, lastOutcome, lastError };
  }

  /** Resolves when the current execution has finished; at once when the work region is idle. */
  awaitSettlement(): Promise<void> {
    const work = this.work();
    if (work.value === "idle" || work.value === "closed") return Promise.resolve();
    return new Promise((resolve) => {
      this.waiters ??= [];
      this.waiters.push({ execution: work.execution, resolve });
    });
  }

  /** Resolves when the work region is idle with nothing pending, successors included. */
  awaitIdle(): Promise<void> {
    const work = this.work();
    if (work.value === "idle" || work.value === "closed") return Promise.resolve();
    return new Promise((resolve) => {
      this.waiters ??= [];
      this.waiters.push({ execution: -1, resolve });
    });
  }

  /** Whether the chart holds an actor now (false at rest and once closed). */
  get active(): boolean {
    return this.actor !== undefined;
  }

  private live(): Actor<SessionMachine> {
    const resting = this.resting;
    if (this.actor || resting === CLOSED) return this.actor as Actor<SessionMachine>;
    if (resting === undefined) return this.make(undefined);
    const [role, asleep] = resting.split(":");
    return this.make({ role: role as OpenRole, asleep: asleep === "asleep" });
  }

  private make(resume: SessionChartInput["resume"]): Actor<SessionMachine> {
    const actor = createActor(hostedSessionMachine(this.host.chartMachine), {
      input: resume ? { resume } : {},
      inspect: this.host.chartInspect,
    });
    bindEffects(actor.system, this.host.chartEffects());
    this.actor = actor;
    this.resting = undefined;
    actor.subscribe((snapshot) => this.observe(snapshot));
    actor.start();
    return actor;
  }

  /** Stops `actor` if it is still this chart's and at rest (after the transition that got it there). */
  private letGo(actor: Actor<SessionMachine>): void {
    if (this.actor !== actor) return;
    const snapshot = actor.getSnapshot();
    if (!atRest(snapshot)) return;
    this.actor = undefined;
    const role = roleOf(snapshot);
    // One string per state, not one per session: a resting session keeps only a reference.
    this.resting = snapshot.matches({ open: { residency: "asleep" } }) ? ASLEEP[role] : role;
    actor.stop();
  }

  private observe(snapshot: Snapshot): void {
    if (snapshot.status === "done") {
      this.resting = CLOSED;
      this.actor = undefined;
    }
    const work = this.resting === CLOSED ? "closed" : workValue(snapshot);
    const idle = work === "idle" || work === "closed";
    const { execution } = snapshot.context;
    const waiters = this.waiters;
    if (waiters?.length) {
      const ready = waiters.filter((w) =>
        w.execution < 0 ? idle : idle || execution > w.execution,
      );
      if (ready.length > 0) {
        this.waiters = waiters.filter((w) => !ready.includes(w));
        for (const w of ready) w.resolve();
      }
    }
    this.host.chartChanged(snapshot);
    this.onSnapshot?.(snapshot);
    const actor = this.actor;
    if (actor && atRest(snapshot)) queueMicrotask(() => this.letGo(actor));
  }
}

/**
 * Open, with no turn, no edit, no sleep being written, no takeover and nothing pending: what
 * the chart would start from again (`resume`) holds all that decides its future.
 */
function atRest(snapshot: Snapshot): boolean {
  const { context } = snapshot;
  return (
    snapshot.status === "active" &&
    snapshot.matches({ open: { work: "idle" } }) &&
    snapshot.matches({ open: { edits: "none" } }) &&
    !snapshot.matches({ open: { residency: "checkpointing" } }) &&
    !snapshot.matches({ open: { role: "takingOver" } }) &&
    context.pendingWake === null &&
    context.runnable === 0 &&
    context.forwarded === 0
  );
}

/** The work region's state name in `snapshot` (`opening`, `closing` outside `open`). */
function workValue(snapshot: Snapshot): string {
  const value = snapshot.value;
  if (typeof value === "string") return value === "opening" ? "idle" : value;
  if ("open" in value) {
    const work = (value.open as { work: string | Record<string, string> }).work;
    return typeof work === "string" ? work : Object.keys(work)[0];
  }
  return "closing";
}

function roleOf(snapshot: Snapshot): OpenRole {
  if (snapshot.matches({ open: { role: "owner" } })) return "owner";
  if (snapshot.matches({ open: { role: "follower" } })) return "follower";
  return "solo";
}
