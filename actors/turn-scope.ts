import type { Logger } from "pino";
import type { AnyActorRef, InspectionEvent } from "xstate";
import type { ModelPrice } from "../contracts/budget.ts";
import type { Clock } from "../contracts/clock.ts";
import type { AgentEventBody } from "../contracts/events.ts";
import type { IdGenerator } from "../contracts/ids.ts";
import type { ToolCallPart } from "../contracts/messages.ts";
import type { Model } from "../contracts/model.ts";
import type { CallOutcome, TurnFailureCode } from "../contracts/status.ts";
import type { ToolFailure, ToolResult } from "../contracts/tool-result.ts";
import type { PollPoint } from "../machines/policies/inbox.ts";
import {
  failureSignature,
  type LoopGuardOptions,
  type ObservedResult,
} from "../machines/policies/loop-guard.ts";
import type { RetryPolicy } from "../machines/policies/retry-policy.ts";
import type { turnMachine } from "../machines/turn.machine.ts";
import type { TurnLimits } from "../machines/turn.types.ts";
import type { EntryInput, EntryOf } from "../session/entries.ts";
import { flat } from "../session/flat.ts";
import type { SessionLog } from "../session/log.ts";
import { refusalCode } from "../session/store-error.ts";
import { TurnTally } from "../session/turn-result.ts";
import type { Registry } from "../tools/registry.ts";
import type { PreparedCall, PrepareOutcome } from "../tools/types.ts";
import type { PermissionBroker } from "./permissions.ts";
import type { ProviderSlots } from "./provider-slots.ts";
import type { RetryBudget } from "./retry-budget.ts";
import type { ToolReport } from "./run-tool.ts";
import type { SessionBudgets } from "./session-budgets.ts";
import type { SessionContext } from "./session-context.ts";

/** Everything a turn needs from its session. Built once per session. */
export interface TurnDeps {
  sessionId: string;
  log: SessionLog;
  model: Model;
  registry: Registry;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  /** The session's emit: stamps `sessionId` and `at`. Contract: must not throw. */
  emit: (event: AgentEventBody) => void;
  retry: Partial<RetryPolicy>;
  retryBudget?: RetryBudget;
  /**
   * Bounds the requests in flight per provider (`createAgent({ concurrency })`): each attempt
   * holds a slot from before its request until its stream ends. Absent: unbounded.
   */
  slots?: ProviderSlots;
  random: () => number;
  limits: TurnLimits;
  /**
   * The prompt's, session's and agent's budgets with what each spent (actors/session-budgets.ts):
   * a turn reads them when it starts. Absent: the turn's `limits` only.
   */
  budgets?: SessionBudgets;
  /** The model's price (`createAgent({ prices })`): each response's cost. Absent: no cost. */
  price?: ModelPrice;
  /** The session's instructions, context budget and compactions. */
  context: SessionContext;
  /** Harder compactions after a context-overflow error, per turn. */
  maxOverflowRecoveries: number;
  maxParallelToolCalls: number;
  stopDeadlineMs: number;
  finalizeDeadlineMs: number;
  inspect?: (event: InspectionEvent) => void;
  /**
   * Polls the session's inbox at `point` of this turn (the lanes `lanesToDrain` names): each
   * input taken becomes a user message of this turn. The turn polls at every point, the policy
   * decides. Contract: synchronous, must not throw; returns how many inputs were taken.
   */
  poll: (point: PollPoint) => number;
  /** The session's permission state; absent: every call is allowed. */
  permissions?: PermissionBroker;
  /**
   * Writes the full output of a tool whose `outputBudget` says `overflow: "spill"` (the session's
   * spill folder, `createSpill`). Absent: such output is truncated. Contract: may reject.
   */
  spill?: (content: string, callId: string) => Promise<{ path: string; sha256: string }>;
  /**
   * Refuses a prepared call before it runs (e.g. a write to a frozen acceptance file): its
   * result is the returned failure and it never executes. Contract: synchronous, must not throw.
   */
  guardCall?: (call: PreparedCall) => ToolFailure | undefined;
  /**
   * Watches a call that is about to run (e.g. for writes to frozen acceptance files that no
   * path argument named, as a `shell` command makes): called just before the tool executes;
   * the function it returns, if any, gets the tool's report once it ran and returns the report
   * to settle the call with. Contract: both synchronous, must not throw.
   */
  watchCall?: (call: PreparedCall) => ((report: ToolReport) => ToolReport) | undefined;
  /** Whether anyone listens for argument previews (they cost a parse per 256 chars). */
  wantsPreviews?: () => boolean;
  /** Test seam: a variant of the turn statechart to host (mutation tests). */
  turnMachine?: typeof turnMachine;
  /** The loop guard's thresholds (resolved, `resolveLoopGuard`); false or absent: off. */
  loopGuard?: LoopGuardOptions | false;
}

/** A call's one result, as the turn recorded it. */
export interface CallRecord {
  outcome: CallOutcome;
  result: ToolResult;
}

/**
 * What the parts of one turn share: the turn's id, its session's dependencies, the current
 * response's calls and their one result each, and the few I/O primitives every part uses (an
 * append that the turn's tally reads, a coalesced flush, the stop on a refused write). The turn
 * chart decides; `TurnRun` (actors/turn-run.ts), `ModelAttempts` (actors/model-attempt.ts) and
 * `CallRunner` (actors/call-runner.ts) perform its effects over this state.
 */
export class TurnScope {
  readonly turnId: string;
  readonly deps: TurnDeps;
  /** The turn actor (set when the turn starts). */
  actor!: AnyActorRef;
  /** The turn's result as the entries it appended say it (the one rule, session/turn-result.ts). */
  readonly tally: TurnTally;
  /** Where the turn is, for the `turn_aborted` note the next turn reads. */
  phase = "before the first model request";
  /** The calls of the current response, as the model sent them. */
  lastCalls: ToolCallPart[] = [];
  /** Gives back the agent budget the request in flight holds (`reserveStep`); undefined: none. */
  releaseHold: (() => void) | undefined;
  /** The context budget's count of the request in flight (its charge when none is reported). */
  requestTokens = 0;
  /** Each call of the current response, prepared (or refused) once. */
  readonly prepared = new Map<string, PrepareOutcome>();
  /** Each settled call's one result. */
  readonly records = new Map<string, CallRecord>();
  /** The entry id of the assistant message whose calls run now (part of their idempotency keys). */
  messageEntryId = "";
  private flushing: Promise<void> | undefined;

  /** `turnId`: a cut turn continued under its own id (actors/continue-turn.ts). */
  constructor(deps: TurnDeps, turnId?: string) {
    this.turnId = turnId ?? deps.ids("turn");
    this.tally = new TurnTally(this.turnId);
    this.deps = Object.assign({}, deps, { logger: deps.logger.child({ turnId: this.turnId }) });
  }

  /** Appends an entry of this turn to the log and to the turn's tally. */
  append<T extends EntryInput>(input: T): EntryOf<T["type"]> {
    const entry = this.deps.log.append(input);
    this.tally.add(entry);
    return entry;
  }

  /** Writes queued entries once per microtask burst: calls starting together share one flush. */
  flushSoon(): Promise<void> {
    if (!this.flushing) {
      this.flushing = Promise.resolve().then(() => {
        this.flushing = undefined;
        return this.deps.log.flush();
      });
    }
    return this.flushing;
  }

  /**
   * The store refused a write of this turn: stop at once (no further model request or tool
   * call), and end `failed` with the refusal's code (invariants 13 and 15 of docs/architecture.md).
   */
  storeFailed(err: unknown): void {
    // The turn may have ended meanwhile (its finalizer reported the same refusal).
    if (this.actor.getSnapshot().status !== "active") return;
    const code = refusalCode(err);
    this.deps.logger.error({ err, code }, "the session store refused a write of the turn");
    this.actor.send({
      type: "turn.interrupt",
      reason: refusalReason(this.deps.sessionId, code, err),
      status: "failed",
      code,
    });
  }

  /** A stream irregularity the model produced: logged and shown, never fatal. */
  warn(message: string): void {
    this.deps.logger.warn(message);
    this.deps.emit({ type: "log.written", level: "warn", message });
  }

  /**
   * Session, assistant message entry and call id: stable across crash recovery (the key is stored
   * in `call_started`), and unique even when a model reuses call ids across messages (some number
   * their calls from 0 in every message), so a ledger never mistakes a new call for a replay.
   */
  idempotencyKey(callId: string): string {
    return flat(`${this.deps.sessionId}:${this.messageEntryId}:${callId}`); // kept in the log
  }

  /** The tool name of call `callId` of the current message, as prepared ("" if unknown). */
  nameOf(callId: string): string {
    const p = this.prepared.get(callId);
    return p?.ok ? p.call.name : (p?.name ?? "");
  }

  /** The model's arguments text of call `callId` of the current message ("" if unknown). */
  rawArguments(callId: string): string {
    return this.lastCalls.find((c) => c.id === callId)?.arguments ?? "";
  }

  /** A result as the loop guard reads it: the call, its tool and its failure signature. */
  observed(callId: string, name: string, result: ToolResult): ObservedResult {
    const signature = result.ok
      ? undefined
      : failureSignature(name, this.rawArguments(callId), result);
    return signature === undefined ? { callId, tool: name } : { callId, tool: name, signature };
  }

  settle(callId: string, name: string, outcome: CallOutcome, result: ToolResult): void {
    if (this.records.has(callId)) return;
    this.records.set(callId, { outcome, result });
    this.deps.log.append({ type: "call_result", callId, name, outcome, result });
    // Durable as soon as known (coalesced per tick): a crash later in the batch cannot lose it.
    // A store that cannot write ends the turn (the entries stay queued in the log, not lost).
    this.flushSoon().catch((err) => this.storeFailed(err));
    this.deps.logger.debug({ callId, tool: name, outcome }, "call settled");
    this.deps.emit({ type: "call.settled", turnId: this.turnId, callId, name, outcome, result });
  }
}

/** What a turn stopped by a refused write says (its reason), by the refusal's code. */
export function refusalReason(sessionId: string, code: TurnFailureCode, err: unknown): string {
  const why = err instanceof Error ? err.message : String(err);
  return code === "LEASE_LOST"
    ? `lease lost: another runner writes session ${sessionId} now, and the store refused this runner's write (${why}); this runner stopped and wrote nothing more. The session follows its new owner`
    : `the session store refused a write (${why}); what the turn did after its last durable write is not in the log yet (it stays queued and is written when the store takes writes again)`;
}
