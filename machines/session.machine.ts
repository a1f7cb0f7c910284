import { and, assertEvent, assign, not, or, raise, setup, stateIn } from "xstate";
import { effect } from "./effect.ts";
import type { SessionChartContext, SessionChartEvent, SessionChartInput } from "./session.types.ts";

/** Runnable inputs (the event's count when it carries one), no edit, and this process runs turns. */
const startable = and([
  ({ context, event }) =>
    ("runnable" in event ? event.runnable : context.runnable) > 0 && context.edits === 0,
  not(stateIn({ open: { role: "follower" } })),
  not(stateIn({ open: { role: "takingOver" } })),
]);

/**
 * A session's lifecycle (docs/architecture.md, "The session chart"): `opening → open →
 * closing → closed`, where `open` has four parallel regions.
 *
 * - **work** (the coordinator, one turn at a time): `idle → starting → running → cleaning →
 *   starting | idle`; `stopping` after an interrupt. "Again or idle" is ONE transition on
 *   `cleanup.done`, from the inbox count the host reads synchronously as it sends it, so an
 *   input that arrives during the last drain, the cleanup or a cancel is never lost (invariant
 *   6). An execution is one turn: a start with nothing runnable goes back to idle without
 *   counting one (invariant 18).
 * - **edits** (`none ⇄ editing`): compaction, redaction, branch moves and instructions. No
 *   turn starts and no sleep begins while one runs (invariant 17); an edit begins only when no
 *   turn runs.
 * - **residency** (`awake → checkpointing → asleep`): a quiet session writes a checkpoint and
 *   lets its log go; anything that happens while the checkpoint is written (an input, an edit,
 *   a takeover) keeps it awake, and only `rouse` (or a wake) reopens a log it let go, so nothing
 *   writes through a log the session let go (invariant 17).
 * - **role** (`solo | owner | follower → takingOver`): a follower runs no turn (its prompts are
 *   forwarded to the owner); a takeover adopts them when it ends, and a close during a takeover
 *   waits for it, then answers every waiter (invariant 18).
 *
 * Effects are declared with `effect()` ({@link SessionEffects}) and bound by the runtime
 * (`actors/charts.ts`), as for the other charts.
 */
export const sessionMachine = setup({
  types: {
    context: {} as SessionChartContext,
    events: {} as SessionChartEvent,
    input: {} as SessionChartInput,
  },
  guards: {
    startable,
    isCurrent: ({ context, event }) =>
      "execution" in event && event.execution === context.execution,
    quiet: and([
      ({ context, event }) =>
        event.type === "sleep" && event.allowed && context.runnable === 0 && context.edits === 0,
      stateIn({ open: { work: "idle" } }),
      not(stateIn({ open: { role: "follower" } })),
      not(stateIn({ open: { role: "takingOver" } })),
    ]),
    stillQuiet: ({ context, event }) =>
      event.type === "checkpoint.written" && event.unchanged && context.runnable === 0,
    lastEdit: ({ context }) => context.edits === 1,
    editAllowed: and([
      not(stateIn({ open: { work: "running" } })),
      not(stateIn({ open: { work: "stopping" } })),
    ]),
    takingOver: stateIn({ open: { role: "takingOver" } }),
    /** At `open`: runnable inputs and a role that runs turns (the role region enters with it). */
    startsWriting: ({ context }) =>
      context.runnable > 0 && context.edits === 0 && context.startRole !== "follower",
    /** A preparation's answer: nothing runnable, or this process no longer writes the log. */
    nothingToRun: or([
      ({ context, event }) => ("runnable" in event ? event.runnable : context.runnable) === 0,
      stateIn({ open: { role: "follower" } }),
      stateIn({ open: { role: "takingOver" } }),
    ]),
    entersOwner: ({ context }) => context.startRole === "owner",
    entersFollower: ({ context }) => context.startRole === "follower",
    resumed: ({ context }) => context.resumed,
    resumedAsleep: ({ context }) => context.resumedAsleep,
  },
  actions: {
    prepareTurn: effect<{ execution: number }>(),
    runTurn: effect<{ execution: number }>(),
    abortRun: effect(),
    startCleanup: effect<{ execution: number }>(),
    writeCheckpoint: effect(),
    letGo: effect(),
    reopen: effect(),
    leaseLost: effect(),
    adoptForwarded: effect(),
    startClose: effect(),
    settleWaiters: effect(),
    count: assign(({ event }) => ("runnable" in event ? { runnable: event.runnable } : {})),
    ringDoorbell: assign(({ context, event }) => {
      assertEvent(event, "wake");
      return {
        runnable: event.runnable,
        pendingWake: { seq: Math.max(context.pendingWake?.seq ?? -1, event.seq) },
      };
    }),
    clearDoorbell: assign({ pendingWake: null }),
    recordInterrupt: assign(({ context, event }) => {
      assertEvent(event, "interrupt");
      const keep = context.pendingWake !== null && context.pendingWake.seq > event.seq;
      return { pendingWake: keep ? context.pendingWake : null };
    }),
    begin: assign(({ context }) => ({ execution: context.execution + 1, pendingWake: null })),
    recordDone: assign({ lastOutcome: "done", lastError: null }),
    recordInterrupted: assign({ lastOutcome: "interrupted", lastError: null }),
    recordFailure: assign(({ event }) => {
      assertEvent(event, "turn.failed");
      return { lastOutcome: "failed" as const, lastError: event.error };
    }),
    recordCleanupError: assign(({ context, event }) => {
      assertEvent(event, "cleanup.done");
      return { lastError: event.error ?? context.lastError };
    }),
    editBegun: assign(({ context }) => ({ edits: context.edits + 1 })),
    editEnded: assign(({ context }) => ({ edits: Math.max(0, context.edits - 1) })),
    drained: raise({ type: "edits.drained" }),
    forwarded: assign(({ context }) => ({ forwarded: context.forwarded + 1 })),
    answered: assign(({ context }) => ({ forwarded: Math.max(0, context.forwarded - 1) })),
    adopted: assign({ forwarded: 0 }),
  },
}).createMachine({
  id: "session",
  context: ({ input }) => ({
    execution: 0,
    turns: 0,
    pendingWake: null,
    runnable: 0,
    edits: 0,
    forwarded: 0,
    startRole: input?.resume?.role ?? "solo",
    resumed: input?.resume !== undefined,
    resumedAsleep: input?.resume?.asleep === true,
    lastOutcome: null,
    lastError: null,
  }),
  initial: "opening",
  states: {
    // The log is being loaded and recovered; inputs wait in the inbox.
    opening: {
      always: { guard: "resumed", target: "open" },
      on: {
        opened: {
          target: "open",
          actions: assign(({ event }) => ({ startRole: event.role, runnable: event.runnable })),
        },
        "open.failed": "closed",
        wake: { actions: "count" },
        close: "closing",
      },
    },
    open: {
      type: "parallel",
      on: {
        close: [
          // A takeover loading the log ends first: its waiters are settled with the others.
          { guard: "takingOver", target: "closing.awaitingTakeover", actions: "abortRun" },
          { target: "closing", actions: "abortRun" },
        ],
      },
      states: {
        // Listed first: a reopen runs before any other region acts on the same event.
        residency: {
          initial: "entering",
          states: {
            entering: {
              always: [{ guard: "resumedAsleep", target: "asleep" }, { target: "awake" }],
            },
            awake: {
              on: { sleep: { guard: "quiet", target: "checkpointing" } },
            },
            // Anything but a quiet checkpoint keeps the session awake; the write is not undone.
            checkpointing: {
              entry: "writeCheckpoint",
              on: {
                "checkpoint.written": [
                  { guard: "stillQuiet", target: "asleep", actions: "letGo" },
                  { target: "awake" },
                ],
                "checkpoint.failed": "awake",
                wake: "awake",
                rouse: "awake",
                "edit.begin": "awake",
                "takeover.begin": "awake",
                "lease.lost": "awake",
                "role.follower": "awake",
              },
            },
            // The log is let go: only a reopen brings it back (no write through a log let go).
            asleep: {
              on: {
                rouse: { target: "awake", actions: "reopen" },
                wake: { target: "awake", actions: "reopen" },
                "edit.begin": { target: "awake", actions: "reopen" },
                "role.follower": { target: "awake", actions: "reopen" },
                "lease.lost": { target: "awake", actions: "reopen" },
                "takeover.begin": { target: "awake", actions: "reopen" },
              },
            },
          },
        },
        work: {
          initial: "entering",
          states: {
            // Inputs that arrived while the log was loading start the first turn.
            entering: {
              always: [
                { guard: "startsWriting", target: "starting", actions: "begin" },
                { target: "idle" },
              ],
            },
            // No turn and none being prepared: the only state where a wake starts one.
            idle: {
              on: {
                wake: [
                  { guard: "startable", target: "starting", actions: ["count", "begin"] },
                  { guard: ({ event }) => event.runnable > 0, actions: "ringDoorbell" },
                  { actions: "count" },
                ],
                interrupt: { actions: "recordInterrupt" },
                "edits.drained": { guard: "startable", target: "starting", actions: "begin" },
                "takeover.done": {
                  guard: ({ event }) => event.runnable > 0,
                  target: "starting",
                  actions: ["count", "begin"],
                },
              },
            },
            // The turn's dependencies are being prepared; an edit begun now holds it back.
            starting: {
              initial: "preparing",
              entry: {
                type: "prepareTurn",
                params: ({ context }) => ({ execution: context.execution }),
              },
              on: {
                wake: { actions: "ringDoorbell" },
              },
              states: {
                // The preparation is in flight: an interrupt signals it and waits for its answer,
                // so nothing (a sleep, a close's flush) runs under it.
                preparing: {
                  on: {
                    interrupt: { actions: ["recordInterrupt", "recordInterrupted", "abortRun"] },
                    "turn.ready": [
                      {
                        guard: and(["isCurrent", "nothingToRun"]),
                        target: "#session.open.work.cleaning",
                        actions: "count",
                      },
                      {
                        guard: and(["isCurrent", ({ context }) => context.edits === 0]),
                        target: "#session.open.work.running",
                        actions: "count",
                      },
                      { guard: "isCurrent", target: "held", actions: "count" },
                    ],
                  },
                },
                // Ready, but an edit runs: the turn starts once the last edit ends.
                held: {
                  on: {
                    "edits.drained": [
                      { guard: "nothingToRun", target: "#session.open.work.cleaning" },
                      { target: "#session.open.work.running" },
                    ],
                    interrupt: {
                      target: "#session.open.work.cleaning",
                      actions: ["recordInterrupt", "recordInterrupted"],
                    },
                    "lease.lost": "#session.open.work.cleaning",
                  },
                },
              },
            },
            // Exactly one turn runs; a wake here only rings the doorbell.
            running: {
              entry: [
                assign(({ context }) => ({ turns: context.turns + 1, pendingWake: null })),
                { type: "runTurn", params: ({ context }) => ({ execution: context.execution }) },
              ],
              on: {
                wake: { actions: "ringDoorbell" },
                interrupt: { target: "stopping", actions: ["recordInterrupt", "abortRun"] },
                "lease.lost": { target: "stopping", actions: "leaseLost" },
                "turn.done": { guard: "isCurrent", target: "cleaning", actions: "recordDone" },
                "turn.failed": { guard: "isCurrent", target: "cleaning", actions: "recordFailure" },
              },
            },
            // Interrupt acknowledged, abort signalled; the turn has not ended yet.
            stopping: {
              on: {
                wake: { actions: "ringDoorbell" },
                interrupt: { actions: "recordInterrupt" },
                "turn.done": {
                  guard: "isCurrent",
                  target: "cleaning",
                  actions: "recordInterrupted",
                },
                "turn.failed": { guard: "isCurrent", target: "cleaning", actions: "recordFailure" },
              },
            },
            // The turn ended; cleanup may await. The handover below is a single transition.
            cleaning: {
              entry: {
                type: "startCleanup",
                params: ({ context }) => ({ execution: context.execution }),
              },
              on: {
                wake: { actions: "ringDoorbell" },
                interrupt: { actions: "recordInterrupt" },
                "cleanup.done": [
                  {
                    guard: and(["isCurrent", ({ event }) => event.runnable > 0, "startable"]),
                    target: "starting",
                    actions: ["recordCleanupError", "count", "begin"],
                  },
                  {
                    guard: and(["isCurrent", ({ event }) => event.runnable > 0]),
                    target: "idle",
                    actions: ["recordCleanupError", "count"],
                  },
                  {
                    guard: "isCurrent",
                    target: "idle",
                    actions: ["recordCleanupError", "count", "clearDoorbell"],
                  },
                ],
              },
            },
          },
        },
        edits: {
          initial: "none",
          states: {
            none: {
              on: {
                "edit.begin": { guard: "editAllowed", target: "editing", actions: "editBegun" },
              },
            },
            // No turn starts and no sleep begins while an edit runs.
            editing: {
              on: {
                "edit.begin": { actions: "editBegun" },
                "edit.end": [
                  { guard: "lastEdit", target: "none", actions: ["editEnded", "drained"] },
                  { actions: "editEnded" },
                ],
              },
            },
          },
        },
        role: {
          initial: "entering",
          states: {
            entering: {
              always: [
                { guard: "entersOwner", target: "owner" },
                { guard: "entersFollower", target: "follower" },
                { target: "solo" },
              ],
            },
            solo: {},
            owner: {
              on: {
                "lease.lost": "follower",
                "role.follower": "follower",
              },
            },
            // Reads, forwards its prompts to the owner, and takes over when the owner is gone.
            follower: {
              on: {
                "role.owner": "owner",
                forward: { actions: "forwarded" },
                "forward.answered": { actions: "answered" },
                "takeover.begin": "takingOver",
              },
            },
            // The lease is taken and the log is being loaded; `close()` waits for the end.
            takingOver: {
              on: {
                forward: { actions: "forwarded" },
                "forward.answered": { actions: "answered" },
                "takeover.done": {
                  target: "owner",
                  actions: ["adoptForwarded", "adopted", "count"],
                },
                "takeover.failed": "follower",
              },
            },
          },
        },
      },
    },
    closing: {
      initial: "stopping",
      states: {
        // A takeover in flight ends first (as the owner): this close then releases it.
        awaitingTakeover: {
          on: {
            "takeover.done": { target: "stopping", actions: ["adoptForwarded", "adopted"] },
            "takeover.failed": "stopping",
          },
        },
        // What runs is cancelled and awaited, the log flushed, the lease released.
        stopping: {
          entry: "startClose",
          on: { "close.done": "#session.closed" },
        },
      },
    },
    // Every waiter was answered; later events change nothing.
    closed: { type: "final", entry: "settleWaiters" },
  },
});

export type SessionMachine = typeof sessionMachine;
