// The session chart's effects (machines/session.machine.ts, `SessionEffects`): each one names
// the part of the session that carries it out. The chart decides; these only do.

import type { AnyActorRef, SnapshotFrom } from "xstate";
import type { SessionMachine } from "../machines/session.machine.ts";
import type { SessionEffects } from "../machines/session.types.ts";
import { reopensSync } from "../session/checkpoint.ts";
import type { SessionInputs } from "./session-inputs.ts";
import type { SessionLease } from "./session-lease.ts";
import { notRun } from "./session-options.ts";
import type { SessionScope } from "./session-scope.ts";

/** What the effects ask of the session's runner (actors/session-runner.ts). */
export interface EffectRunner {
  prepare(self: AnyActorRef, execution: number): void;
  runOne(self: AnyActorRef, execution: number): void;
  abort(): void;
  cleanup(self: AnyActorRef, execution: number): void;
  stopForLeaseLost(): void;
  stopTurn(reason: string): void;
  settled(): Promise<void>;
}

/** The parts of one session the effects reach. */
export interface SessionParts {
  s: SessionScope;
  inputs: SessionInputs;
  runner: EffectRunner;
  lease: SessionLease | undefined;
}

/** The session chart's effects, bound to one session's parts. */
export function sessionEffects(parts: SessionParts): SessionEffects {
  const { s, inputs, runner, lease } = parts;
  return {
    prepareTurn: (self, { execution }) => runner.prepare(self, execution),
    runTurn: (self, { execution }) => runner.runOne(self, execution),
    abortRun: () => runner.abort(),
    startCleanup: (self, { execution }) => runner.cleanup(self, execution),
    writeCheckpoint: (self) => writeCheckpoint(parts, self),
    letGo: () => {
      s.sleep();
      inputs.compact();
    },
    reopen: () => s.slot.reopen(),
    leaseLost: () => runner.stopForLeaseLost(),
    adoptForwarded: () => lease?.adoptForwarded(),
    startClose: (self) => {
      closeSession(parts).then(
        () => self.send({ type: "close.done" }),
        (err: unknown) => {
          closeErrors.set(s, err); // close() rejects with it once every waiter is answered
          self.send({ type: "close.done" });
        },
      );
    },
    settleWaiters: () => {
      const closed = (id: string) =>
        notRun(
          "cancelled",
          `session closed before input ${id} ran; it stays queued in the log and runs after the session is reopened and resumed`,
        );
      inputs.answerAll(closed);
      lease?.answerForwarded(closed);
    },
  };
}

/**
 * Whether a session may sleep now, as far as the chart cannot see: open and not closing, no
 * acceptance, no input being called or waiting, and a store that reopens a log synchronously.
 * (No turn, no edit, no runnable input and a writer's role are the chart's own guard.)
 */
export function sleepAllowed(s: SessionScope, inputs: SessionInputs): boolean {
  return (
    s.opened &&
    s.closing === undefined &&
    s.acceptance === undefined &&
    s.awake &&
    reopensSync(s.log.store) &&
    inputs.quiet
  );
}

/**
 * Effect `writeCheckpoint`: a checkpoint at the last entry, then `checkpoint.written` with
 * whether the session is unchanged since (no entry appended, nothing pending, the same log, no
 * input called), or `checkpoint.failed`.
 */
function writeCheckpoint({ s, inputs }: SessionParts, self: AnyActorRef): void {
  const log = s.log;
  log.checkpoint().then(
    (checkpointed) => {
      if (!checkpointed) {
        self.send({ type: "checkpoint.failed" });
        return;
      }
      const unchanged =
        log.pendingCount() === 0 &&
        log.durableSeq === log.lastSeq &&
        s.awake &&
        s.log === log &&
        inputs.quiet &&
        s.closing === undefined;
      self.send({ type: "checkpoint.written", unchanged });
    },
    () => self.send({ type: "checkpoint.failed" }),
  );
}

/**
 * Effect `startClose`: holds the queued inputs, cancels what runs and waits for it, waits for a
 * pull of posted inputs, flushes the log and gives the lease back. Resolves when done; the
 * chart then answers every waiter (`settleWaiters`).
 */
export async function closeSession({ s, inputs, runner, lease }: SessionParts): Promise<void> {
  await s.ready.catch(() => {});
  if (s.awake) inputs.holdAll();
  runner.stopTurn("session closed"); // a shutdown, not an input: no inbox event
  await runner.settled();
  try {
    await lease?.settle();
    // A follower's log is the owner's: nothing of it is this process's to write.
    // A session that slept wrote its checkpoint and has nothing left to flush.
    if (s.awake && s.role !== "follower") await s.log.close();
    if (s.role === "owner") await lease?.release().catch(() => {});
  } finally {
    lease?.clearTimers();
    s.setRole("closed");
  }
}

/**
 * A session's `close()`: the chart cancels what runs (`startClose`, then `close.done`) and
 * answers every waiter on `closed`; resolves once it did and the listeners are let go. A session
 * whose open failed (its chart already closed) only settles what is left.
 */
export function closeThroughChart(parts: SessionParts): Promise<void> {
  const { s } = parts;
  return new Promise<void>((resolve, reject) => {
    const finish = () => {
      s.listeners.clear();
      s.options.onClosed?.();
      // The store refused the close's flush (a full disk): the caller learns it, as before.
      const failed = closeErrors.get(s);
      closeErrors.delete(s);
      if (failed === undefined) resolve();
      else reject(failed);
    };
    if (s.chart.closed) {
      closeSession(parts)
        .catch((err: unknown) => void closeErrors.set(s, err))
        .then(() => {
          sessionEffects(parts).settleWaiters(undefined as never);
          finish();
        });
      return;
    }
    const previous = s.chart.onSnapshot;
    s.chart.onSnapshot = (snapshot) => {
      previous?.(snapshot);
      if (snapshot.status === "done") finish();
    };
    s.chart.send({ type: "close" });
  });
}

/** Why a session's close failed, from its `startClose` effect to `close()`'s caller. */
const closeErrors = new WeakMap<SessionScope, unknown>();

/** What `restWhenQuiet` remembers of the last snapshot, as bits: the work was idle … */
const WAS_IDLE = 1;
/** … and the session was quiet. */
const WAS_QUIET = 2;

/**
 * The session's reaction to its chart's snapshot: when the work region goes idle the log lets
 * go of what it can read back from the store (`rest`), and when the session becomes quiet (open
 * and awake, no turn, no edit) the agent's dormancy is told, so it sleeps after
 * `dormantAfterMs` unless it works again meanwhile. `was` is what the previous snapshot was
 * (`WAS_IDLE` and `WAS_QUIET` bits); returns what this one is.
 */
export function restWhenQuiet(
  s: SessionScope,
  was: number,
  snapshot: SnapshotFrom<SessionMachine>,
): number {
  const idle = snapshot.matches({ open: { work: "idle" } });
  if (idle && !(was & WAS_IDLE) && s.awake) s.log.rest();
  const quiet =
    idle &&
    snapshot.matches({ open: { edits: "none" } }) &&
    snapshot.matches({ open: { residency: "awake" } });
  if (quiet && !(was & WAS_QUIET) && s.opened && s.closing === undefined) s.options.rested?.();
  return (idle || !snapshot.matches("open") ? WAS_IDLE : 0) | (quiet ? WAS_QUIET : 0);
}
