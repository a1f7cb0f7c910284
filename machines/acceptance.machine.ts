import { type AnyActorRef, assertEvent, assign, setup } from "xstate";
import type {
  AcceptanceStatus,
  CheckEvidence,
  CheckKind,
  Evidence,
} from "../contracts/acceptance.ts";
import type { TurnStatus } from "../contracts/status.ts";
import { effect } from "./effect.ts";

/** Why a round of checks runs: after a turn, on `session.accept()`, or a handoff's regression check. */
export type CheckReason = "turn" | "accept" | "handoff";

export interface AcceptanceInput {
  specVersion: number;
  /** The spec's checks, in order, with their kinds. */
  checks: { name: string; kind: CheckKind }[];
  /** How many follow-up rounds the loop may send (0: no loop). */
  maxRounds: number;
}

export interface AcceptanceContext extends AcceptanceInput {
  /** The artifact version as last read. */
  version: string | undefined;
  /** The last evidence of each check, by name. */
  evidence: Record<string, CheckEvidence>;
  /**
   * Checks running now: the version each started against and whether the artifact was read
   * with another version since (then its evidence never counts).
   */
  running: Record<string, { version: string; changed: boolean; kind: CheckKind }>;
  /** Follow-up rounds sent in the current run of the loop. */
  round: number;
  /** Whether the current run may send follow-ups (`until: "passed"` and a completed turn). */
  loop: boolean;
  reason: CheckReason;
  /** The current run was interrupted: its result is what the evidence says, checks unfinished. */
  interrupted: boolean;
}

export type AcceptanceEvent =
  /** The host read the artifact's version (before and after checks, at a turn's end, on demand). */
  | { type: "artifact.read"; version: string }
  /** Evidence read back from the log when the session opens (bound to the versions it names). */
  | { type: "evidence.restored"; evidence: CheckEvidence[] }
  /** The embedder changed the spec: a new version, every earlier evidence dropped. */
  | { type: "spec.changed"; specVersion: number; checks: { name: string; kind: CheckKind }[] }
  /** Run `names` (from idle). `loop`: failing evidence may be sent to the model as follow-ups. */
  | { type: "checks.requested"; names: string[]; loop: boolean; reason: CheckReason }
  | { type: "check.started"; name: string; version: string }
  | {
      type: "check.finished";
      name: string;
      passed: boolean;
      output: string;
      startedAt: number;
      durationMs: number;
    }
  /** Every check of the round has finished (or was stopped after `abortChecks`). */
  | { type: "checks.done" }
  | { type: "acceptance.interrupt"; reason: string }
  /** The follow-up turn of a round ended. */
  | { type: "round.ended"; status: TurnStatus };

/** What the run reports when it ends (params of `reported`). */
export interface AcceptanceOutcome {
  acceptance: AcceptanceStatus;
  evidence: Evidence;
  rounds: number;
  reason: CheckReason;
  interrupted: boolean;
}

/**
 * The acceptance status the context's evidence supports. Only `check` kinds count; `opinion`
 * evidence is shown but never decides. A check's evidence counts only when it was taken against
 * the current version (invariant 14 of docs/architecture.md): anything else is `stale`. This is a pure function.
 */
export function acceptanceStatus(context: {
  checks: readonly { name: string; kind: CheckKind }[];
  evidence: Readonly<Record<string, CheckEvidence>>;
  version: string | undefined;
}): AcceptanceStatus {
  let failed = false;
  let stale = false;
  let missing = false;
  for (const { name, kind } of context.checks) {
    if (kind !== "check") continue;
    const ev = context.evidence[name];
    if (!ev) missing = true;
    else if (ev.artifactVersion !== context.version) stale = true;
    else if (!ev.passed) failed = true;
  }
  if (failed) return "failed";
  if (stale) return "stale";
  if (missing) return "pending";
  return "passed";
}

/** The evidence of a context, in spec order. This is a pure function. */
export function evidenceOf(context: AcceptanceContext): Evidence {
  const checks: CheckEvidence[] = [];
  for (const { name } of context.checks) {
    const ev = context.evidence[name];
    if (ev) checks.push(ev);
  }
  return { artifactVersion: context.version, checks };
}

/** The checks whose evidence does not count now: missing or taken against another version. */
export function staleChecks(context: AcceptanceContext): string[] {
  return context.checks
    .filter(({ name }) => {
      const ev = context.evidence[name];
      return !ev || ev.artifactVersion !== context.version;
    })
    .map((c) => c.name);
}

const outcomeOf = (context: AcceptanceContext): AcceptanceOutcome => ({
  acceptance: acceptanceStatus(context),
  evidence: evidenceOf(context),
  rounds: context.round,
  reason: context.reason,
  interrupted: context.interrupted,
});

/**
 * The effects the acceptance chart names, implemented by the session's acceptance host
 * (`actors/acceptance.ts`) and bound by `actors/charts.ts`. Contract for all: must not throw.
 */
export interface AcceptanceEffects {
  /**
   * Run the checks `names` one after another: for each, answer `check.started` (with the
   * version read before it) and `check.finished`, reading the version again after it
   * (`artifact.read`); then `checks.done`.
   */
  runChecks(self: AnyActorRef, params: { names: string[]; round: number }): void;
  /** Stop the running checks (kill their process groups); `checks.done` follows. */
  abortChecks(self: AnyActorRef): void;
  /** Send the failing evidence to the model as a follow-up turn. Answers `round.ended`. */
  followUp(self: AnyActorRef, params: { round: number; failing: CheckEvidence[] }): void;
  /** The run ended: record and publish its outcome. */
  reported(self: AnyActorRef, params: AcceptanceOutcome): void;
}

/**
 * The acceptance of one session: its evidence ledger and the loop that decides, after a turn,
 * whether to run the checks again after a follow-up.
 *
 * `idle` → (`checks.requested`) `checking` → (`checks.done`) `idle`, reporting the outcome; or,
 * in a loop run whose required checks did not all pass and while `round < maxRounds`,
 * `followingUp` (a turn with the failing evidence) → (`round.ended` completed) `checking` …;
 * a follow-up that ran out of budget is checked once more and ends the loop (a failed or
 * cancelled one ends it at once).
 * An interrupt while checking stops the checks (`stopping`) and reports what the evidence then
 * says: an interrupted check left none, so its status is `pending`.
 *
 * Why a chart of its own and not states of the turn chart: acceptance outlives a turn (it is
 * read and re-checked between turns, by `accept()`, and by the next session from a handoff), the
 * turn records only the run status (docs/acceptance.md), and each round of the loop is a follow-up,
 * which in Keel is a turn of its own. The turn chart stays as it is, per step as cheap.
 *
 * Invariants made structural here:
 * - evidence is bound to the version read when its check STARTED; a version read while it
 *   runs makes it `<before>..<after>`, which no artifact has, so it never counts (invariant 14);
 * - a check's earlier evidence is dropped when it starts again: an interrupted re-run leaves
 *   `pending`, never the older result;
 * - `check.finished` counts only for a check this chart saw start and has not stopped;
 * - at most `maxRounds` follow-ups per run, and only after a turn that completed.
 */
export const acceptanceMachine = setup({
  types: {
    context: {} as AcceptanceContext,
    events: {} as AcceptanceEvent,
    input: {} as AcceptanceInput,
  },
  actions: {
    runChecks: effect<{ names: string[]; round: number }>(),
    abortChecks: effect(),
    followUp: effect<{ round: number; failing: CheckEvidence[] }>(),
    reported: effect<AcceptanceOutcome>(),
    readVersion: assign(({ context, event }) => {
      assertEvent(event, "artifact.read");
      let running = context.running;
      for (const [name, r] of Object.entries(running)) {
        if (r.version !== event.version) running = { ...running, [name]: { ...r, changed: true } };
      }
      return { version: event.version, running };
    }),
    startCheck: assign(({ context, event }) => {
      assertEvent(event, "check.started");
      const kind = context.checks.find((c) => c.name === event.name)?.kind ?? "check";
      const { [event.name]: _dropped, ...evidence } = context.evidence;
      return {
        evidence,
        running: {
          ...context.running,
          [event.name]: { version: event.version, changed: false, kind },
        },
      };
    }),
    recordEvidence: assign(({ context, event }) => {
      assertEvent(event, "check.finished");
      const { [event.name]: run, ...running } = context.running;
      if (!run) return {};
      // `changed` is set only by a read, so `context.version` is that read's (or a later one's).
      const artifactVersion = run.changed ? `${run.version}..${context.version}` : run.version;
      const evidence: CheckEvidence = {
        name: event.name,
        kind: run.kind,
        passed: event.passed,
        output: event.output,
        startedAt: event.startedAt,
        durationMs: event.durationMs,
        artifactVersion,
      };
      return { running, evidence: { ...context.evidence, [event.name]: evidence } };
    }),
  },
  guards: {
    passed: ({ context }) => acceptanceStatus(context) === "passed",
    mayFollowUp: ({ context }) => context.loop && context.round < context.maxRounds,
    /** The follow-up turn completed, and no interrupt came while it ran or after it ended. */
    turnCompleted: ({ context, event }) => {
      assertEvent(event, "round.ended");
      return event.status === "completed" && !context.interrupted;
    },
    /** The follow-up turn ran out of its budget: its partial work still gets checked, once. */
    turnOutOfBudget: ({ context, event }) => {
      assertEvent(event, "round.ended");
      return event.status === "budget_exhausted" && !context.interrupted;
    },
  },
}).createMachine({
  id: "acceptance",
  context: ({ input }) => ({
    specVersion: input.specVersion,
    checks: input.checks,
    maxRounds: input.maxRounds,
    version: undefined,
    evidence: {},
    running: {},
    round: 0,
    loop: false,
    reason: "accept",
    interrupted: false,
  }),
  initial: "idle",
  on: {
    "artifact.read": { actions: "readVersion" },
    "check.started": { actions: "startCheck" },
    "check.finished": { actions: "recordEvidence" },
  },
  states: {
    idle: {
      on: {
        "checks.requested": {
          target: "checking",
          actions: assign(({ event }) => ({
            round: 0,
            loop: event.loop,
            reason: event.reason,
            interrupted: false,
          })),
        },
        "evidence.restored": {
          actions: assign(({ context, event }) => {
            const evidence = { ...context.evidence };
            for (const ev of event.evidence) {
              if (context.checks.some((c) => c.name === ev.name && c.kind === ev.kind))
                evidence[ev.name] = ev;
            }
            return { evidence };
          }),
        },
        "spec.changed": {
          actions: assign(({ event }) => ({
            specVersion: event.specVersion,
            checks: event.checks,
            evidence: {},
          })),
        },
        // Reports outside a run (a late check) change nothing.
        "check.started": {},
        "check.finished": {},
      },
    },
    checking: {
      entry: {
        type: "runChecks",
        params: ({ context, event }) => ({
          // After a follow-up turn: the checks whose evidence does not count for what it left.
          names: event.type === "checks.requested" ? event.names : staleChecks(context),
          round: context.round,
        }),
      },
      on: {
        "checks.done": [
          {
            guard: "passed",
            target: "idle",
            actions: { type: "reported", params: ({ context }) => outcomeOf(context) },
          },
          {
            guard: "mayFollowUp",
            target: "followingUp",
            actions: assign({ round: ({ context }) => context.round + 1 }),
          },
          {
            target: "idle",
            actions: { type: "reported", params: ({ context }) => outcomeOf(context) },
          },
        ],
        "acceptance.interrupt": {
          target: "stopping",
          actions: [assign({ interrupted: true }), "abortChecks"],
        },
      },
    },
    // The checks are being killed; whatever they report now is not evidence.
    stopping: {
      on: {
        "check.finished": {},
        "acceptance.interrupt": {},
        "checks.done": {
          target: "idle",
          actions: [
            assign({ running: {} }),
            { type: "reported", params: ({ context }) => outcomeOf(context) },
          ],
        },
      },
    },
    // A turn with the failing evidence as its input. Its interrupt goes to the turn itself.
    followingUp: {
      entry: {
        type: "followUp",
        params: ({ context }) => ({
          round: context.round,
          failing: evidenceOf(context).checks.filter(
            (c) => !c.passed || c.artifactVersion !== context.version,
          ),
        }),
      },
      on: {
        "acceptance.interrupt": { actions: assign({ interrupted: true }) },
        "round.ended": [
          { guard: "turnCompleted", target: "checking" },
          // The run ends budget_exhausted with its own acceptance: the partial work is checked,
          // and no further follow-up is sent (the loop is over).
          { guard: "turnOutOfBudget", target: "checking", actions: assign({ loop: false }) },
          {
            target: "idle",
            actions: { type: "reported", params: ({ context }) => outcomeOf(context) },
          },
        ],
      },
    },
  },
});

export type AcceptanceMachine = typeof acceptanceMachine;
