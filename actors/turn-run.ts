import { type AnyActorRef, createActor } from "xstate";
import { NO_SPEND, type Spend } from "../contracts/budget.ts";
import type { UserPart } from "../contracts/messages.ts";
import type { TurnFailureCode, TurnStatus } from "../contracts/status.ts";
import { notExecuted } from "../contracts/tool-result.ts";
import type { TurnResult } from "../contracts/turn-result.ts";
import { summarySpend } from "../machines/policies/budget.ts";
import type { PollPoint } from "../machines/policies/inbox.ts";
import type {
  CompactionMode,
  FinalizeParams,
  TurnEffects,
  TurnOutput,
} from "../machines/turn.types.ts";
import { refusalCode } from "../session/store-error.ts";
import type { ToolSet } from "../tools/tool-set.ts";
import { CallRunner } from "./call-runner.ts";
import { bindEffects, hostedTurnMachine } from "./charts.ts";
import { ModelAttempts } from "./model-attempt.ts";
import { toolDigests } from "./tool-digests.ts";
import { refusalReason, type TurnDeps, TurnScope } from "./turn-scope.ts";

export type { TurnResult };

// The poll points the turn reaches (constants: polled at every step).
const TURN_STARTED: PollPoint = { type: "turn.started" };
const BATCH_COMMITTED: PollPoint = { type: "batch.committed" };
const NATURAL_END: PollPoint = { type: "turn.natural_end" };

/**
 * Runs one turn: hosts the turn statechart (machines/turn.machine.ts) and performs the effects
 * it names, through three parts over one shared `TurnScope`: `ModelAttempts` (the model's
 * requests), `CallRunner` (the tool calls) and this class (the turn's start, its steps'
 * preparation and compaction, its end). `effectsOf` below is the whole map from each effect
 * the charts declare to the part that performs it.
 *
 * Lifecycle: `start(inputs)` appends the turn's start and user messages and starts the turn
 * actor; the promise resolves with the turn's result as its log holds it once `done` is reached
 * (after `finalize`, which makes the log durable). `interrupt(reason)` sends `turn.interrupt`.
 * Model streams and tool executions are promises run by the parts; they report to the charts by
 * events (no promise actor per call).
 */
export class TurnRun {
  private readonly turn: TurnScope;
  private readonly attempts: ModelAttempts;
  private readonly calls: CallRunner;
  /** Whether a model request was prepared yet (the first `prepare` is the turn's start). */
  private sampled = false;
  /** Whether the poll before this request took an input (then none is read after a compaction). */
  private foundAtPrepare = false;
  private compactCtl: AbortController | undefined;
  private readonly done: Promise<TurnResult>;
  private resolveDone!: (output: TurnResult) => void;

  /** The turn this run continues after a crash (its `turn_start` is in the log already). */
  private readonly continued: boolean;

  /** `continueTurnId`: continue that cut turn (actors/continue-turn.ts) instead of a new one. */
  constructor(deps: TurnDeps, continueTurnId?: string) {
    this.turn = new TurnScope(deps, continueTurnId);
    this.continued = continueTurnId !== undefined;
    // Its result counts what the turn did before the crash too, as the log holds it.
    if (this.continued) for (const e of deps.log.path()) this.turn.tally.add(e);
    this.attempts = new ModelAttempts(this.turn);
    this.calls = new CallRunner(this.turn);
    this.done = new Promise((resolve) => {
      this.resolveDone = resolve;
    });
  }

  /** The turn's id (`turn_…`). */
  get turnId(): string {
    return this.turn.turnId;
  }

  /** Starts the turn with `inputs` as the user's messages (none: continue from the log). */
  start(
    inputs: readonly { text: string; parts?: readonly UserPart[]; inboxId?: string }[],
  ): Promise<TurnResult> {
    const { log, emit } = this.turn.deps;
    this.turn.deps.logger.info({ inputs: inputs.length }, "turn started");
    // The tools this turn is offered, when the session has a tool set (it refreshed it just
    // before): the log's record of what the turn saw.
    const tools = (this.turn.deps.registry as Partial<ToolSet>).snapshot?.();
    // What each tool looked like to the model, so a replay sees a changed description.
    const offered = toolDigests(this.turn.deps.registry.modelTools());
    if (!this.continued)
      log.append(
        tools
          ? { type: "turn_start", turnId: this.turn.turnId, tools, offered }
          : { type: "turn_start", turnId: this.turn.turnId, offered },
      );
    for (const { text, parts, inboxId } of inputs) {
      log.append(
        parts
          ? { type: "user_message", text, parts: [...parts], turnId: this.turn.turnId, inboxId }
          : { type: "user_message", text, turnId: this.turn.turnId, inboxId },
      );
    }
    emit({
      type: "turn.started",
      turnId: this.turn.turnId,
      input: inputs.map((i) => i.text).join("\n"),
    });
    this.turn.actor = createActor(hostedTurnMachine(this.turn.deps.turnMachine), {
      id: this.turn.turnId,
      input: {
        turnId: this.turn.turnId,
        limits: this.turn.deps.limits,
        budgets: this.turn.deps.budgets?.scopes(),
        maxParallelToolCalls: this.turn.deps.maxParallelToolCalls,
        stopDeadlineMs: this.turn.deps.stopDeadlineMs,
        finalizeDeadlineMs: this.turn.deps.finalizeDeadlineMs,
        loopFailAfter: this.turn.deps.loopGuard ? this.turn.deps.loopGuard.failAfter : 0,
        loopRepeats: this.turn.deps.loopGuard ? this.turn.deps.loopGuard.repeats : 0,
        maxOverflowRecoveries: this.turn.deps.maxOverflowRecoveries,
      },
      clock: this.turn.deps.clock,
      inspect: this.turn.deps.inspect,
    });
    bindEffects(this.turn.actor.system, this.effectsOf());
    this.turn.actor.subscribe({
      complete: () => this.resolveDone(this.result(this.turn.actor.getSnapshot().output!)),
      error: (err) => {
        this.turn.deps.logger.error({ err }, "turn actor failed");
        this.resolveDone(
          this.result({ status: "failed", reason: `internal error: ${String(err)}` }),
        );
      },
    });
    this.turn.actor.start();
    return this.done;
  }

  /**
   * What the turn reports: its log's account (the tally of the entries it appended), whose end
   * `ended` made agree with the chart's. Only a turn actor that crashed (a runtime bug) ends
   * without a `turn_end`; it then reports the chart's failure with what the log holds.
   */
  private result(output: TurnOutput): TurnResult {
    const logged = this.turn.tally.result();
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
    this.turn.actor?.send({ type: "turn.interrupt", reason, status, code });
  }

  /**
   * What the turn spent as its chart counted it (responses, usage, cost; time is the caller's),
   * once it ran; nothing if it never started.
   */
  get spent(): Spend {
    return (
      (this.turn.actor?.getSnapshot().context as { spent?: Spend } | undefined)?.spent ?? NO_SPEND
    );
  }

  /** The turn actor (for inspection and tests). */
  get ref(): AnyActorRef {
    return this.turn.actor;
  }

  // Before every model request: the first is the turn's start, every later one follows a step.
  // Then the budget: over the threshold, or over what the model takes even with results
  // offloaded and messages clipped, the chart compacts before the request.
  prepare(self: AnyActorRef, params: { attempt: number; step: number }): void {
    this.foundAtPrepare = this.turn.deps.poll(this.sampled ? BATCH_COMMITTED : TURN_STARTED) > 0;
    this.sampled = true;
    const { context } = this.turn.deps;
    if (context.compactDue(context.measure()) || !context.fitNow().fits) {
      self.send({ type: "compact.due" });
    } else this.attempts.recordAttempt(self, params);
  }

  compact(self: AnyActorRef, { mode }: { mode: CompactionMode }): void {
    this.turn.phase = `while compacting the history (${mode})`;
    const ctl = new AbortController();
    this.compactCtl = ctl;
    // The summary request carries the step's results and steering: like any model request, it
    // goes out only once they are durable (a refused write stops the turn, and asks nothing).
    const durable = this.turn.flushSoon().then(
      () => true,
      (err) => {
        this.turn.storeFailed(err); // the chart is stopping now: the report below finalizes it
        return false;
      },
    );
    // An interrupt does not wait for a flush that may never settle (a partitioned store): no
    // summary is asked for then, so nothing needs to be durable first; the finalizer's flush,
    // bounded by its deadline, ends the turn.
    const aborted = new Promise<"aborted">((resolve) => {
      if (ctl.signal.aborted) resolve("aborted");
      else ctl.signal.addEventListener("abort", () => resolve("aborted"), { once: true });
    });
    void Promise.race([durable, aborted]).then(async (written) => {
      const { ok, reason } =
        written === "aborted" || ctl.signal.aborted
          ? { ok: false, reason: "interrupted" }
          : !written
            ? { ok: false, reason: "the session store refused a write before the compaction" }
            : await this.turn.deps.context
                .compact(mode, ctl.signal)
                // A bug in the compaction must not leave the turn in `compacting` for good.
                .catch((err: unknown) => ({ ok: false, reason: `internal error: ${String(err)}` }));
      if (this.compactCtl === ctl) this.compactCtl = undefined;
      if (!ok && written === true && mode === "auto") {
        this.turn.warn(`automatic compaction skipped: ${reason}`);
      }
      const charge = this.turn.deps.context.summaries.take();
      if (charge) this.turn.deps.budgets?.charged(summarySpend(charge));
      if (self.getSnapshot().status === "active") {
        self.send(
          charge
            ? { type: "compaction.done", ok, reason, charge }
            : { type: "compaction.done", ok, reason },
        );
      }
    });
  }

  abortCompaction(_self: AnyActorRef): void {
    this.compactCtl?.abort(new Error("interrupted"));
  }

  // After a compaction (it took time): read what arrived meanwhile, if the poll before found nothing.
  pollInbox(_self: AnyActorRef): void {
    this.turn.deps.poll({ type: "step.prepared", pendingBefore: this.foundAtPrepare });
  }

  pollAtEnd(self: AnyActorRef): void {
    this.turn.phase = "after the model's final answer";
    self.send({ type: this.turn.deps.poll(NATURAL_END) > 0 ? "end.steered" : "end.none" });
  }

  cancelAcknowledged(_self: AnyActorRef, { reason }: { reason: string }): void {
    this.turn.deps.emit({ type: "turn.cancel-acknowledged", turnId: this.turn.turnId, reason });
  }

  executionStopped(_self: AnyActorRef): void {
    this.turn.deps.emit({ type: "turn.execution-stopped", turnId: this.turn.turnId });
  }

  finalize(self: AnyActorRef, params: FinalizeParams): void {
    void this.settleAndPersist(self, params);
  }

  ended(_self: AnyActorRef, output: TurnOutput): void {
    const { status, reason, code, budget } = output;
    // The chart ended otherwise than the log's last turn_end says (the finalizer's flush was
    // refused, or its deadline passed): the log gets what the caller is told, after it. It is
    // queued, and written with the rest once the store takes writes again.
    const logged = this.turn.tally.result();
    if (logged && (logged.status !== status || logged.code !== code || logged.reason !== reason)) {
      this.turn.append({
        type: "turn_end",
        turnId: this.turn.turnId,
        status,
        reason,
        ...(code !== undefined ? { code } : {}),
        ...(budget !== undefined ? { budget } : {}),
      });
    }
    this.turn.deps.logger.info({ status, reason, code, budget }, "turn ended");
    this.turn.deps.emit(
      code !== undefined
        ? { type: "turn.ended", turnId: this.turn.turnId, status, reason, code }
        : budget !== undefined
          ? { type: "turn.ended", turnId: this.turn.turnId, status, reason, budget }
          : { type: "turn.ended", turnId: this.turn.turnId, status, reason },
    );
  }

  private async settleAndPersist(self: AnyActorRef, params: FinalizeParams): Promise<void> {
    const { log } = this.turn.deps;
    this.turn.deps.permissions?.cancelAll("the turn ended before a reply");
    // Every call of the last response gets exactly one result, even if it never started. Only a
    // runtime bug leaves a started call here: its outcome is unknown, never "not executed".
    // A call with a start record in the log (and no result) may have run: the log decides.
    const started = new Set(log.openWork().calls.map((c) => c.callId));
    for (const call of this.turn.lastCalls) {
      if (this.turn.records.has(call.id)) continue;
      if (started.has(call.id)) {
        this.turn.settle(call.id, call.name, "unknown", {
          ok: false,
          code: "OUTCOME_UNKNOWN",
          message: `the turn ended (${params.reason ?? params.status}) while this call was running; whether it ran is unknown. Check the current state before retrying.`,
          retryable: false,
        });
      } else {
        const why = `the turn ended (${params.reason ?? params.status}) before this call started`;
        this.turn.settle(call.id, call.name, "not_executed", notExecuted("CANCELLED", why));
      }
    }
    if (params.cancelled) {
      log.append({
        type: "turn_aborted",
        turnId: this.turn.turnId,
        where: `${this.turn.phase} (${params.reason ?? "interrupted"})`,
      });
    }
    this.turn.append(
      params.code === undefined
        ? {
            type: "turn_end",
            turnId: this.turn.turnId,
            status: params.status,
            reason: params.reason,
            ...(params.budget ? { budget: params.budget } : {}),
          }
        : {
            type: "turn_end",
            turnId: this.turn.turnId,
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
      failure = { code, reason: refusalReason(this.turn.deps.sessionId, code, err) };
      this.turn.deps.logger.error({ err, code }, "could not write the end of the turn");
    }
    self.send(failure ? { type: "finalize.done", failure } : { type: "finalize.done" });
  }

  /**
   * Every effect the turn, batch and tool-call charts declare, and the part that performs it.
   * `actors/charts.ts` binds them by name; a test checks that no declared effect is missing.
   */
  private effectsOf(): TurnEffects {
    const { attempts: a, calls: c } = this;
    return {
      // The turn's own: its steps' preparation and compaction, its end.
      prepare: (self, p) => this.prepare(self, p),
      compact: (self, p) => this.compact(self, p),
      abortCompaction: (self) => this.abortCompaction(self),
      pollInbox: (self) => this.pollInbox(self),
      pollAtEnd: (self) => this.pollAtEnd(self),
      cancelAcknowledged: (self, p) => this.cancelAcknowledged(self, p),
      executionStopped: (self) => this.executionStopped(self),
      finalize: (self, p) => this.finalize(self, p),
      ended: (self, p) => this.ended(self, p),
      // The model's requests.
      recordAttempt: (self, p) => a.recordAttempt(self, p),
      startAttempt: (self, p) => a.startAttempt(self, p),
      abortAttempt: (self) => a.abortAttempt(self),
      retryScheduled: (self, p) => a.retryScheduled(self, p),
      // The tool calls, the gate and the round's commit.
      recordStart: (self, p) => c.recordStart(self, p),
      execute: (self, p) => c.execute(self, p),
      abort: (self, p) => c.abort(self, p),
      stopping: (self, p) => c.stopping(self, p),
      callSettled: (self, p) => c.callSettled(self, p),
      roundDone: (self, p) => c.roundDone(self, p),
      refuseCalls: (self) => c.refuseCalls(self),
      checkPermissions: (self) => c.checkPermissions(self),
      correctCalls: (self, p) => c.correctCalls(self, p),
      declineCalls: (self, p) => c.declineCalls(self, p),
      rejectInvalid: (self) => c.rejectInvalid(self),
      commitBatch: (self) => c.commitBatch(self),
      loopWarned: (self, p) => c.loopWarned(self, p),
      loopStopped: (self, p) => c.loopStopped(self, p),
    };
  }
}
