import type { AnyActorRef, InspectionEvent, SnapshotFrom } from "xstate";
import type { TurnFailureCode, TurnStatus } from "../contracts/status.ts";
import type { PollPoint } from "../machines/policies/inbox.ts";
import type { SessionMachine } from "../machines/session.machine.ts";
import type { SessionEffects } from "../machines/session.types.ts";
import type { EntryOf, HandoffRecord } from "../session/entries.ts";
import type { ToolSet } from "../tools/tool-set.ts";
import { continueCutTurn } from "./continue-turn.ts";
import { checkHandoff } from "./session-acceptance.ts";
import type { SessionChartHost } from "./session-chart.ts";
import { restWhenQuiet, sessionEffects } from "./session-effects.ts";
import type { SessionInputs } from "./session-inputs.ts";
import type { SessionLease } from "./session-lease.ts";
import { notRun, type PromptResult } from "./session-options.ts";
import type { RunnerPort, SessionScope, TurnInputs } from "./session-scope.ts";
import { type TurnResult, TurnRun } from "./turn-run.ts";

const TURN_ENDED: PollPoint = { type: "turn.ended" };

/** The reason passed to `AbortController.abort` when the session chart interrupts a run. */
export class RunInterruptedError extends Error {
  override readonly name = "RunInterruptedError";
  constructor() {
    super("run interrupted");
  }
}

/**
 * Runs a session's turns (the first hop from `session.prompt()`: the second is `TurnRun` and
 * the turn chart, actors/turn-run.ts). It decides nothing: the session chart's work region
 * (machines/session.machine.ts) says when to prepare a turn, when to run it and whether another
 * follows; this class carries out those effects (`prepare`, `runOne`, `cleanup`, `abort`) and
 * answers each with an event carrying the inbox's runnable count.
 */
export class SessionRunner implements RunnerPort, SessionChartHost {
  private turn: TurnRun | undefined;
  /** The configured instructions were compared with the log's (once per session object). */
  private instructionsSynced = false;
  /** A handoff whose regression check has not run yet. */
  pendingHandoff: HandoffRecord | undefined;
  private controller: AbortController | undefined;
  /** The effect in flight (a preparation, a turn, a cleanup): a close awaits it. */
  private inFlight: Promise<void> | undefined;
  /** What the last chart snapshot was, for `restWhenQuiet` (its bits); idle at first. */
  private rest = 1;
  /** A turn cut by a crash that recovery left open to continue (actors/continue-turn.ts). */
  pendingContinue: string | undefined;
  /** Stops a continuation at its permission gate (a close, an interrupt). */
  private continuing: AbortController | undefined;

  constructor(
    private readonly s: SessionScope,
    private readonly inputs: SessionInputs,
  ) {}

  /** The running turn, if any. */
  get current(): TurnRun | undefined {
    return this.turn;
  }

  /** The session chart's effects, bound to this session's parts (actors/session-effects.ts). */
  chartEffects(): SessionEffects {
    const { s, inputs } = this;
    return sessionEffects({ s, inputs, runner: this, lease: s.lease as SessionLease | undefined });
  }

  /** What the session chart's actors pass to `createActor(…, { inspect })`. */
  get chartInspect(): ((event: InspectionEvent) => void) | undefined {
    return this.s.options.inspect;
  }

  /** The session's reaction to its chart's snapshots (`restWhenQuiet`). */
  chartChanged(snapshot: SnapshotFrom<SessionMachine>): void {
    this.rest = restWhenQuiet(this.s, this.rest, snapshot);
  }

  wake(): void {
    // A closed session starts nothing: its queued inputs run after it is reopened.
    if (this.s.closing) return;
    this.s.chart.wake(this.runnable());
  }

  /** What the chart counts as runnable: the inbox's next turn, or a cut turn to continue. */
  runnable(): number {
    return this.inputs.runnableCount() + (this.pendingContinue ? 1 : 0);
  }

  cancelRunning(reason: string, status?: TurnStatus, code?: TurnFailureCode): void {
    this.s.chart.interrupt();
    this.stopTurn(reason, status, code);
  }

  /** Interrupts the running turn and acceptance round, without an event to the chart (a close). */
  stopTurn(reason: string, status?: TurnStatus, code?: TurnFailureCode): void {
    this.abort();
    this.continuing?.abort(new Error(reason));
    this.turn?.interrupt(reason, status, code);
    if (this.s.acceptance?.busy) this.s.acceptance.interrupt(reason);
  }

  /** Effect `leaseLost`: the running turn ends `failed` with `LEASE_LOST`, saying why. */
  stopForLeaseLost(): void {
    this.stopTurn(this.s.lease?.lostReason ?? "lease lost", "failed", "LEASE_LOST");
  }

  /** Resolves when the current execution has finished. */
  awaitSettlement(): Promise<void> {
    return this.s.chart.awaitSettlement();
  }

  /**
   * Resolves when no turn runs and none is about to start. An input already called
   * (`followUp()`, `steer()`, `prompt()`, awaited or not) is pending work: its turn runs first.
   */
  async awaitIdle(): Promise<void> {
    await this.inputs.submitted();
    await this.s.chart.awaitIdle();
    // A turn that ended may have been followed by an input called meanwhile.
    if (this.inputs.unacknowledged) return this.awaitIdle();
  }

  /** Resolves when the effect in flight (and any it chains to) has settled (a close). */
  async settled(): Promise<void> {
    while (this.inFlight) await this.inFlight;
  }

  /** Effect `abortRun`: signals the current execution's AbortSignal. */
  abort(): void {
    this.controller?.abort(new RunInterruptedError());
  }

  /**
   * Effect `prepareTurn`: what a turn needs before it can start (the session's open, its
   * dependencies and the session budget's spend, its instructions, a handoff's check), then `turn.ready` with the inbox's runnable count.
   */
  prepare(self: AnyActorRef, execution: number): void {
    const controller = new AbortController();
    this.controller = controller;
    this.track(async () => {
      let runnable = 0;
      try {
        runnable = await this.prepared(controller.signal);
      } catch (err) {
        this.cannotStart(err);
      }
      self.send({ type: "turn.ready", execution, runnable });
    });
  }

  private async prepared(signal: AbortSignal): Promise<number> {
    await this.s.ready;
    await this.s.deps.budgets?.load();
    this.syncInstructions();
    const handoff = this.pendingHandoff;
    if (handoff && !signal.aborted) {
      this.pendingHandoff = undefined;
      await checkHandoff(this.s, handoff);
    }
    return signal.aborted ? 0 : this.runnable();
  }

  /**
   * Effect `runTurn`: takes one turn's inputs (the `idle` point of the inbox policy), runs the
   * turn, runs the acceptance round, and answers the prompts it consumed; then `turn.done`.
   */
  runOne(self: AnyActorRef, execution: number): void {
    this.track(async () => {
      try {
        await this.runInputs();
        self.send({ type: "turn.done", execution });
      } catch (err) {
        self.send({ type: "turn.failed", execution, error: String(err) });
      }
    });
  }

  private async runInputs(): Promise<void> {
    // A turn a crash cut goes on first, with no new input (docs/crashes.md).
    if (this.pendingContinue) return this.continueCut(this.pendingContinue);
    const { events, consumedSeq } = this.inputs.takeTurn();
    // A prompt's budget spans its turn and every acceptance round after it.
    this.s.deps.budgets?.promptStarted();
    let output: PromptResult = await this.runTurn(
      events.map((e) => ({ text: e.body, parts: e.parts, inboxId: e.id })),
    );
    // A turn the runtime failed (the store refused it) has no acceptance round: its checks'
    // evidence could not be written either.
    if (this.s.acceptance && output.code === undefined) {
      output = await this.s.acceptance.afterTurn(output);
    }
    this.inputs.poll(TURN_ENDED); // interrupts that arrived during the turn are recorded now
    // Lost to another runner before the inputs' consumption was durable: the new owner runs
    // them, and their prompts wait for its answer.
    const rerun =
      output.code === "LEASE_LOST" && this.s.follower && consumedSeq > this.s.log.durableSeq;
    for (const event of events) {
      const resolve = this.inputs.takeWaiter(event.id);
      if (resolve && rerun) this.s.lease!.forward(event.id, resolve);
      else resolve?.(output);
    }
    this.s.deps.budgets?.promptEnded();
  }

  /** Effect `startCleanup`: flushes the log, then `cleanup.done` with the runnable count. */
  cleanup(self: AnyActorRef, execution: number): void {
    this.controller = undefined;
    this.track(async () => {
      let error: string | undefined;
      if (this.s.awake) await this.s.log.flush().catch((err) => (error = String(err)));
      self.send({ type: "cleanup.done", execution, runnable: this.runnable(), error });
    });
  }

  /**
   * Runs an effect's work after the chart's transition (never inside it: what it starts, a turn
   * actor, an event to the chart, belongs to the next step), remembered until it settles.
   */
  private track(run: () => Promise<void>): void {
    const done: Promise<void> = Promise.resolve()
      .then(run)
      .finally(() => {
        if (this.inFlight === done) this.inFlight = undefined;
      });
    this.inFlight = done;
  }

  /** An explicit change of the instructions wins over the configured text. */
  instructionsSet(): void {
    this.instructionsSynced = true;
  }

  /** Appends a `settings` entry with `text` as the instructions (other settings kept). */
  recordInstructions(text: string): EntryOf<"settings"> {
    const { log } = this.s;
    return log.append({ type: "settings", settings: { ...log.settings(), instructions: text } });
  }

  /** Runs one turn; `continueTurnId`: continue that cut turn under its id, with no new input. */
  async runTurn(
    inputs: TurnInputs,
    cancelled?: () => boolean,
    continueTurnId?: string,
  ): Promise<TurnResult> {
    // A session's tool set changes between turns only (an MCP server's list change, a
    // reconnection): never under a running turn.
    const set = this.s.deps.registry as Partial<ToolSet>;
    if (set.refresh) await set.refresh();
    if (cancelled?.()) return notRun("cancelled", "interrupted before the turn started");
    const turn = new TurnRun(this.s.deps, continueTurnId);
    this.turn = turn;
    const { budgets, clock } = this.s.deps;
    const startedAt = clock.now();
    try {
      return await turn.start(inputs);
    } catch (err) {
      // A bug, not a turn outcome: still answer every prompt waiting on this turn.
      this.s.options.logger().error({ err }, "a turn could not run");
      return notRun("failed", `internal error: ${String(err)}`);
    } finally {
      this.turn = undefined;
      // What it spent counts against its prompt, its session and its agent.
      budgets?.turnEnded({ ...turn.spent, timeMs: Math.max(0, clock.now() - startedAt) });
    }
  }

  /** A takeover's recovery left `turnId` open (undefined: none): the next execution continues it. */
  continueAfterTakeover(turnId: string | undefined): void {
    this.pendingContinue = turnId;
  }

  /**
   * Continues the turn a crash cut (recovery left it open), then answers the prompts that wait
   * on it and lets the inputs queued behind it run: the crash, not the user, stopped them
   * (unless a close or an interrupt cut the continuation too).
   */
  private async continueCut(turnId: string): Promise<void> {
    this.pendingContinue = undefined;
    const ctl = new AbortController();
    this.continuing = ctl;
    let output: PromptResult;
    try {
      output = await continueCutTurn(this.s.deps, turnId, ctl.signal, () =>
        this.runTurn([], undefined, turnId),
      );
    } finally {
      this.continuing = undefined;
    }
    await this.s.log.loadHistory().catch(() => {});
    for (const e of this.s.log.path()) {
      if (e.type === "user_message" && e.turnId === turnId && e.inboxId !== undefined)
        this.inputs.takeWaiter(e.inboxId)?.(output);
    }
    // A close or an interrupt that cut the continuation keeps the queue as it holds it; else the
    // inputs queued behind the cut turn are runnable (the chart's cleanup counts them).
    if (output.status !== "cancelled" && this.s.closing === undefined) this.inputs.release();
  }

  /**
   * A turn could not be prepared (the store would not give the log's history, a dependency
   * threw): the queued inputs are held, not retried in a loop, and every prompt waiting is
   * answered `failed` with the reason. The next input or `resume()` tries again.
   */
  private cannotStart(err: unknown): void {
    const reason = `the turn could not start: ${err instanceof Error ? err.message : String(err)}`;
    this.s.options.logger().error({ err }, reason);
    this.s.emit({ type: "log.written", level: "warn", message: reason });
    this.inputs.holdAll();
    this.inputs.answerAll(() => notRun("failed", reason));
  }

  /**
   * Once per session object, before its first turn: records the configured instructions when
   * they differ from those in force on the branch (a new session, or new instructions). Later
   * turns leave them: a rollback or fork keeps the instructions of the point it moved to. An
   * embedder's function that throws is said (a warning) and the instructions in force stay.
   */
  private syncInstructions(): void {
    if (this.instructionsSynced) return;
    this.instructionsSynced = true;
    const configured = this.s.options.instructions;
    if (configured === undefined) return;
    try {
      // The function takes the Session (typed `never` in SessionOptions: see there).
      const text =
        typeof configured === "function"
          ? (configured as (session: object) => unknown)(this.s.session)
          : configured;
      if (typeof text !== "string") {
        throw new TypeError(
          `instructions: the function must return a string, got ${typeof text} (session ${this.s.id})`,
        );
      }
      if (text !== this.s.log.settings().instructions) this.recordInstructions(text);
    } catch (err) {
      const message = `instructions not updated: ${err instanceof Error ? err.message : String(err)}`;
      this.s.options.logger().warn({ err }, message);
      this.s.emit({ type: "log.written", level: "warn", message });
    }
  }
}
