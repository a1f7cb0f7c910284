import type { AcceptanceReport } from "../contracts/acceptance.ts";
import type { ChatMessage } from "../contracts/chat.ts";
import type { AgentEvent } from "../contracts/events.ts";
import type { Message } from "../contracts/messages.ts";
import type { PermissionReply, PermissionRequest } from "../contracts/permission.ts";
import type { Refusal } from "../contracts/refusal.ts";
import type { InboxLane } from "../contracts/status.ts";
import type { InboxEvent } from "../machines/policies/inbox.ts";
import {
  type BranchOptions,
  type BranchResult,
  exportJsonl,
  fork,
  rollback,
  switchLeaf,
} from "../session/branches.ts";
import type { CompactionResult } from "../session/compaction.ts";
import type { ContextUsage } from "../session/context-budget.ts";
import type { EntryOf, HandoffRecord, LogEntry } from "../session/entries.ts";
import type { SessionLog } from "../session/log.ts";
import type { AcceptanceSpec } from "./acceptance-spec.ts";
import type { HandoffOptions } from "./handoff.ts";
import { type RedactOptions, type RedactResult, redactSession } from "./redact-session.ts";
import { acceptanceOff, type SessionAcceptance } from "./session-acceptance.ts";
import { adoptLog, openSessionLog, rewireLog, sleepWhenQuiet } from "./session-adopt.ts";
import { SessionChart } from "./session-chart.ts";
import {
  changeInstructions,
  checkClearOptions,
  clearResults,
  compactNow,
  moveBranch,
} from "./session-edits.ts";
import { closeThroughChart } from "./session-effects.ts";
import { SessionInputs } from "./session-inputs.ts";
import { SessionLease } from "./session-lease.ts";
import type { InboxOptions, PromptResult, SessionOptions, SessionRole } from "./session-options.ts";
import { pendingPermissions, replyPermission } from "./session-permissions.ts";
import { SessionRunner } from "./session-runner.ts";
import { SessionScope } from "./session-scope.ts";
import type { TurnRun } from "./turn-run.ts";
import type { UserInput } from "./user-input.ts";

/**
 * One conversation: its log, its inbox and the runner that runs one turn at a time. This class
 * is the session's public face; each member hands its work to the part that holds it:
 * `SessionInputs` (the inbox, owned by the log: actors/session-inputs.ts), `SessionRunner` (the
 * loop that runs turns: actors/session-runner.ts), `SessionLease` (owner and follower across
 * processes: actors/session-lease.ts) and `SessionAcceptance` (actors/session-acceptance.ts);
 * history edits between turns are in actors/session-edits.ts, taking a log as the session's
 * state in actors/session-adopt.ts.
 *
 * Inputs are inbox events (docs/architecture.md), persisted before they are acknowledged:
 * - `prompt` / `followUp` go to the `next-turn` lane: each starts a turn when no turn is
 *   running, else waits for the current turn to end (a prompt resolves when ITS turn ends);
 * - `steer` goes to `next-step`: read after the current batch commits, before the next model
 *   call, or at a natural end (it then continues the turn); with no turn running it starts one;
 * - `interrupt` goes to the `interrupt` lane and cancels the current turn at once; it is
 *   recorded as consumed when that turn has ended (or at once when none runs). Inputs queued
 *   before the interrupt stay queued (never dropped: `queued()` shows them) but do not start by
 *   themselves; the next input, `resume()`, or `clearQueue()` decides. An input submitted after
 *   the interrupt runs.
 *
 * The inbox is polled at every point of a turn and between turns; which lanes are read where
 * is `lanesToDrain` (machines/policies/inbox.ts), through `pollInbox`.
 */
export class Session {
  readonly id: string;
  /** Resolves once the log is loaded from the store. */
  readonly ready: Promise<void>;
  private readonly s: SessionScope;
  private readonly inputs: SessionInputs;
  private readonly runner: SessionRunner;
  private readonly lease: SessionLease | undefined;
  /** The session's acceptance, when the agent has an acceptance spec (made by `adopt`). */
  private acceptancePart: SessionAcceptance | undefined;

  /** @internal Sessions are opened by `agent.session(id)`. */
  constructor(options: SessionOptions) {
    this.id = options.sessionId;
    const s = new SessionScope(options);
    this.s = s;
    s.session = this;
    s.adopt = (log) => this.adopt(log);
    const inputs = new SessionInputs(s);
    const runner = new SessionRunner(s, inputs);
    const lease = options.lease ? new SessionLease(s, options.lease) : undefined;
    this.inputs = inputs;
    this.runner = runner;
    this.lease = lease;
    s.inputs = inputs;
    s.runner = runner;
    s.lease = lease;
    s.slot.rewire = (log) => rewireLog(s, inputs, lease, log);
    const chart = new SessionChart(runner);
    s.chart = chart;
    chart.start();
    this.ready = openSessionLog(s, runner, inputs, lease);
    s.ready = this.ready;
    // Observed here so a failed open is not an unhandled rejection; callers still see it.
    this.ready.catch((err) => chart.send({ type: "open.failed", error: String(err) }));
  }

  /** Takes `log` as the session's state: at open, and when a follower takes over. */
  private adopt(log: SessionLog): Promise<void> {
    return adoptLog(this.s, this.inputs, this.lease, log, (part) => {
      this.acceptancePart = part;
    });
  }

  /** @internal Lets the log go if the session is quiet (actors/session-adopt.ts, `sleepWhenQuiet`). */
  sleep(): Promise<boolean> {
    return sleepWhenQuiet(this.s, this.inputs);
  }

  /** @internal Whether the session sleeps now: its log is let go until its next read or input. */
  get asleep(): boolean {
    return this.s.opened && !this.s.awake;
  }

  /** Whether `close()` was called: a closed session accepts no input (reopen it by id). */
  get closed(): boolean {
    return this.s.closing !== undefined;
  }

  /** This session's role across processes: `solo`, `owner`, `follower` or `closed` (see `SessionRole`). */
  get role(): SessionRole {
    return this.s.role;
  }

  /** Whether a turn runs or runnable inputs are queued. */
  get busy(): boolean {
    return this.runner.current !== undefined || this.inputs.hasRunnable();
  }

  /**
   * Reads the inputs other processes posted for this session now (the owner moves them into
   * its log and rings its runner) and resolves once that is done.
   */
  async syncInputs(): Promise<void> {
    await this.ready;
    await this.lease?.syncInputs();
  }

  /**
   * Gives the lease up (workers do when a session is idle); `pending` work left in the log is
   * recorded so a worker takes it. The session then follows. Resolves false when it held none.
   */
  async release(): Promise<boolean> {
    await this.ready;
    return (await this.lease?.release()) ?? false;
  }

  /**
   * Submits a prompt (text, or text and image parts); resolves when the turn that consumes it
   * ends, with that turn's result as the log holds it. Throws a `TypeError` before anything is
   * queued or sent when the input is malformed, or has an image and the model does not take
   * images (`Model.input.images`), or an image URL the model does not take
   * (`Model.input.checkImageUrl`).
   */
  prompt(input: UserInput, options: InboxOptions = {}): Promise<PromptResult> {
    return this.inputs.prompt(input, options);
  }

  /** Queues a follow-up: read when the current turn would otherwise end; starts the next turn. */
  async followUp(input: UserInput, options: InboxOptions = {}): Promise<string> {
    return this.inputs.submit("followUp", "next-turn", input, options);
  }

  /**
   * Queues steering (text or parts, checked like `prompt`'s): read at the next safe point of
   * the running turn (or starts one).
   */
  async steer(input: UserInput, options: InboxOptions = {}): Promise<string> {
    return this.inputs.submit("steer", "next-step", input, options);
  }

  /**
   * Cancels the running turn (if any) at once; queued inputs stay queued. The interrupt is an
   * inbox event (lane `interrupt`, body `reason`), written to the log before the turn is
   * cancelled and recorded as consumed once that turn has ended (at once when none runs).
   * Resolves to its inbox id once the entry is durable. A repeated `id` changes nothing.
   */
  interrupt(reason = "interrupted by the user", options: InboxOptions = {}): Promise<string> {
    return this.inputs.interrupt(reason, options);
  }

  /** Starts turns for inputs left queued by an interrupt or a restart. */
  resume(): void {
    this.inputs.resume();
  }

  /**
   * Answers a permission request (and, as the reply says, the other pending ones of this session:
   * docs/permissions.md), from any process on the session: the owner applies it at once, a
   * follower posts it to the owner through the store (actors/session-permissions.ts). Resolves
   * once the decision is durable. The first answer wins; refused `UNKNOWN_REQUEST` (no such
   * request), `ALREADY_DECIDED` (an earlier answer, the deadline or the turn's end decided it) or
   * `ANSWER_PENDING` (a follower's answer no owner applied within a minute: it stays posted).
   */
  replyPermission(
    requestId: string,
    reply: PermissionReply,
  ): Promise<{ ok: true } | Refusal<"UNKNOWN_REQUEST" | "ALREADY_DECIDED" | "ANSWER_PENDING">> {
    return replyPermission(this.s, requestId, reply);
  }

  /** Permission requests waiting for an answer, read from the session's log (any process). */
  pendingPermissions(): Promise<PermissionRequest[]> {
    return pendingPermissions(this.s);
  }

  /** The queued, not yet consumed inputs. */
  queued(lane?: InboxLane): readonly InboxEvent[] {
    return this.s.awake ? this.inputs.queued(lane) : []; // one that sleeps has an empty inbox
  }

  /** Removes queued inputs (of one lane, or all); their prompts resolve as cancelled. */
  clearQueue(lane?: InboxLane): InboxEvent[] {
    return this.inputs.clearQueue(lane);
  }

  /** Calls `listener` with every event of this session; returns the unsubscribe function. */
  subscribe(listener: (event: AgentEvent) => void): () => void {
    this.s.listeners.add(listener);
    return () => this.s.listeners.delete(listener);
  }

  /** The model's view of the active branch (OpenAI Chat Completions shape; reasoning left out). */
  messages(): readonly ChatMessage[] {
    return this.s.openLog("messages").messages();
  }

  /**
   * The model's view of the active branch as neutral messages (contracts/messages.ts):
   * reasoning with its provider metadata, images, tool calls and results as parts. Live and
   * owned by the log: do not mutate; `slice()` it to keep a snapshot.
   */
  history(): readonly Message[] {
    return this.s.openLog("history").history();
  }

  /** Every entry of the log, all branches, in `seq` order. */
  entries(): readonly LogEntry[] {
    return this.s.openLog("entries").entries();
  }

  /** The whole log as JSON Lines. */
  exportJsonl(): string {
    return exportJsonl(this.s.openLog("exportJsonl"));
  }

  /** Moves the active leaf back to `entryId` (the work tree does not roll back; the log says so). */
  rollback(entryId: string | null, options?: BranchOptions): Promise<BranchResult> {
    return this.branch(() => rollback(this.s.log, entryId, options));
  }

  /** Starts a new branch from `entryId`; the old branch stays in the log. */
  fork(entryId: string | null, options?: BranchOptions): Promise<BranchResult> {
    return this.branch(() => fork(this.s.log, entryId, options));
  }

  /** Makes `entryId` (another branch's tip) the active leaf. */
  switchLeaf(entryId: string | null, options?: BranchOptions): Promise<BranchResult> {
    return this.branch(() => switchLeaf(this.s.log, entryId, options));
  }

  /**
   * Replaces older history by a summary written by the session's model (docs/long-sessions.md):
   * cut only at legal points, the summary is a candidate until validated, a failure keeps the
   * old baseline. Refused with `TURN_OPEN` while a turn runs; every refusal is a
   * {@link CompactionResult} with `ok: false`, a `code` and a `message`.
   */
  async compact(
    options: { keepRecentTokens?: number; signal?: AbortSignal } = {},
  ): Promise<CompactionResult> {
    await this.ready;
    return this.s.slot.edit(() => compactNow(this.s, options));
  }

  /**
   * The context budget of the next model request: `used` tokens (the last provider usage plus
   * an estimate of what was appended since when `trusted`, else an estimate of the whole
   * request), the model's `window` (Infinity: unknown) and the output `reserve`. Cheap: it reads
   * only what changed since it was last measured. `context.measured` events report changes.
   */
  contextUsage(): ContextUsage {
    if (!this.s.deps) {
      const { model } = this.s.options;
      return {
        used: 0,
        window: model.contextWindow ?? Number.POSITIVE_INFINITY,
        reserve: model.maxOutputTokens ?? 0,
        trusted: false,
      };
    }
    return this.s.deps.context.measure();
  }

  /** The instructions in force on the active branch (undefined: none). */
  instructions(): string | undefined {
    return this.s.deps?.context.instructions();
  }

  /**
   * Changes the instructions from the next request on, as a `settings` entry: a rollback or
   * fork to an earlier point restores the instructions in force there. Refused with
   * `TURN_OPEN` while a turn runs.
   */
  async setInstructions(
    text: string,
  ): Promise<{ ok: true; entry: EntryOf<"settings"> } | Refusal<"TURN_OPEN">> {
    if (typeof text !== "string") {
      throw new TypeError(`setInstructions: instructions must be a string, got ${typeof text}`);
    }
    await this.ready;
    return this.s.slot.edit(() => changeInstructions(this.s, this.runner, text));
  }

  /**
   * Replaces the content of `entryIds` (and of the entries holding a copy of it) with
   * `[redacted: <reason>]`, in the store's raw log and in this session's log, keeping the log's
   * shape: the projection, and every later model request, shows the marker. The bytes leave the
   * SQLite file and its WAL (docs/stores.md#deleting-a-session-and-redacting-entries). Refused
   * with `TURN_OPEN` while a turn runs, and as `redactSession` refuses (actors/redact-session.ts):
   * `UNKNOWN_ENTRY`, `NOT_REDACTABLE`. Throws a TypeError for bad arguments or a store that
   * cannot redact; rejects with the store's `FENCED` error when another process runs the session.
   */
  async redact(
    entryIds: readonly string[],
    options: RedactOptions,
  ): Promise<RedactResult | Refusal<"TURN_OPEN">> {
    await this.ready;
    const open = this.s.turnOpen("redact entries");
    if (open) return open;
    // No turn starts until the store and this log both hold the redaction: an input sent
    // meanwhile waits, then runs on the redacted history.
    return this.s.slot.edit(() => redactSession(this.s.log, entryIds, options, this.s.options.now));
  }

  /**
   * Clears old tool results from the model's view (docs/long-sessions.md): each becomes a
   * `context_edit` whose text says how many bytes were cleared and the id the built-in
   * `read_result` tool reads it back with (from the log, where the result stays). Clears the
   * results of calls made at least `olderThanSteps` model responses ago (default 0: every
   * one), except the newest `keepLast` (default 0), results already cleared and results shorter
   * than the note that would replace them (`resultsToClear`, session/clear-results.ts). Refused
   * with `TURN_OPEN` while a turn runs and `READ_RESULT_OFF` without the tool
   * (`createAgent({ context: { readResultTool: true } })`).
   */
  async clearToolResults(
    options: { olderThanSteps?: number; keepLast?: number } = {},
  ): Promise<
    { ok: true; cleared: number; bytes: number } | Refusal<"TURN_OPEN" | "READ_RESULT_OFF">
  > {
    checkClearOptions(options);
    await this.ready;
    return this.s.slot.edit(() => clearResults(this.s, options));
  }

  /**
   * The task's acceptance now (docs/acceptance.md), apart from any turn's run status: reads the
   * artifact's version, so evidence taken against an older version shows as `stale`. Undefined
   * without `createAgent({ acceptance })`.
   */
  async acceptance(): Promise<AcceptanceReport | undefined> {
    await this.ready;
    return this.acceptancePart?.report();
  }

  /**
   * Runs the acceptance checks whose evidence does not count for the current artifact version
   * (never run, stale, interrupted; `all`: every check) and resolves with what the evidence
   * then supports and the checks it `ran`. Refused with `TURN_OPEN` while a turn runs,
   * `ACCEPTANCE_RUNNING` while checks run and `ACCEPTANCE_OFF` without an acceptance spec.
   */
  async accept(
    options: { all?: boolean } = {},
  ): Promise<
    | ({ ok: true; ran: string[] } & AcceptanceReport)
    | Refusal<"TURN_OPEN" | "ACCEPTANCE_RUNNING" | "ACCEPTANCE_OFF">
  > {
    await this.ready;
    const acceptance = this.acceptancePart;
    if (!acceptance) return acceptanceOff(this.id, "run acceptance checks");
    return this.s.turnOpen("run acceptance checks") ?? acceptance.accept(options);
  }

  /**
   * Replaces the frozen acceptance spec (an explicit embedder call; tools cannot): records a
   * new spec version in the log and drops every earlier evidence. Refused with `TURN_OPEN`
   * while a turn runs, `ACCEPTANCE_RUNNING` while checks run, `ACCEPTANCE_OFF` without one.
   */
  async setAcceptanceSpec(
    spec: AcceptanceSpec,
  ): Promise<
    { ok: true; version: number } | Refusal<"TURN_OPEN" | "ACCEPTANCE_RUNNING" | "ACCEPTANCE_OFF">
  > {
    await this.ready;
    const acceptance = this.acceptancePart;
    if (!acceptance) return acceptanceOff(this.id, "change the acceptance spec");
    return this.s.turnOpen("change the acceptance spec") ?? acceptance.setSpec(spec);
  }

  /**
   * Writes a handoff record (goal, progress, verified facts each with its evidence and version,
   * unverified assumptions, next steps) as a `handoff` log entry and returns it with its
   * Markdown. Reads the artifact's version first, so evidence that went stale is not verified.
   * Pass the record to `agent.openSession(id, { handoff })` to start the next session from it.
   */
  async handoff(
    options: HandoffOptions = {},
  ): Promise<
    { record: HandoffRecord; markdown: string } | Refusal<"TURN_OPEN" | "ACCEPTANCE_OFF">
  > {
    await this.ready;
    const acceptance = this.acceptancePart;
    if (!acceptance) return acceptanceOff(this.id, "write a handoff");
    return this.s.turnOpen("write a handoff") ?? acceptance.handoff(options);
  }

  /** @internal The log, for the agent's `read_result` tool and tests. */
  get sessionLog(): SessionLog {
    return this.s.openLog("sessionLog");
  }

  /** @internal The running turn, if any (inspection, tests). */
  get currentTurn(): TurnRun | undefined {
    return this.runner.current;
  }

  /** Resolves when the current execution has finished. */
  awaitSettlement(): Promise<void> {
    return this.runner.awaitSettlement();
  }

  /**
   * Resolves when no turn runs and none is about to start. An input already called
   * (`followUp()`, `steer()`, `prompt()`, awaited or not) is pending work: its turn runs first.
   */
  awaitIdle(): Promise<void> {
    return this.runner.awaitIdle();
  }

  /**
   * Interrupts the running turn, waits for it to settle, flushes the log and releases the
   * session: the agent forgets it, so `agent.openSession(id)` afterwards opens a fresh one from
   * the store. Idempotent; inputs after it throw.
   */
  close(): Promise<void> {
    const { s } = this;
    s.closing ??= closeThroughChart({
      s,
      inputs: this.inputs,
      runner: this.runner,
      lease: this.lease,
    });
    return s.closing;
  }

  private async branch(move: () => BranchResult): Promise<BranchResult> {
    await this.ready;
    return this.s.slot.edit(() => moveBranch(this.s, move));
  }
}
