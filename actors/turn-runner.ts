import type { Logger } from "pino";
import { type AnyActorRef, createActor, type InspectionEvent } from "xstate";
import type { Clock } from "../contracts/clock.ts";
import type { AgentEventBody } from "../contracts/events.ts";
import type { IdGenerator } from "../contracts/ids.ts";
import {
  type Message,
  type ToolCallPart,
  textOf,
  toolCallsOf,
  type UserPart,
} from "../contracts/messages.ts";
import { type Model, ModelError } from "../contracts/model.ts";
import type { CallOutcome, TurnFailureCode, TurnStatus } from "../contracts/status.ts";
import { notExecuted, type ToolFailure, type ToolResult } from "../contracts/tool-result.ts";
import type { TurnResult } from "../contracts/turn-result.ts";
import type { BatchCallResult, BatchOutput } from "../machines/batch.machine.ts";
import type { PollPoint } from "../machines/policies/inbox.ts";
import {
  failureSignature,
  type LoopGuardOptions,
  type LoopWarning,
  loopNote,
  type ObservedResult,
} from "../machines/policies/loop-guard.ts";
import { classifyModelError } from "../machines/policies/retry-classify.ts";
import {
  decideRetry,
  initialRetryState,
  type RetryPolicy,
  type RetryState,
  remainingWait,
} from "../machines/policies/retry-policy.ts";
import type { CallRef } from "../machines/tool-call.machine.ts";
import {
  attemptIdOf,
  type CompactionMode,
  type FinalizeParams,
  type TurnCallSpec,
  type TurnEffects,
  type TurnLimits,
  type TurnOutput,
  type turnMachine,
} from "../machines/turn.machine.ts";
import {
  createAssembler,
  type StreamAssembler,
  toAssistantParts,
} from "../providers/stream-assembler.ts";
import type { AttemptRecovery, EntryInput, EntryOf } from "../session/entries.ts";
import { flat } from "../session/flat.ts";
import type { SessionLog } from "../session/log.ts";
import { refusalCode } from "../session/store-error.ts";
import { TurnTally } from "../session/turn-result.ts";
import { truncatedCallResult } from "../tools/prepare/truncated-call.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import type { Registry } from "../tools/registry.ts";
import type { ToolSet } from "../tools/tool-set.ts";
import type { PreparedCall, PrepareOutcome, ToolContext } from "../tools/types.ts";
import { bindEffects, hostedTurnMachine } from "./charts.ts";
import { decideAll, type PermissionBroker } from "./permissions.ts";
import type { RetryBudget } from "./retry-budget.ts";
import { runTool, type ToolReport } from "./run-tool.ts";
import type { SessionContext } from "./session-context.ts";

export type { TurnResult };

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
  random: () => number;
  limits: TurnLimits;
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

interface CallRecord {
  outcome: CallOutcome;
  result: ToolResult;
}

/**
 * A tool's `ctx`. The signal and the child logger are made on first use: most tools touch
 * neither, and together they cost more than the rest of a call's bookkeeping (Node builds an
 * AbortSignal lazily, ≈ 2.5 µs; a pino child ≈ 1 µs).
 */
class CallContext implements ToolContext {
  private logger: Logger | undefined;
  constructor(
    readonly callId: string,
    private readonly ctl: AbortController,
    readonly idempotencyKey: string,
    readonly onUpdate: (progress: unknown) => void,
    private readonly makeLogger: () => Logger,
    readonly sessionId: string,
  ) {}
  get signal(): AbortSignal {
    return this.ctl.signal;
  }
  get log(): Logger {
    this.logger ??= this.makeLogger();
    return this.logger;
  }
}

// The poll points the turn reaches (constants: polled at every step and call).
const TURN_STARTED: PollPoint = { type: "turn.started" };
const SAMPLING: PollPoint = { type: "sampling" };
const CALL_STARTED: PollPoint = { type: "call.started" };
const CALL_RESULT: PollPoint = { type: "call.result" };
const BATCH_COMMITTED: PollPoint = { type: "batch.committed" };
const NATURAL_END: PollPoint = { type: "turn.natural_end" };

/** An attempt stopped before its request went out: no output. */
const NO_OUTPUT: Pick<StreamAssembler, "partial" | "hasOutput"> = {
  partial: () => ({ text: "", toolCalls: [] }),
  hasOutput: () => false,
};

/** Why an attempt's request was aborted when its operation's deadline passed (a stable `name`). */
export class OperationDeadlineError extends Error {
  override readonly name = "OperationDeadlineError";
}

/** What the batch's scheduler needs to know about a prepared call. */
const specOf = (call: PreparedCall): TurnCallSpec => ({
  callId: call.id,
  name: call.name,
  concurrencySafe: call.traits.concurrencySafe,
  cancellable: call.traits.cancellable,
  executionMode: call.traits.executionMode,
  resourceKey: call.resourceKey,
});

/**
 * Runs one turn: hosts the turn statechart and performs the effects it names.
 *
 * Lifecycle: `start(text)` appends the user message and starts the turn actor; the promise
 * resolves with the turn's output once `done` is reached (after `finalize`, which makes the
 * log durable). `interrupt(reason)` sends `turn.interrupt`. Model streams and tool executions
 * are promises run here; they report to the statecharts by events (no promise actor per call).
 */
export class TurnRun implements TurnEffects {
  readonly turnId: string;
  private readonly deps: TurnDeps;
  private actor!: ReturnType<typeof createActor<typeof turnMachine>>;
  private attemptCtl: AbortController | undefined;
  private retryState: RetryState | undefined;
  /** The entry id of the assistant message whose calls run now (part of their idempotency keys). */
  private messageEntryId = "";
  /** When the current response's first attempt started (the retry operation's start). */
  private operationStartedAt: number | undefined;
  private lastCalls: ToolCallPart[] = [];
  private prepared = new Map<string, PrepareOutcome>();
  private records = new Map<string, CallRecord>();
  private callCtl = new Map<string, AbortController>();
  private phase = "before the first model request";
  /** Whether a model request was prepared yet (the first `prepare` is the turn's start). */
  private sampled = false;
  /** Whether the poll before this request took an input (then none is read after a compaction). */
  private foundAtPrepare = false;
  private flushing: Promise<void> | undefined;
  private compactCtl: AbortController | undefined;
  /** Overflow compactions run so far (the chart counts them too; this words the reason). */
  private overflowCompactions = 0;
  /** The turn's result as the entries it appended say it (the one rule, session/turn-result.ts). */
  private readonly tally: TurnTally;
  private readonly done: Promise<TurnResult>;
  private resolveDone!: (output: TurnResult) => void;

  constructor(deps: TurnDeps) {
    this.turnId = deps.ids("turn");
    this.tally = new TurnTally(this.turnId);
    this.deps = Object.assign({}, deps, { logger: deps.logger.child({ turnId: this.turnId }) });
    this.done = new Promise((resolve) => {
      this.resolveDone = resolve;
    });
  }

  /** Starts the turn with `inputs` as the user's messages (none: continue from the log). */
  start(
    inputs: readonly { text: string; parts?: readonly UserPart[]; inboxId?: string }[],
  ): Promise<TurnResult> {
    const { log, emit } = this.deps;
    this.deps.logger.info({ inputs: inputs.length }, "turn started");
    // The tools this turn is offered, when the session has a tool set (it refreshed it just
    // before): the log's record of what the turn saw.
    const tools = (this.deps.registry as Partial<ToolSet>).snapshot?.();
    log.append(
      tools
        ? { type: "turn_start", turnId: this.turnId, tools }
        : { type: "turn_start", turnId: this.turnId },
    );
    for (const { text, parts, inboxId } of inputs) {
      log.append(
        parts
          ? { type: "user_message", text, parts: [...parts], turnId: this.turnId, inboxId }
          : { type: "user_message", text, turnId: this.turnId, inboxId },
      );
    }
    emit({
      type: "turn.started",
      turnId: this.turnId,
      input: inputs.map((i) => i.text).join("\n"),
    });
    this.actor = createActor(hostedTurnMachine(this.deps.turnMachine), {
      id: this.turnId,
      input: {
        turnId: this.turnId,
        limits: this.deps.limits,
        maxParallelToolCalls: this.deps.maxParallelToolCalls,
        stopDeadlineMs: this.deps.stopDeadlineMs,
        finalizeDeadlineMs: this.deps.finalizeDeadlineMs,
        loopFailAfter: this.deps.loopGuard ? this.deps.loopGuard.failAfter : 0,
        loopRepeats: this.deps.loopGuard ? this.deps.loopGuard.repeats : 0,
        maxOverflowRecoveries: this.deps.maxOverflowRecoveries,
      },
      clock: this.deps.clock,
      inspect: this.deps.inspect,
    });
    bindEffects(this.actor.system, this);
    this.actor.subscribe({
      complete: () => this.resolveDone(this.result(this.actor.getSnapshot().output!)),
      error: (err) => {
        this.deps.logger.error({ err }, "turn actor failed");
        this.resolveDone(
          this.result({ status: "failed", reason: `internal error: ${String(err)}` }),
        );
      },
    });
    this.actor.start();
    return this.done;
  }

  /**
   * What the turn reports: its log's account (the tally of the entries it appended), whose end
   * `ended` made agree with the chart's. Only a turn actor that crashed (a runtime bug) ends
   * without a `turn_end`; it then reports the chart's failure with what the log holds.
   */
  private result(output: TurnOutput): TurnResult {
    const logged = this.tally.result();
    if (logged) return logged;
    const r: TurnResult = {
      status: output.status,
      text: "",
      usage: { inputTokens: 0, outputTokens: 0 },
      steps: 0,
    };
    if (output.reason !== undefined) r.reason = output.reason;
    if (output.code !== undefined) r.code = output.code;
    return r;
  }

  /** Cancels the turn (`status` default `cancelled`; a runtime failure passes `failed` and its code). */
  interrupt(reason: string, status?: TurnStatus, code?: TurnFailureCode): void {
    this.actor?.send({ type: "turn.interrupt", reason, status, code });
  }

  /** The turn actor (for inspection and tests). */
  get ref(): AnyActorRef {
    return this.actor;
  }

  /** Writes queued entries once per microtask burst: calls starting together share one flush. */
  private flushSoon(): Promise<void> {
    if (!this.flushing) {
      this.flushing = Promise.resolve().then(() => {
        this.flushing = undefined;
        return this.deps.log.flush();
      });
    }
    return this.flushing;
  }

  // The effects the charts name (TurnEffects), performed for this run; `actors/charts.ts` binds them.

  recordStart(self: AnyActorRef, { callId }: CallRef): void {
    const outcome = this.prepared.get(callId);
    if (!outcome?.ok) return;
    const { call } = outcome;
    this.deps.log.append({
      type: "call_started",
      callId,
      name: call.name,
      args: call.args,
      idempotencyKey: this.idempotencyKey(callId),
      idempotent: call.traits.idempotent,
    });
    this.flushSoon().then(
      () => {
        if (self.getSnapshot().status === "active") self.send({ type: "call.recorded", callId });
      },
      // The tool must not run without its start record: end the turn; the call settles as
      // not executed when the batch cancels it.
      (err) => this.storeFailed(err),
    );
  }

  execute(self: AnyActorRef, { callId }: CallRef): void {
    this.runCall(self, callId);
  }

  abort(_self: AnyActorRef, { callId }: CallRef): void {
    this.callCtl.get(callId)?.abort(new Error("cancelled"));
  }

  stopping(_self: AnyActorRef, { callId, name }: CallRef): void {
    this.deps.emit({ type: "call.stop-requested", turnId: this.turnId, callId, name });
  }

  callSettled(_self: AnyActorRef, r: BatchCallResult): void {
    this.settle(r.callId, r.name, r.outcome, r.result);
    this.deps.poll(CALL_RESULT);
  }

  // The batch (a child of the turn) ended its round: the turn may leave `executing`, with the
  // round's results as the loop guard reads them (in the order they settled).
  roundDone(_self: AnyActorRef, { results }: BatchOutput): void {
    this.actor.send(
      this.deps.loopGuard
        ? {
            type: "batch.done",
            results: results.map((r) => this.observed(r.callId, r.name, r.result)),
          }
        : { type: "batch.done" },
    );
  }

  // Before every model request: the first is the turn's start, every later one follows a step.
  // Then the budget: over the threshold, the chart compacts before the request.
  prepare(self: AnyActorRef): void {
    this.foundAtPrepare = this.deps.poll(this.sampled ? BATCH_COMMITTED : TURN_STARTED) > 0;
    this.sampled = true;
    const { context } = this.deps;
    self.send({ type: "step.prepared", compact: context.compactDue(context.measure()) });
  }
  compact(self: AnyActorRef, { mode }: { mode: CompactionMode }): void {
    this.phase = `while compacting the history (${mode})`;
    if (mode === "overflow") this.overflowCompactions++;
    const ctl = new AbortController();
    this.compactCtl = ctl;
    void this.deps.context.compact(mode, ctl.signal).then(({ ok, reason }) => {
      if (this.compactCtl === ctl) this.compactCtl = undefined;
      if (!ok && mode === "auto") this.warn(`automatic compaction skipped: ${reason}`);
      if (self.getSnapshot().status === "active") {
        self.send({ type: "compaction.done", ok, reason });
      }
    });
  }

  abortCompaction(_self: AnyActorRef): void {
    this.compactCtl?.abort(new Error("interrupted"));
  }

  // After a compaction (it took time): read what arrived meanwhile, if the poll before found nothing.
  pollInbox(_self: AnyActorRef): void {
    this.deps.poll({ type: "step.prepared", pendingBefore: this.foundAtPrepare });
  }

  recordAttempt(self: AnyActorRef, { attempt, step }: { attempt: number; step: number }): void {
    this.phase = `while waiting for model response ${step + 1}`;
    this.deps.poll(SAMPLING);
    this.deps.retryBudget?.warm?.(this.deps.model.name);
    const { clock, emit } = this.deps;
    const attemptId = attemptIdOf(this.turnId, attempt);
    const ctl = new AbortController();
    this.attemptCtl = ctl;
    // The first attempt of a response starts its retry operation (the state is built on failure).
    if (this.retryState === undefined) this.operationStartedAt ??= clock.now();
    const recovery = this.recovery;
    this.recovery = undefined;
    this.append(
      recovery
        ? { type: "attempt_start", turnId: this.turnId, attemptId, step, recovery }
        : { type: "attempt_start", turnId: this.turnId, attemptId, step },
    );
    this.deps.logger.debug({ attemptId, step }, "attempt started");
    emit({ type: "attempt.started", turnId: this.turnId, attemptId, step });
    void this.makeDurable(self, attempt, attemptId, ctl);
  }

  /** The attempt's write-ahead: everything before its request, durable; then `attempt.recorded`. */
  private async makeDurable(
    self: AnyActorRef,
    attempt: number,
    attemptId: string,
    ctl: AbortController,
  ): Promise<void> {
    const { log } = this.deps;
    try {
      if (log.needsHistory) await log.loadHistory();
      await this.flushSoon();
    } catch (err) {
      // Refused: the turn stops (the chart aborts this attempt, which reports below).
      this.storeFailed(err);
    }
    if (ctl.signal.aborted) {
      this.failAttempt(self, attempt, attemptId, ctl.signal.reason, NO_OUTPUT, true);
      if (this.attemptCtl === ctl) this.attemptCtl = undefined;
    } else {
      self.send({ type: "attempt.recorded", attempt });
    }
  }

  startAttempt(self: AnyActorRef, { attempt }: { attempt: number; step: number }): void {
    void this.runAttempt(self, attempt);
  }

  pollAtEnd(self: AnyActorRef): void {
    this.phase = "after the model's final answer";
    self.send({ type: this.deps.poll(NATURAL_END) > 0 ? "end.steered" : "end.none" });
  }

  abortAttempt(_self: AnyActorRef): void {
    this.attemptCtl?.abort(new Error("interrupted"));
  }

  refuseCalls(_self: AnyActorRef): void {
    for (const call of this.lastCalls) {
      this.settle(
        call.id,
        call.name,
        "not_executed",
        truncatedCallResult({ id: call.id, name: call.name, argumentsText: call.arguments }),
      );
    }
  }

  checkPermissions(self: AnyActorRef): void {
    this.phase = "while waiting for permission to run tool calls";
    void this.askPermissions(self);
  }

  correctCalls(
    _self: AnyActorRef,
    { corrected }: { corrected: { callId: string; feedback: string }[] },
  ): void {
    for (const { callId, feedback } of corrected) {
      this.settle(callId, this.nameOf(callId), "not_executed", notExecuted("DENIED", feedback));
    }
  }

  declineCalls(_self: AnyActorRef, { reason }: { reason: string }): void {
    for (const c of this.lastCalls) {
      const result = notExecuted("DENIED", `${reason}; the turn was stopped`);
      this.settle(c.id, c.name, "not_executed", result);
    }
  }

  rejectInvalid(_self: AnyActorRef): void {
    this.phase = "while tool calls were running";
    for (const outcome of this.prepared.values()) {
      if (!outcome.ok) this.settle(outcome.id, outcome.name, "not_executed", outcome.error);
    }
  }

  commitBatch(self: AnyActorRef): void {
    // `batch.committed` says the results are written: it follows the flush that writes them.
    const calls = this.lastCalls.map((c) => {
      const r = this.records.get(c.id)!;
      return { callId: c.id, name: c.name, outcome: r.outcome, result: r.result };
    });
    this.flushSoon().then(
      () => {
        this.phase = "after the tool results were committed";
        this.deps.emit({ type: "batch.committed", turnId: this.turnId, calls });
        if (self.getSnapshot().status === "active") self.send({ type: "results.durable" });
      },
      (err) => this.storeFailed(err),
    );
  }

  loopWarned(_self: AnyActorRef, { warnings }: { warnings: LoopWarning[] }): void {
    const guard = this.deps.loopGuard;
    if (!guard) return;
    for (const { callId, tool, repeats } of warnings) {
      const stop = repeats >= guard.failAfter;
      // The model is told in its view, right after the results: a note, not a result rewritten.
      this.deps.log.append({
        type: "note",
        text: loopNote(tool, repeats, stop ? "stop" : "warn"),
        audience: "model",
      });
      if (!stop) {
        this.deps.emit({
          type: "loop.detected",
          turnId: this.turnId,
          tool,
          repeats,
          action: "warned",
          callId,
        });
      }
    }
  }

  loopStopped(_self: AnyActorRef, { repeats, tool }: { repeats: number; tool: string }): void {
    this.deps.logger.warn({ tool, repeats }, "loop detected; ending the turn");
    this.deps.emit({
      type: "loop.detected",
      turnId: this.turnId,
      tool,
      repeats,
      action: "stopped",
    });
  }

  retryScheduled(
    _self: AnyActorRef,
    { delayMs, attempt }: { delayMs: number; attempt: number },
  ): void {
    this.deps.emit({
      type: "retry.scheduled",
      turnId: this.turnId,
      attemptId: attemptIdOf(this.turnId, attempt),
      retry: this.retryState?.retries ?? 0,
      delayMs,
      readyAt: this.retryState?.readyAt ?? this.deps.clock.now() + delayMs,
      reason: this.lastFailure,
      mode: this.lastMode,
      fallback: this.lastFallback,
    });
  }

  cancelAcknowledged(_self: AnyActorRef, { reason }: { reason: string }): void {
    this.deps.emit({ type: "turn.cancel-acknowledged", turnId: this.turnId, reason });
  }

  executionStopped(_self: AnyActorRef): void {
    this.deps.emit({ type: "turn.execution-stopped", turnId: this.turnId });
  }

  finalize(self: AnyActorRef, params: FinalizeParams): void {
    void this.settleAndPersist(self, params);
  }

  ended(_self: AnyActorRef, output: TurnOutput): void {
    const { status, reason, code } = output;
    // The chart ended otherwise than the log's last turn_end says (the finalizer's flush was
    // refused, or its deadline passed): the log gets what the caller is told, after it. It is
    // queued, and written with the rest once the store takes writes again.
    const logged = this.tally.result();
    if (logged && (logged.status !== status || logged.code !== code || logged.reason !== reason)) {
      this.append(
        code === undefined
          ? { type: "turn_end", turnId: this.turnId, status, reason }
          : { type: "turn_end", turnId: this.turnId, status, reason, code },
      );
    }
    this.deps.logger.info({ status, reason, code }, "turn ended");
    this.deps.emit(
      code === undefined
        ? { type: "turn.ended", turnId: this.turnId, status, reason }
        : { type: "turn.ended", turnId: this.turnId, status, reason, code },
    );
  }

  /** Appends an entry of this turn to the log and to the turn's tally. */
  private append<T extends EntryInput>(input: T): EntryOf<T["type"]> {
    const entry = this.deps.log.append(input);
    this.tally.add(entry);
    return entry;
  }

  private lastFailure = "";
  private lastMode: "retry" | "continue" = "retry";
  private lastFallback: string | undefined;
  /**
   * The partial text the failed attempts of this response received, which the next request
   * asks the model to continue (Continue). Never committed on its own: it enters the log's
   * projection only as the declared prefix of the continuing attempt's committed message.
   */
  private continuation: { prefix: string; from: string } | undefined;
  /** How the next attempt follows the failed one (its `attempt_start` records it). */
  private recovery: AttemptRecovery | undefined;

  private async runAttempt(self: AnyActorRef, attempt: number): Promise<void> {
    const { log, model, registry, emit, ids, clock } = this.deps;
    const attemptId = attemptIdOf(this.turnId, attempt);
    const ctl = this.attemptCtl!;
    const deadlineTimer = this.armOperationDeadline(ctl, attemptId);
    // Continue: the request ends with the partial answer as an assistant message to extend.
    const prefix = this.continuation?.prefix;
    const messages: readonly Message[] =
      prefix === undefined
        ? log.history()
        : [...log.history(), { role: "assistant", content: [{ type: "text", text: prefix }] }];
    const previews = this.deps.wantsPreviews?.() ?? false;
    const assembler = createAssembler({
      ids,
      previews,
      previewEvery: 256,
      onPreview: previews
        ? (index, name, preview) =>
            emit({ type: "call.previewed", attemptId, index, name: name || undefined, preview })
        : undefined,
    });
    try {
      if (log.needsHistory) await log.loadHistory();
      if (ctl.signal.aborted) throw ctl.signal.reason;
      const instructions = this.deps.context.instructions();
      const stream = model.stream({
        ...(instructions === undefined ? {} : { instructions }),
        messages,
        tools: registry.modelTools(),
        signal: ctl.signal,
        attemptId,
      });
      for await (const event of stream) {
        if (ctl.signal.aborted) break;
        assembler.push(event);
        if (event.type === "text.delta")
          emit({ type: "text.streamed", attemptId, text: event.text });
      }
      if (ctl.signal.aborted) throw ctl.signal.reason;
      const message = assembler.finish();
      if (message.finishReason === undefined) {
        throw new ModelError("the model stream ended without a finish reason", {
          kind: "stream_cut",
        });
      }
      this.commitMessage(self, attempt, attemptId, message);
    } catch (error) {
      // Aborted at the operation deadline: that, not the adapter's "aborted", is the failure.
      const reason: unknown = ctl.signal.reason;
      const why = reason instanceof OperationDeadlineError ? reason : error;
      this.failAttempt(self, attempt, attemptId, why, assembler, ctl.signal.aborted);
    } finally {
      if (deadlineTimer !== undefined) clock.clearTimeout(deadlineTimer);
      if (this.attemptCtl === ctl) this.attemptCtl = undefined;
    }
  }

  /**
   * The retry policy's `operationDeadlineMs` bounds the request in flight too, not only the
   * waits: when the operation's deadline passes, the attempt's request is aborted with an
   * {@link OperationDeadlineError} (the attempt then ends the turn `budget_exhausted`). Returns
   * the clock's timer handle, or undefined without a deadline.
   */
  private armOperationDeadline(ctl: AbortController, attemptId: string): unknown {
    const ms = this.deps.retry.operationDeadlineMs;
    if (ms === undefined || this.operationStartedAt === undefined) return undefined;
    const { clock } = this.deps;
    const abort = () =>
      ctl.abort(
        new OperationDeadlineError(
          `the operation deadline (retry.operationDeadlineMs ${ms}) passed while model request ${attemptId} was in flight; the request was aborted. Raise operationDeadlineMs or try later`,
        ),
      );
    const remaining = this.operationStartedAt + ms - clock.now();
    if (remaining <= 0) {
      abort();
      return undefined;
    }
    return clock.setTimeout(abort, remaining);
  }

  private commitMessage(
    self: AnyActorRef,
    attempt: number,
    attemptId: string,
    message: ReturnType<ReturnType<typeof createAssembler>["finish"]>,
  ): void {
    const { log, registry, emit } = this.deps;
    // A continuation's answer extends the partial text it was sent: the message is both.
    const cont = this.continuation;
    this.continuation = undefined;
    const content = toAssistantParts(
      cont ? { ...message, text: cont.prefix + message.text } : message,
    );
    const text = textOf(content);
    const toolCalls = toolCallsOf(content);
    const entry = this.append({
      type: "assistant_message",
      turnId: this.turnId,
      attemptId,
      content,
      finishReason: message.finishReason!,
      usage: message.usage,
      ...(cont ? { continuation: { from: cont.from, prefixChars: cont.prefix.length } } : {}),
    });
    log.append({ type: "attempt_end", attemptId, status: "completed" });
    emit({ type: "attempt.ended", attemptId, status: "completed" });
    emit({
      type: "message.committed",
      turnId: this.turnId,
      attemptId,
      text,
      toolCalls,
      usage: message.usage,
      finishReason: message.finishReason,
    });
    this.messageEntryId = entry.id;
    this.deps.context.measured(message.usage);
    for (const problem of message.problems ?? []) this.warn(`model stream: ${problem}`);
    for (const c of message.toolCalls) {
      for (const problem of c.problems ?? []) this.warn(`model stream, call ${c.id}: ${problem}`);
    }
    this.retryState = undefined;
    this.operationStartedAt = undefined;
    this.lastCalls = toolCalls;
    this.prepared.clear();
    this.records.clear();
    const specs: TurnCallSpec[] = [];
    for (const c of message.toolCalls) {
      let outcome = prepareCall(
        { id: c.id, name: c.name, argumentsText: c.argumentsText },
        registry,
      );
      const refused = outcome.ok ? this.deps.guardCall?.(outcome.call) : undefined;
      if (refused) {
        outcome = {
          ok: false,
          id: c.id,
          name: c.name,
          argumentsText: c.argumentsText,
          error: refused,
        };
      }
      this.prepared.set(c.id, outcome);
      if (!outcome.ok) continue;
      const { call } = outcome;
      for (const warning of call.warnings) {
        emit({
          type: "log.written",
          level: "warn",
          message: `${call.name} (${call.id}): ${warning}`,
        });
      }
      specs.push(specOf(call));
      emit({ type: "call.queued", turnId: this.turnId, callId: call.id, name: call.name });
    }
    const usage = message.usage;
    const broker = this.deps.permissions;
    // The results this message's refused calls get (for length, or for failing preparation),
    // as the loop guard reads them: the chart folds whichever its path settles.
    const guard = this.deps.loopGuard;
    const invalid: ObservedResult[] = [];
    const truncated: ObservedResult[] = [];
    if (guard && toolCalls.length > 0) {
      for (const c of message.toolCalls) {
        const outcome = this.prepared.get(c.id)!;
        if (!outcome.ok) invalid.push(this.observed(c.id, c.name, outcome.error));
        if (message.finishReason === "length") {
          const result = truncatedCallResult({
            id: c.id,
            name: c.name,
            argumentsText: c.argumentsText,
          });
          truncated.push(this.observed(c.id, c.name, result));
        }
      }
    }
    self.send({
      type: "attempt.done",
      ...(invalid.length > 0 ? { invalid } : {}),
      ...(truncated.length > 0 ? { truncated } : {}),
      attempt,
      finishReason: message.finishReason!,
      callCount: toolCalls.length,
      calls: specs,
      tokens: usage ? usage.inputTokens + usage.outputTokens : 0,
      needsPermission:
        broker !== undefined &&
        specs.some((spec) => {
          const p = this.prepared.get(spec.callId);
          return p?.ok === true && broker.evaluate(p.call.name, p.call.traits.risk) !== "allow";
        }),
    });
  }

  private failAttempt(
    self: AnyActorRef,
    attempt: number,
    attemptId: string,
    error: unknown,
    assembler: Pick<StreamAssembler, "partial" | "hasOutput">,
    aborted: boolean,
  ): void {
    const { log, emit, clock } = this.deps;
    const partial = assembler.partial();
    const hasOutput = assembler.hasOutput();
    const message = error instanceof Error ? error.message : String(error);
    log.append({
      type: "attempt_end",
      attemptId,
      status: hasOutput || aborted ? "interrupted" : "failed",
      partialReasoning: partial.reasoning,
      partialText: partial.text || undefined,
      partialCalls: partial.toolCalls.length
        ? toolCallsOf(toAssistantParts({ text: "", toolCalls: partial.toolCalls }))
        : undefined,
      error: message,
    });
    emit({
      type: "attempt.ended",
      attemptId,
      status: hasOutput || aborted ? "interrupted" : "failed",
      error: message,
      ...(error instanceof ModelError ? { errorKind: error.kind } : {}),
    });
    if (aborted) {
      if (error instanceof OperationDeadlineError) {
        this.deps.logger.warn({ attemptId }, error.message);
        self.send({ type: "attempt.failed", attempt, status: "budget_exhausted", reason: message });
        return;
      }
      self.send({ type: "attempt.failed", attempt, status: "cancelled", reason: "interrupted" });
      return;
    }
    // A request too large for the window is never retried as it is: the chart compacts harder
    // and sends it again, while its overflow budget lasts (separate from maxRetries).
    if (classifyModelError(error).category === "context_overflow") {
      this.retryState = undefined;
      this.operationStartedAt = undefined;
      const { maxOverflowRecoveries } = this.deps;
      const reason =
        this.overflowCompactions >= maxOverflowRecoveries && maxOverflowRecoveries > 0
          ? `context overflow (not retried as it was): the request still exceeds the model's context window after ${this.overflowCompactions} compaction(s) for it, each keeping less, then clipping messages too large for the window (${message}); clear old tool results (session.clearToolResults), compact with a smaller keepRecentTokens, shorten the instructions or tool outputs, or use a model with a larger context window`
          : `context overflow (not retried as it was): the request exceeds the model's context window (${message}); compact the session (automatic compaction: createAgent({ context: { compactAt } }), overflowRecoveries), clear old tool results, or use a model with a larger context window`;
      this.deps.logger.warn({ attemptId, reason }, "model request overflowed the context window");
      self.send({ type: "attempt.failed", attempt, status: "failed", reason, overflow: true });
      return;
    }
    const budget = this.deps.retryBudget;
    this.retryState ??= initialRetryState(this.deps.retry, this.operationStartedAt ?? clock.now());
    const decision = decideRetry(this.retryState, {
      error,
      now: clock.now(),
      wallNow: Date.now(),
      random: this.deps.random,
      hasOutput,
      budgetAllows: budget ? () => budget.tryAcquire(this.deps.model.name) : undefined,
    });
    if (decision.action === "stop") {
      this.continuation = undefined;
      this.deps.logger.warn(
        { attemptId, reason: decision.reason },
        "model request failed; not retrying",
      );
      self.send({
        type: "attempt.failed",
        attempt,
        status: decision.status,
        reason: decision.reason,
      });
      return;
    }
    const { mode, fallback } = this.planRecovery(decision.action, attemptId, partial);
    this.deps.logger.warn(
      { attemptId, delayMs: decision.delayMs, mode, fallback },
      `model request failed; ${mode} scheduled`,
    );
    this.retryState = decision.state;
    this.lastFailure = decision.reason;
    this.lastMode = mode;
    this.lastFallback = fallback;
    // The wait is what remains of the decided ready time when the timer is armed (a Retry-After
    // is converted once, in decideRetry; time spent since, e.g. in the logger, is not added).
    self.send({
      type: "attempt.failed",
      attempt,
      retry: { delayMs: remainingWait(decision.state, clock.now()) },
      status: "failed",
      reason: decision.reason,
    });
  }

  /**
   * Continue or Retry after a failed attempt (DESIGN §3.6). The policy says `continue` when
   * output had started; that is possible only for text, and only with a model that continues a
   * partial assistant message (`capabilities.continueFromPartial`): then the next request ends
   * with all the text received so far. Otherwise it falls back to Retry, dropping the partial
   * output, and says why. A `retry` of a continuation (no new output) repeats the same request,
   * prefix included. Records the plan for the next `attempt_start`.
   */
  private planRecovery(
    action: "retry" | "continue",
    attemptId: string,
    partial: ReturnType<ReturnType<typeof createAssembler>["partial"]>,
  ): { mode: "retry" | "continue"; fallback?: string } {
    let fallback: string | undefined;
    if (action === "continue") {
      const prefix = (this.continuation?.prefix ?? "") + partial.text;
      const model = this.deps.model;
      if (partial.toolCalls.length > 0)
        fallback = "the partial output holds a tool call, which cannot be continued";
      else if (!model.capabilities?.continueFromPartial)
        fallback = `model ${model.name} cannot continue from a partial answer (capabilities.continueFromPartial is not set)`;
      else if (prefix === "") fallback = "no text was received to continue from";
      if (fallback) {
        fallback = `Continue fell back to Retry: ${fallback}; the same request is sent again and the partial output is dropped`;
        this.continuation = undefined;
      } else this.continuation = { prefix, from: attemptId };
    }
    const mode = this.continuation ? "continue" : "retry";
    this.recovery = this.continuation
      ? { mode, from: attemptId, prefixChars: this.continuation.prefix.length }
      : fallback
        ? { mode, from: attemptId, fallback }
        : { mode, from: attemptId };
    return { mode, fallback };
  }

  /**
   * Session, assistant message entry and call id: stable across crash recovery (the key is stored
   * in `call_started`), and unique even when a model reuses call ids across messages (some number
   * their calls from 0 in every message), so a ledger never mistakes a new call for a replay.
   */
  private idempotencyKey(callId: string): string {
    return flat(`${this.deps.sessionId}:${this.messageEntryId}:${callId}`); // kept in the log
  }

  /** A stream irregularity the model produced: logged and shown, never fatal. */
  private warn(message: string): void {
    this.deps.logger.warn(message);
    this.deps.emit({ type: "log.written", level: "warn", message });
  }

  private runCall(actor: AnyActorRef, callId: string): void {
    const outcome = this.prepared.get(callId);
    if (!outcome?.ok) return;
    const { call } = outcome;
    const { emit, logger } = this.deps;
    const ctl = new AbortController();
    this.callCtl.set(callId, ctl);
    let settled = false;
    emit({ type: "call.started", turnId: this.turnId, callId, name: call.name, args: call.args });
    this.deps.poll(CALL_STARTED);
    const ctx = new CallContext(
      callId,
      ctl,
      this.idempotencyKey(callId),
      (progress: unknown) => {
        if (!settled) emit({ type: "call.updated", callId, progress });
      },
      () => logger.child({ callId, tool: call.name }),
      this.deps.sessionId,
    );
    const report = (event: ToolReport) => {
      settled = true;
      this.callCtl.delete(callId);
      // After the batch ended (the call went unknown) the outcome is final: drop, but say so.
      if (actor.getSnapshot().status !== "active") {
        logger.warn({ callId, event: event.type }, "a tool reported after its call was settled");
        return;
      }
      // Object.assign, not `{ ...event, callId }`: a property after a spread is slow on Node 20.
      actor.send(Object.assign({ callId }, event));
    };
    const watched = this.deps.watchCall?.(call);
    void runTool(call.tool, call.args, ctx, {
      name: call.name,
      budget: call.traits.outputBudget,
      spill: this.deps.spill,
      repairs: call.repairs,
    }).then(
      watched
        ? (event) => {
            let checked = event;
            try {
              checked = watched(event);
            } catch (err) {
              // A watcher must not throw; if one does, the call still gets its own report.
              logger.error({ err, callId }, "a call's watcher failed");
            }
            report(checked);
          }
        : report,
    );
  }

  /**
   * Asks for every call that needs it and answers the gate with the decisions as data: the chart
   * settles the denied calls (`correctCalls`, `declineCalls`) only if the turn is still at its gate.
   */
  private async askPermissions(self: AnyActorRef): Promise<void> {
    const broker = this.deps.permissions!;
    const { emit, sessionId } = this.deps;
    const valid = this.lastCalls
      .map((c) => this.prepared.get(c.id))
      .filter((p): p is Extract<PrepareOutcome, { ok: true }> => p?.ok === true);
    // Every decision goes to the log as it arrives, with what decided it (log-only entry).
    const decisions = await decideAll(
      broker,
      valid.map((v) => v.call),
      sessionId,
      (event) => {
        if (event.type === "permission.decided") {
          this.deps.log.append({
            type: "permission_decision",
            turnId: this.turnId,
            requestId: event.requestId,
            callId: event.callId,
            tool: event.tool,
            decision: event.decision,
            source: event.source,
          });
        }
        emit(event);
      },
    );
    const declined = decisions.find((d) => d.decision.type === "declined");
    if (declined && declined.decision.type === "declined") {
      self.send({ type: "gate.declined", reason: declined.decision.reason });
      return;
    }
    const allowed: TurnCallSpec[] = [];
    const corrected: { callId: string; feedback: string }[] = [];
    for (const { call, decision } of decisions) {
      if (decision.type === "corrected")
        corrected.push({ callId: call.id, feedback: decision.feedback });
      else allowed.push(specOf(call));
    }
    // The corrections' results (`correctCalls` gives them), as the loop guard reads them.
    const observed = this.deps.loopGuard
      ? corrected.map(({ callId, feedback }) =>
          this.observed(callId, this.nameOf(callId), notExecuted("DENIED", feedback)),
        )
      : undefined;
    self.send(
      observed
        ? { type: "gate.allowed", calls: allowed, corrected, observed }
        : { type: "gate.allowed", calls: allowed, corrected },
    );
  }

  /** The tool name of call `callId` of the current message, as prepared ("" if unknown). */
  private nameOf(callId: string): string {
    const p = this.prepared.get(callId);
    return p?.ok ? p.call.name : (p?.name ?? "");
  }

  /** The model's arguments text of call `callId` of the current message ("" if unknown). */
  private rawArguments(callId: string): string {
    return this.lastCalls.find((c) => c.id === callId)?.arguments ?? "";
  }

  /** A result as the loop guard reads it: the call, its tool and its failure signature. */
  private observed(callId: string, name: string, result: ToolResult): ObservedResult {
    const signature = result.ok
      ? undefined
      : failureSignature(name, this.rawArguments(callId), result);
    return signature === undefined ? { callId, tool: name } : { callId, tool: name, signature };
  }

  private settle(callId: string, name: string, outcome: CallOutcome, result: ToolResult): void {
    if (this.records.has(callId)) return;
    this.records.set(callId, { outcome, result });
    this.deps.log.append({ type: "call_result", callId, name, outcome, result });
    // Durable as soon as known (coalesced per tick): a crash later in the batch cannot lose it.
    // A store that cannot write ends the turn (the entries stay queued in the log, not lost).
    this.flushSoon().catch((err) => this.storeFailed(err));
    this.deps.logger.debug({ callId, tool: name, outcome }, "call settled");
    this.deps.emit({ type: "call.settled", turnId: this.turnId, callId, name, outcome, result });
  }

  /**
   * The store refused a write of this turn: stop at once (no further model request or tool
   * call), and end `failed` with the refusal's code (invariant 13, 15).
   */
  private storeFailed(err: unknown): void {
    const code = refusalCode(err);
    this.deps.logger.error({ err, code }, "the session store refused a write of the turn");
    this.actor.send({
      type: "turn.interrupt",
      reason: refusalReason(this.deps.sessionId, code, err),
      status: "failed",
      code,
    });
  }

  private async settleAndPersist(self: AnyActorRef, params: FinalizeParams): Promise<void> {
    const { log } = this.deps;
    this.deps.permissions?.cancelAll("the turn ended before a reply");
    // Every call of the last response gets exactly one result, even if it never started. Only a
    // runtime bug leaves a started call here: its outcome is unknown, never "not executed".
    // A call with a start record in the log (and no result) may have run: the log decides.
    const started = new Set(log.openWork().calls.map((c) => c.callId));
    for (const call of this.lastCalls) {
      if (this.records.has(call.id)) continue;
      if (started.has(call.id)) {
        this.settle(call.id, call.name, "unknown", {
          ok: false,
          code: "OUTCOME_UNKNOWN",
          message: `the turn ended (${params.reason ?? params.status}) while this call was running; whether it ran is unknown. Check the current state before retrying.`,
          retryable: false,
        });
      } else {
        const why = `the turn ended (${params.reason ?? params.status}) before this call started`;
        this.settle(call.id, call.name, "not_executed", notExecuted("CANCELLED", why));
      }
    }
    if (params.cancelled) {
      log.append({
        type: "turn_aborted",
        turnId: this.turnId,
        where: `${this.phase} (${params.reason ?? "interrupted"})`,
      });
    }
    this.append(
      params.code === undefined
        ? { type: "turn_end", turnId: this.turnId, status: params.status, reason: params.reason }
        : {
            type: "turn_end",
            turnId: this.turnId,
            status: params.status,
            reason: params.reason,
            code: params.code,
          },
    );
    let failure: { code: TurnFailureCode; reason: string } | undefined;
    try {
      await log.flush();
    } catch (err) {
      // The end is not in the log: the turn reports that, not the end it planned (`ended`
      // writes what it reports after it).
      const code = refusalCode(err);
      failure = { code, reason: refusalReason(this.deps.sessionId, code, err) };
      this.deps.logger.error({ err, code }, "could not write the end of the turn");
    }
    self.send(failure ? { type: "finalize.done", failure } : { type: "finalize.done" });
  }
}

export type { EntryOf };

/** What a turn stopped by a refused write says (its reason), by the refusal's code. */
export function refusalReason(sessionId: string, code: TurnFailureCode, err: unknown): string {
  const why = err instanceof Error ? err.message : String(err);
  return code === "LEASE_LOST"
    ? `lease lost: another runner writes session ${sessionId} now, and the store refused this runner's write (${why}); this runner stopped and wrote nothing more. The session follows its new owner`
    : `the session store refused a write (${why}); what the turn did after its last durable write is not in the log yet (it stays queued and is written when the store takes writes again)`;
}
