import type { Logger } from "pino";
import type { AnyActorRef } from "xstate";
import { notExecuted } from "../contracts/tool-result.ts";
import type { BatchCallResult, BatchOutput } from "../machines/batch.machine.ts";
import type { PollPoint } from "../machines/policies/inbox.ts";
import { type LoopWarning, loopNote } from "../machines/policies/loop-guard.ts";
import type { CallRef } from "../machines/tool-call.machine.ts";
import type { TurnCallSpec } from "../machines/turn.types.ts";
import { truncatedCallResult } from "../tools/prepare/truncated-call.ts";
import type { PrepareOutcome, ToolContext } from "../tools/types.ts";
import { decisionEntry, persistRequest, restoreAlways } from "./durable-permissions.ts";
import { specOf } from "./message-calls.ts";
import { decideAll } from "./permissions.ts";
import { runTool, type ToolReport } from "./run-tool.ts";
import type { TurnScope } from "./turn-scope.ts";

const CALL_STARTED: PollPoint = { type: "call.started" };
const CALL_RESULT: PollPoint = { type: "call.result" };

/**
 * A tool's `ctx`. The signal and the child logger are made on first use: most tools touch
 * neither, and together they cost more than the rest of a call's bookkeeping (bench/FIGURES.md,
 * "Costs behind code choices").
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

/**
 * The tool calls of one turn: each call's write-ahead start record, its execution with its
 * `ctx`, its one result, the permission gate's questions, and the round's commit. Performs the
 * effects of the tool-call and batch charts and the turn chart's call effects (`refuseCalls`,
 * `checkPermissions`, `correctCalls`, `declineCalls`, `rejectInvalid`, `commitBatch`,
 * `loopWarned`, `loopStopped`); answers with the events their TSDoc names.
 */
export class CallRunner {
  private readonly callCtl = new Map<string, AbortController>();

  constructor(private readonly turn: TurnScope) {}

  recordStart(self: AnyActorRef, { callId }: CallRef): void {
    const outcome = this.turn.prepared.get(callId);
    if (!outcome?.ok) return;
    const { call } = outcome;
    this.turn.deps.log.append({
      type: "call_started",
      callId,
      name: call.name,
      args: call.args,
      idempotencyKey: this.turn.idempotencyKey(callId),
      idempotent: call.traits.idempotent,
    });
    this.turn.flushSoon().then(
      () => {
        if (self.getSnapshot().status === "active") self.send({ type: "call.recorded", callId });
      },
      // The tool must not run without its start record: end the turn; the call settles as
      // not executed when the batch cancels it.
      (err) => this.turn.storeFailed(err),
    );
  }

  execute(self: AnyActorRef, { callId }: CallRef): void {
    this.runCall(self, callId);
  }

  abort(_self: AnyActorRef, { callId }: CallRef): void {
    this.callCtl.get(callId)?.abort(new Error("cancelled"));
  }

  stopping(_self: AnyActorRef, { callId, name }: CallRef): void {
    this.turn.deps.emit({ type: "call.stop-requested", turnId: this.turn.turnId, callId, name });
  }

  callSettled(_self: AnyActorRef, r: BatchCallResult): void {
    this.turn.settle(r.callId, r.name, r.outcome, r.result);
    this.turn.deps.poll(CALL_RESULT);
  }

  // The batch (a child of the turn) ended its round: the turn may leave `executing`, with the
  // round's results as the loop guard reads them (in the order they settled).
  roundDone(_self: AnyActorRef, { results }: BatchOutput): void {
    this.turn.actor.send(
      this.turn.deps.loopGuard
        ? {
            type: "batch.done",
            results: results.map((r) => this.turn.observed(r.callId, r.name, r.result)),
          }
        : { type: "batch.done" },
    );
  }

  refuseCalls(_self: AnyActorRef): void {
    for (const call of this.turn.lastCalls) {
      this.turn.settle(
        call.id,
        call.name,
        "not_executed",
        truncatedCallResult({ id: call.id, name: call.name, argumentsText: call.arguments }),
      );
    }
  }

  checkPermissions(self: AnyActorRef): void {
    this.turn.phase = "while waiting for permission to run tool calls";
    void this.askPermissions(self);
  }

  correctCalls(
    _self: AnyActorRef,
    { corrected }: { corrected: { callId: string; feedback: string }[] },
  ): void {
    for (const { callId, feedback } of corrected) {
      this.turn.settle(
        callId,
        this.turn.nameOf(callId),
        "not_executed",
        notExecuted("DENIED", feedback),
      );
    }
  }

  declineCalls(_self: AnyActorRef, { reason }: { reason: string }): void {
    for (const c of this.turn.lastCalls) {
      const result = notExecuted("DENIED", `${reason}; the turn was stopped`);
      this.turn.settle(c.id, c.name, "not_executed", result);
    }
  }

  rejectInvalid(_self: AnyActorRef): void {
    this.turn.phase = "while tool calls were running";
    for (const outcome of this.turn.prepared.values()) {
      if (!outcome.ok) this.turn.settle(outcome.id, outcome.name, "not_executed", outcome.error);
    }
  }

  commitBatch(_self: AnyActorRef): void {
    // Every result of the step is in the log, in call order: said now, in the log's order (before
    // the next step's steering, attempt and the turn's end), like `call.settled`. Their
    // durability is waited for where it matters: by the next request's write-ahead, a
    // compaction, or the finalizer, whichever comes next; the chart goes on at once.
    const calls = this.turn.lastCalls.map((c) => {
      const r = this.turn.records.get(c.id)!;
      return { callId: c.id, name: c.name, outcome: r.outcome, result: r.result };
    });
    this.turn.phase = "after the tool results were committed";
    this.turn.deps.emit({ type: "batch.committed", turnId: this.turn.turnId, calls });
    this.turn.flushSoon().catch((err) => this.turn.storeFailed(err));
  }

  loopWarned(_self: AnyActorRef, { warnings }: { warnings: LoopWarning[] }): void {
    const guard = this.turn.deps.loopGuard;
    if (!guard) return;
    for (const { callId, tool, repeats } of warnings) {
      const stop = repeats >= guard.failAfter;
      // The model is told in its view, right after the results: a note, not a result rewritten.
      this.turn.deps.log.append({
        type: "note",
        text: loopNote(tool, repeats, stop ? "stop" : "warn"),
        audience: "model",
      });
      if (!stop) {
        this.turn.deps.emit({
          type: "loop.detected",
          turnId: this.turn.turnId,
          tool,
          repeats,
          action: "warned",
          callId,
        });
      }
    }
  }

  loopStopped(_self: AnyActorRef, { repeats, tool }: { repeats: number; tool: string }): void {
    this.turn.deps.logger.warn({ tool, repeats }, "loop detected; ending the turn");
    this.turn.deps.emit({
      type: "loop.detected",
      turnId: this.turn.turnId,
      tool,
      repeats,
      action: "stopped",
    });
  }

  private runCall(actor: AnyActorRef, callId: string): void {
    const outcome = this.turn.prepared.get(callId);
    if (!outcome?.ok) return;
    const { call } = outcome;
    const { emit, logger } = this.turn.deps;
    const ctl = new AbortController();
    this.callCtl.set(callId, ctl);
    let settled = false;
    emit({
      type: "call.started",
      turnId: this.turn.turnId,
      callId,
      name: call.name,
      args: call.args,
    });
    this.turn.deps.poll(CALL_STARTED);
    const ctx = new CallContext(
      callId,
      ctl,
      this.turn.idempotencyKey(callId),
      (progress: unknown) => {
        if (!settled) emit({ type: "call.updated", callId, progress });
      },
      () => logger.child({ callId, tool: call.name }),
      this.turn.deps.sessionId,
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
    const watched = this.turn.deps.watchCall?.(call);
    void runTool(call.tool, call.args, ctx, {
      name: call.name,
      budget: call.traits.outputBudget,
      spill: this.turn.deps.spill,
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
    const broker = this.turn.deps.permissions!;
    const { emit, sessionId } = this.turn.deps;
    const valid = this.turn.lastCalls
      .map((c) => this.turn.prepared.get(c.id))
      .filter((p): p is Extract<PrepareOutcome, { ok: true }> => p?.ok === true);
    await restoreAlways(broker, this.turn.deps.log).catch(() => {});
    // Every decision goes to the log as it arrives, with what decided it (log-only entry).
    const decisions = await decideAll(
      broker,
      valid.map((v) => v.call),
      sessionId,
      (event, decided) => {
        // A decision written by another process's answer is in the log already.
        if (event.type === "permission.decided" && !decided?.logged) {
          this.turn.deps.log.append(decisionEntry(this.turn.turnId, event, decided?.answerId));
        }
        emit(event);
      },
      (request) => persistRequest(this.turn.deps.log, this.turn.turnId, request),
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
    const observed = this.turn.deps.loopGuard
      ? corrected.map(({ callId, feedback }) =>
          this.turn.observed(callId, this.turn.nameOf(callId), notExecuted("DENIED", feedback)),
        )
      : undefined;
    self.send(
      observed
        ? { type: "gate.allowed", calls: allowed, corrected, observed }
        : { type: "gate.allowed", calls: allowed, corrected },
    );
  }
}
