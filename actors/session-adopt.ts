// How a session takes a log as its state: at open, when a follower takes over, and when it
// wakes from a sleep; and how it lets the log go to sleep. Kept apart from the facade
// (actors/session.ts) because it wires the parts together: the turn dependencies built on the
// log, its acceptance, fencing, and the records a stopped process owed it.

import type { SessionLog } from "../session/log.ts";
import { refusalCode } from "../session/store-error.ts";
import { SessionAcceptance } from "./session-acceptance.ts";
import { sleepAllowed } from "./session-effects.ts";
import type { SessionInputs } from "./session-inputs.ts";
import type { SessionLease } from "./session-lease.ts";
import type { SessionRunner } from "./session-runner.ts";
import type { SessionScope } from "./session-scope.ts";
import type { TurnDeps } from "./turn-scope.ts";

/**
 * Takes `log` as the session's state. `setAcceptance` receives the session's acceptance facade
 * (undefined: none, or this process does not write the log) before anything is awaited.
 */
export async function adoptLog(
  s: SessionScope,
  inputs: SessionInputs,
  lease: SessionLease | undefined,
  log: SessionLog,
  setAcceptance: (part: SessionAcceptance | undefined) => void,
): Promise<void> {
  s.slot.takeCarried(); // a log taken at open or at a takeover starts fresh
  wireLog(s, inputs, lease, log);
  // What writes to the log at open is the lease holder's to do (or a store's only process).
  const writer = !s.options.lease || log.heldLease !== undefined;
  const host = writer
    ? s.options.acceptance?.(
        log,
        (e) => s.emit(e),
        (text, cancelled) => s.acceptance!.runLoopTurn(text, cancelled),
      )
    : undefined;
  const part = host ? new SessionAcceptance(s, host) : undefined;
  setAcceptance(part);
  s.acceptance = part;
  if (host) {
    host.open();
    s.deps.guardCall = (call) => host.guardCall(call);
    s.deps.watchCall = (call) => host.watchCall(call);
    await log.flush();
  }
  // An interrupt a stopped process received and did not record: its turn is long over.
  if (writer && inputs.recordStrandedInterrupts()) await log.flush();
}

/**
 * The synchronous part of taking `log`: the session's parts read it from here on, a fenced
 * write makes the lease follow, restored inputs are held, and the per-turn dependencies are
 * built on it at their first read. Also how a session that slept takes its reopened log.
 */
export function wireLog(
  s: SessionScope,
  inputs: SessionInputs,
  lease: SessionLease | undefined,
  log: SessionLog,
): void {
  s.log = log;
  // A write the store fenced: another runner owns the session now. Stop, and follow it.
  log.onRefused((error) => {
    if (s.awake && s.log === log && refusalCode(error) === "LEASE_LOST") {
      lease?.lost("another runner writes it now (the store refused this runner's write)");
    }
  });
  inputs.holdRestored(); // restored inputs wait for resume() or a new input
  // Built at their first read (an idle session holds none), on the object `deps` made: a spread
  // copy of it got a hidden class of its own in every session.
  s.slot.depsFrom(() => buildDeps(s, inputs, log));
}

/**
 * The per-turn dependencies on `log`. Apart from `wireLog` so that the callbacks made here
 * (which a sleep keeps, in the context it carries) hold only `s` and `inputs`, not `wireLog`'s
 * scope and with it the log the sleep let go.
 */
function buildDeps(s: SessionScope, inputs: SessionInputs, log: SessionLog): TurnDeps {
  // Only for the log the session slept on: another runner's writes (a lost lease, a takeover)
  // make a fresh start, as a session that never slept gets.
  const kept = s.slot.takeCarried();
  const carried = kept?.seq === log.lastSeq ? kept : undefined;
  const deps = s.options.deps(
    log,
    (e) => s.emit(e),
    (point) => inputs.poll(point),
    carried,
  );
  deps.wantsPreviews = () => s.listened;
  return deps;
}

/**
 * Opens the session (its `ready`): takes the lease when the store is shared, loads the log,
 * recovers what a stopped process left (the lease's holder only), adopts the log, then owns or
 * follows. Open and idle, the session may sleep until its first input.
 */
export async function openSessionLog(
  s: SessionScope,
  runner: SessionRunner,
  inputs: SessionInputs,
  lease: SessionLease | undefined,
): Promise<void> {
  const { options } = s;
  const held = lease ? await lease.take() : null;
  const log = await options.openLog();
  if (held) log.fence(held);
  // Crash recovery only by the lease's holder: a follower never touches a live owner's log.
  const recovered = !lease || held ? await options.recover?.(log) : undefined;
  await s.adopt(log);
  if (lease) {
    if (held) lease.becomeOwner(held);
    else lease.becomeFollower();
  }
  runner.pendingHandoff = options.handoff;
  runner.pendingContinue = recovered?.continueTurn;
  s.opened = true;
  const role = s.role === "owner" || s.role === "follower" ? s.role : "solo";
  // A turn a crash cut counts as runnable: it goes on with no new input.
  s.chart.send({ type: "opened", role, runnable: runner.runnable() });
}

/** Takes a log reopened after a sleep: fenced with the lease still held, then wired. */
export function rewireLog(
  s: SessionScope,
  inputs: SessionInputs,
  lease: SessionLease | undefined,
  log: SessionLog,
): void {
  const held = lease?.held;
  if (held) log.fence(held);
  wireLog(s, inputs, lease, log);
}

/**
 * Asks the session chart to sleep (the agent's `dormantAfterMs` after it went idle). The chart
 * decides (its residency region: no turn, no edit, no runnable input, a writer's role) with
 * what only the host can see (`sleepAllowed`); it then writes a checkpoint at the last entry,
 * so the next read or input reopens the log from it in O(projection), not O(history), and lets
 * the log go unless anything happened meanwhile. Resolves to whether it slept.
 */
export function sleepWhenQuiet(s: SessionScope, inputs: SessionInputs): Promise<boolean> {
  const { chart } = s;
  if (chart.closed || !chart.matches({ open: { residency: "awake" } })) {
    return Promise.resolve(false);
  }
  chart.send({ type: "sleep", allowed: sleepAllowed(s, inputs) });
  if (!chart.matches({ open: { residency: "checkpointing" } })) return Promise.resolve(false);
  return new Promise((resolve) => {
    const previous = chart.onSnapshot;
    chart.onSnapshot = (snapshot) => {
      previous?.(snapshot);
      if (snapshot.matches({ open: { residency: "checkpointing" } })) return;
      chart.onSnapshot = previous;
      resolve(chart.asleep);
    };
  });
}
