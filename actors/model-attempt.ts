import type { AnyActorRef } from "xstate";
import { type Message, textOf, toolCallsOf } from "../contracts/messages.ts";
import { ModelError } from "../contracts/model.ts";
import type { PollPoint } from "../machines/policies/inbox.ts";
import { classifyModelError } from "../machines/policies/retry-classify.ts";
import {
  decideRetry,
  initialRetryState,
  type RetryState,
  remainingWait,
} from "../machines/policies/retry-policy.ts";
import { attemptIdOf } from "../machines/turn.machine.ts";
import {
  createAssembler,
  type StreamAssembler,
  toAssistantParts,
} from "../providers/stream-assembler.ts";
import type { AttemptRecovery } from "../session/entries.ts";
import { prepareMessageCalls } from "./message-calls.ts";
import { OperationDeadlineError } from "./operation-deadline-error.ts";
import { providerKeyOf, SlotLostError, type SlotRelease } from "./provider-slots.ts";
import { chargeResponse, reserveStep } from "./turn-charge.ts";
import type { TurnScope } from "./turn-scope.ts";

const SAMPLING: PollPoint = { type: "sampling" };

/** An attempt stopped before its request went out: no output. */
const NO_OUTPUT: Pick<StreamAssembler, "partial" | "hasOutput"> = {
  partial: () => ({ text: "", toolCalls: [] }),
  hasOutput: () => false,
};

/**
 * The model attempts of one turn: each attempt's write-ahead (its start durable before its
 * request), the request's stream, the commit of the answer, and after a failure the retry
 * policy's decision and the Retry-or-Continue plan. Performs the turn chart's attempt effects
 * (`recordAttempt`, `startAttempt`, `abortAttempt`, `retryScheduled`); answers with the events
 * their TSDoc names (machines/turn.machine.ts).
 */
export class ModelAttempts {
  private attemptCtl: AbortController | undefined;
  private retryState: RetryState | undefined;
  /** When the current response's first attempt started (the retry operation's start). */
  private operationStartedAt: number | undefined;
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

  /** Ends the current attempt's wait for its write-ahead (an interrupt while it is written). */
  private stopWaiting: (() => void) | undefined;

  constructor(private readonly turn: TurnScope) {}

  recordAttempt(self: AnyActorRef, { attempt, step }: { attempt: number; step: number }): void {
    this.turn.phase = `while waiting for model response ${step + 1}`;
    this.turn.deps.poll(SAMPLING);
    // No request goes out over what the model takes (invariant 21 of docs/architecture.md).
    const { fits, reason = "the request does not fit" } = this.turn.deps.context.fitNow();
    if (!fits) return void self.send({ type: "attempt.failed", attempt, status: "failed", reason });
    const refused = reserveStep(this.turn, attempt);
    if (refused) return void self.send(refused);
    this.turn.deps.retryBudget?.warm?.(this.turn.deps.model.name);
    const { clock } = this.turn.deps;
    const attemptId = attemptIdOf(this.turn.turnId, attempt);
    const ctl = new AbortController();
    this.attemptCtl = ctl;
    // The first attempt of a response starts its retry operation (the state is built on failure).
    if (this.retryState === undefined) this.operationStartedAt ??= clock.now();
    const recovery = this.recovery;
    this.recovery = undefined;
    this.turn.append(
      recovery
        ? { type: "attempt_start", turnId: this.turn.turnId, attemptId, step, recovery }
        : { type: "attempt_start", turnId: this.turn.turnId, attemptId, step },
    );
    this.makeDurable(self, attempt, attemptId, step, ctl);
  }

  /**
   * The attempt's write-ahead: everything before its request, durable; then `attempt.started`
   * and `attempt.recorded`. An interrupt does not wait for a write that may never settle (a
   * partitioned store): no request goes out then, so nothing needs to be durable first, and the
   * finalizer's flush, bounded by its deadline, ends the turn. Callbacks, not a `Promise.race`:
   * this runs every step, and the race's promises were most of its allocation.
   */
  private makeDurable(
    self: AnyActorRef,
    attempt: number,
    attemptId: string,
    step: number,
    ctl: AbortController,
  ): void {
    const { log, emit, logger } = this.turn.deps;
    let waiting = true;
    const proceed = () => {
      if (!waiting) return;
      waiting = false;
      if (this.stopWaiting === proceed) this.stopWaiting = undefined;
      logger.debug({ attemptId, step }, "attempt started");
      emit({ type: "attempt.started", turnId: this.turn.turnId, attemptId, step });
      if (ctl.signal.aborted) {
        this.failAttempt(self, attempt, attemptId, ctl.signal.reason, NO_OUTPUT, true);
        if (this.attemptCtl === ctl) this.attemptCtl = undefined;
      } else {
        self.send({ type: "attempt.recorded", attempt });
      }
    };
    this.stopWaiting = proceed;
    (log.needsHistory
      ? log.loadHistory().then(() => this.turn.flushSoon())
      : this.turn.flushSoon()
    ).then(proceed, (err: unknown) => {
      // Refused: the turn stops (the chart aborts this attempt, and `proceed` reports that).
      this.turn.storeFailed(err);
      proceed();
    });
  }

  startAttempt(self: AnyActorRef, { attempt }: { attempt: number; step: number }): void {
    void this.runAttempt(self, attempt);
  }

  abortAttempt(_self: AnyActorRef): void {
    this.attemptCtl?.abort(new Error("interrupted"));
    // After this action, as a settled write would be: the abort is reported from outside it.
    const stop = this.stopWaiting;
    if (stop) queueMicrotask(stop);
  }

  retryScheduled(
    _self: AnyActorRef,
    { delayMs, attempt }: { delayMs: number; attempt: number },
  ): void {
    this.turn.deps.emit({
      type: "retry.scheduled",
      turnId: this.turn.turnId,
      attemptId: attemptIdOf(this.turn.turnId, attempt),
      retry: this.retryState?.retries ?? 0,
      delayMs,
      readyAt: this.retryState?.readyAt ?? this.turn.deps.clock.now() + delayMs,
      reason: this.lastFailure,
      mode: this.lastMode,
      fallback: this.lastFallback,
    });
  }

  private async runAttempt(self: AnyActorRef, attempt: number): Promise<void> {
    const { log, model, registry, emit, ids, clock } = this.turn.deps;
    const attemptId = attemptIdOf(this.turn.turnId, attempt);
    const ctl = this.attemptCtl!;
    const deadlineTimer = this.armOperationDeadline(ctl, attemptId);
    // Continue: the request ends with the partial answer as an assistant message to extend.
    const prefix = this.continuation?.prefix;
    const messages: readonly Message[] =
      prefix === undefined
        ? log.history()
        : [...log.history(), { role: "assistant", content: [{ type: "text", text: prefix }] }];
    const previews = this.turn.deps.wantsPreviews?.() ?? false;
    const assembler = createAssembler({
      ids,
      previews,
      previewEvery: 256,
      onPreview: previews
        ? (index, name, preview) =>
            emit({ type: "call.previewed", attemptId, index, name: name || undefined, preview })
        : undefined,
    });
    let release: SlotRelease | undefined;
    try {
      if (log.needsHistory) await log.loadHistory();
      if (ctl.signal.aborted) throw ctl.signal.reason;
      release = await this.takeSlot(attemptId, ctl.signal);
      // A shared slot lost while held (its lease ran out): the request ends, to be retried.
      release?.lost?.addEventListener("abort", () => ctl.abort(release?.lost?.reason));
      if (ctl.signal.aborted) throw ctl.signal.reason;
      const instructions = this.turn.deps.context.instructions();
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
      release?.(); // the stream has ended: its slot is free before the answer is committed
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
      const lost = reason instanceof SlotLostError; // a failure to retry, not a cancel
      const why = reason instanceof OperationDeadlineError || lost ? reason : error;
      this.failAttempt(self, attempt, attemptId, why, assembler, ctl.signal.aborted && !lost);
    } finally {
      release?.(); // every other way out (error, abort, deadline, idle timeout): once, here
      if (deadlineTimer !== undefined) clock.clearTimeout(deadlineTimer);
      if (this.attemptCtl === ctl) this.attemptCtl = undefined;
    }
  }

  /**
   * Takes a slot of the model's provider (`deps.slots`, docs/providers.md "Concurrency") before
   * the request is sent. A wait is visible (`attempt.queued`, then `attempt.admitted`) and runs
   * inside the attempt, so the turn's deadline, the operation deadline and an interrupt end it
   * as they end a request: the abort takes the waiter out of the queue and rejects with its
   * reason. Undefined without slots.
   */
  private async takeSlot(attemptId: string, signal: AbortSignal): Promise<SlotRelease | undefined> {
    const { slots, model, emit, clock } = this.turn.deps;
    if (!slots) return undefined;
    const provider = providerKeyOf(model);
    const limit = slots.limitOf(provider);
    if (limit === undefined) return undefined;
    const turnId = this.turn.turnId;
    let queuedAt: number | undefined;
    const phase = this.turn.phase;
    const release = await slots.acquire(provider, {
      signal,
      onQueued: (position) => {
        queuedAt = clock.now();
        this.turn.phase = `while waiting for a ${provider} slot (${limit} requests in flight at most)`;
        emit({ type: "attempt.queued", turnId, attemptId, provider, position, limit });
      },
    });
    this.turn.phase = phase;
    if (queuedAt !== undefined)
      emit({
        type: "attempt.admitted",
        turnId,
        attemptId,
        provider,
        waitedMs: clock.now() - queuedAt,
      });
    return release;
  }

  /**
   * The retry policy's `operationDeadlineMs` bounds the request in flight too, not only the
   * waits: when the operation's deadline passes, the attempt's request is aborted with an
   * {@link OperationDeadlineError} (the attempt then ends the turn `budget_exhausted`). Returns
   * the clock's timer handle, or undefined without a deadline.
   */
  private armOperationDeadline(ctl: AbortController, attemptId: string): unknown {
    const ms = this.turn.deps.retry.operationDeadlineMs;
    if (ms === undefined || this.operationStartedAt === undefined) return undefined;
    const { clock } = this.turn.deps;
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
    const { log, emit } = this.turn.deps;
    // A continuation's answer extends the partial text it was sent: the message is both.
    const cont = this.continuation;
    this.continuation = undefined;
    const content = toAssistantParts(
      cont ? { ...message, text: cont.prefix + message.text } : message,
    );
    const text = textOf(content);
    const toolCalls = toolCallsOf(content);
    const charged = chargeResponse(this.turn, message.usage, content);
    const { usage, cost } = charged;
    const estimated = charged.estimated ? { usageEstimated: true as const } : {};
    const entry = this.turn.append({
      type: "assistant_message",
      turnId: this.turn.turnId,
      attemptId,
      content,
      finishReason: message.finishReason!,
      usage,
      ...estimated,
      ...(cost !== undefined ? { cost } : {}),
      ...(cont ? { continuation: { from: cont.from, prefixChars: cont.prefix.length } } : {}),
    });
    log.append({ type: "attempt_end", attemptId, status: "completed" });
    emit({ type: "attempt.ended", attemptId, status: "completed" });
    emit({
      type: "message.committed",
      turnId: this.turn.turnId,
      attemptId,
      text,
      toolCalls,
      usage,
      ...estimated,
      ...(cost !== undefined ? { cost } : {}),
      finishReason: message.finishReason,
    });
    this.turn.messageEntryId = entry.id;
    this.turn.deps.context.measured(charged.estimated ? undefined : usage);
    for (const problem of message.problems ?? []) this.turn.warn(`model stream: ${problem}`);
    for (const c of message.toolCalls) {
      for (const problem of c.problems ?? [])
        this.turn.warn(`model stream, call ${c.id}: ${problem}`);
    }
    this.retryState = undefined;
    this.operationStartedAt = undefined;
    this.turn.lastCalls = toolCalls;
    const { specs, invalid, truncated } = prepareMessageCalls(this.turn, message, toolCalls);
    const broker = this.turn.deps.permissions;
    self.send({
      type: "attempt.done",
      ...(invalid.length > 0 ? { invalid } : {}),
      ...(truncated.length > 0 ? { truncated } : {}),
      attempt,
      finishReason: message.finishReason!,
      callCount: toolCalls.length,
      calls: specs,
      tokens: usage.inputTokens + usage.outputTokens,
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      ...(cost !== undefined ? { cost } : {}),
      needsPermission:
        broker !== undefined &&
        specs.some((spec) => {
          const p = this.turn.prepared.get(spec.callId);
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
    const { log, emit, clock } = this.turn.deps;
    const partial = assembler.partial();
    const hasOutput = assembler.hasOutput();
    this.turn.releaseHold?.(); // no response to charge: the hold is given back
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
        this.turn.deps.logger.warn({ attemptId }, error.message);
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
      const { maxOverflowRecoveries } = this.turn.deps;
      // The chart counts the turn's overflow compactions: its context is read, not copied here.
      const { overflowRecoveries } = (
        self.getSnapshot() as { context: { overflowRecoveries: number } }
      ).context;
      const reason =
        overflowRecoveries >= maxOverflowRecoveries && maxOverflowRecoveries > 0
          ? `context overflow (not retried as it was): the request still exceeds the model's context window after ${overflowRecoveries} compaction(s) for it, each keeping less, then clipping messages too large for the window (${message}); clear old tool results (session.clearToolResults), compact with a smaller keepRecentTokens, shorten the instructions or tool outputs, or use a model with a larger context window`
          : `context overflow (not retried as it was): the request exceeds the model's context window (${message}); compact the session (automatic compaction: createAgent({ context: { compactAt } }), overflowRecoveries), clear old tool results, or use a model with a larger context window`;
      this.turn.deps.logger.warn(
        { attemptId, reason },
        "model request overflowed the context window",
      );
      self.send({ type: "attempt.failed", attempt, status: "failed", reason, overflow: true });
      return;
    }
    const budget = this.turn.deps.retryBudget;
    this.retryState ??= initialRetryState(
      this.turn.deps.retry,
      this.operationStartedAt ?? clock.now(),
    );
    const decision = decideRetry(this.retryState, {
      error,
      now: clock.now(),
      wallNow: Date.now(),
      random: this.turn.deps.random,
      hasOutput,
      budgetAllows: budget ? () => budget.tryAcquire(this.turn.deps.model.name) : undefined,
    });
    if (decision.action === "stop") {
      this.continuation = undefined;
      this.turn.deps.logger.warn(
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
    this.turn.deps.logger.warn(
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
   * Continue or Retry after a failed attempt (docs/providers.md, "Retries"). The policy says `continue` when
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
      const model = this.turn.deps.model;
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
}
