import type { TurnFailureCode, TurnStatus } from "../contracts/status.ts";
import type { PollPoint } from "../machines/policies/inbox.ts";
import type { EntryOf, HandoffRecord } from "../session/entries.ts";
import type { ToolSet } from "../tools/tool-set.ts";
import { continueCutTurn } from "./continue-turn.ts";
import { type Coordinator, createCoordinator } from "./coordinator.ts";
import { checkHandoff } from "./session-acceptance.ts";
import type { SessionInputs } from "./session-inputs.ts";
import { notRun, type PromptResult } from "./session-options.ts";
import type { RunnerPort, SessionScope, TurnInputs } from "./session-scope.ts";
import { type TurnResult, TurnRun } from "./turn-run.ts";

const TURN_ENDED: PollPoint = { type: "turn.ended" };

/**
 * The loop that runs a session's turns, one at a time (the first hop from `session.prompt()`:
 * the second is `TurnRun` and the turn chart, actors/turn-run.ts). The coordinator chart
 * (machines/coordinator.machine.ts, hosted by actors/coordinator.ts) decides when a run starts
 * and whether a successor follows; a run (`run`) takes the inputs the inbox policy names at the
 * idle point, runs one turn for them, gives the prompts waiting on them the turn's result, and
 * goes on while runnable inputs are queued.
 */
export class SessionRunner implements RunnerPort {
  private coordinatorRef: Coordinator | undefined;
  private turn: TurnRun | undefined;
  /** The configured instructions were compared with the log's (once per session object). */
  private instructionsSynced = false;
  /** A handoff whose regression check has not run yet. */
  pendingHandoff: HandoffRecord | undefined;
  /** A turn cut by a crash that recovery left open to continue (actors/continue-turn.ts). */
  pendingContinue: string | undefined;
  /** Stops a continuation at its permission gate (a close, an interrupt). */
  private continuing: AbortController | undefined;
  /** Set by `stop()` (a close): no coordinator is made again, no turn starts. */
  private stopped = false;
  /**
   * An edit of the log between turns that must not have a turn start under it (a redaction):
   * the loop waits for it before it takes a turn's inputs. Set by `exclusive`.
   */
  private editing: Promise<unknown> | undefined;

  constructor(
    private readonly s: SessionScope,
    private readonly inputs: SessionInputs,
  ) {}

  /** The running turn, if any. */
  get current(): TurnRun | undefined {
    return this.turn;
  }

  /** No execution runs or is about to start, and no edit of the log is in progress. */
  get resting(): boolean {
    return (
      this.coordinatorRef === undefined && this.turn === undefined && this.editing === undefined
    );
  }

  wake(): void {
    // A closed session starts nothing: its queued inputs run after it is reopened.
    if (this.stopped) return;
    this.coordinator.wake();
  }

  cancelRunning(reason: string, status?: TurnStatus, code?: TurnFailureCode): void {
    this.continuing?.abort(new Error(reason));
    this.coordinatorRef?.interrupt();
    this.turn?.interrupt(reason, status, code);
    if (this.s.acceptance?.busy) this.s.acceptance.interrupt(reason);
  }

  /** Resolves when the current execution has finished. */
  awaitSettlement(): Promise<void> {
    return this.coordinatorRef?.awaitSettlement() ?? Promise.resolve();
  }

  /**
   * Resolves when no turn runs and none is about to start. An input already called
   * (`followUp()`, `steer()`, `prompt()`, awaited or not) is pending work: its turn runs first.
   */
  async awaitIdle(): Promise<void> {
    await this.inputs.submitted();
    await this.coordinatorRef?.awaitIdle();
    // A turn that ended may have been followed by an input called meanwhile.
    if (this.inputs.unacknowledged) return this.awaitIdle();
  }

  /** Stops the coordinator (a close, once the current execution settled). */
  stop(): void {
    this.stopped = true;
    this.coordinatorRef?.stop();
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
    while (this.editing) await this.editing; // a redaction begun while the set refreshed
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

  /**
   * The session's runner host, created at an input and let go once it is idle again (an idle
   * session holds no actor): a coordinator at rest has nothing to remember, its next execution
   * starts from the inputs in the log.
   */
  private get coordinator(): Coordinator {
    if (this.coordinatorRef) return this.coordinatorRef;
    const ref = createCoordinator({
      run: (signal) => this.run(signal),
      cleanup: () => this.s.log.flush().catch(() => {}),
      pending: () => this.inputs.hasRunnable(),
      inspect: this.s.options.inspect,
      // Not stopped inside its own transition: a wake in the same tick keeps it.
      onStateChange: (state) => {
        if (state.value === "idle") queueMicrotask(() => this.letGo(ref));
      },
    });
    this.coordinatorRef = ref;
    return ref;
  }

  /** Stops `ref` if it is still this session's coordinator and idle (no waiter is left then). */
  private letGo(ref: Coordinator): void {
    if (this.coordinatorRef !== ref || ref.state().value !== "idle") return;
    this.coordinatorRef = undefined;
    ref.stop();
    // Idle: what the log can read back from the store leaves memory until it is needed.
    this.s.log.rest();
    this.s.options.rested?.();
  }

  /**
   * One execution of the coordinator: run turns while runnable inputs are queued. The loop a
   * reader looks for: inputs in, one turn, results out.
   */
  private async run(signal: AbortSignal): Promise<void> {
    await this.s.ready;
    try {
      // What a turn needs before it can start: its dependencies (built at the first read) and
      // the session budget's spend, read from the log.
      await this.s.deps.budgets?.load();
    } catch (err) {
      this.cannotStart(err);
      return;
    }
    this.syncInstructions();
    const handoff = this.pendingHandoff;
    if (handoff && !signal.aborted) {
      this.pendingHandoff = undefined;
      await checkHandoff(this.s, handoff);
    }
    if (this.pendingContinue && !signal.aborted) await this.continueCut(this.pendingContinue);
    while (!signal.aborted && this.inputs.hasRunnable()) {
      while (this.editing) await this.editing;
      if (signal.aborted || !this.inputs.hasRunnable()) break;
      const { events, consumedSeq } = this.inputs.takeTurn();
      if (events.length === 0) break; // the policy reads no input lane between turns
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
  }

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
    // A close or an interrupt that cut the continuation keeps the queue as it holds it.
    if (output.status !== "cancelled" && !this.stopped && this.s.closing === undefined)
      this.inputs.resume();
  }

  /**
   * Runs `edit` (checked by the caller to start with no turn open) with no turn starting until
   * it settles: an input that arrives meanwhile waits in the inbox, then runs.
   */
  async exclusive<T>(edit: () => Promise<T>): Promise<T> {
    const done = edit();
    const settled = done.then(
      () => {},
      () => {},
    );
    this.editing = settled;
    try {
      return await done;
    } finally {
      if (this.editing === settled) this.editing = undefined;
    }
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
