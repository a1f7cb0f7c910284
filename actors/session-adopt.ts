// How a session takes a log as its state: at open, and when a follower takes over. Kept apart
// from the facade (actors/session.ts) because it wires the parts together: the turn
// dependencies built on the log, its acceptance, fencing, and the records a stopped process
// owed it.
import type { SessionLog } from "../session/log.ts";
import { refusalCode } from "../session/store-error.ts";
import { SessionAcceptance } from "./session-acceptance.ts";
import type { SessionInputs } from "./session-inputs.ts";
import type { SessionLease } from "./session-lease.ts";
import type { SessionScope } from "./session-scope.ts";

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
  s.log = log;
  // A write the store fenced: another runner owns the session now. Stop, and follow it.
  log.onRefused((error) => {
    if (s.log === log && refusalCode(error) === "LEASE_LOST") {
      lease?.lost("another runner writes it now (the store refused this runner's write)");
    }
  });
  inputs.holdRestored(); // restored inputs wait for resume() or a new input
  // Built at their first read (an idle session holds none), on the object `deps` made: a spread
  // copy of it got a hidden class of its own in every session.
  s.depsFrom(() => {
    const deps = s.options.deps(
      log,
      (e) => s.emit(e),
      (point) => inputs.poll(point),
    );
    deps.wantsPreviews = () => s.listeners.size > 0;
    return deps;
  });
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
