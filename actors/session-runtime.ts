import type { Logger } from "pino";
import type { InspectionEvent } from "xstate";
import type { AgentEvent, AgentEventBody } from "../contracts/events.ts";
import type { ChatMessage } from "../contracts/model.ts";
import type { PermissionReply, PermissionRequest } from "../contracts/permission.ts";
import { type Refusal, refuse } from "../contracts/refusal.ts";
import type { InboxLane, InboxSource } from "../contracts/status.ts";
import type { WakeScope } from "../machines/coordinator.machine.ts";
import {
  clear,
  type DrainMode,
  type DrainPolicy,
  emptyInbox,
  type Inbox,
  type InboxEvent,
  type PollPoint,
  pollInbox,
  queued,
  receive,
} from "../machines/policies/inbox.ts";
import type { TurnOutput } from "../machines/turn.machine.ts";
import {
  type BranchOptions,
  type BranchResult,
  exportJsonl,
  fork,
  rollback,
  switchLeaf,
} from "../session/branches.ts";
import { type CompactionResult, compactSession } from "../session/compaction.ts";
import type { LogEntry } from "../session/entries.ts";
import type { SessionLog } from "../session/log.ts";
import { type Coordinator, createCoordinator } from "./coordinator.ts";
import { modelSummarizer } from "./model-summarizer.ts";
import { type TurnDeps, TurnRun } from "./turn-runner.ts";

const TURN_ENDED: PollPoint = { type: "turn.ended" };
const IDLE: PollPoint = { type: "idle" };

/** What `session.prompt()` resolves to. */
export type PromptResult = TurnOutput;

/** Options of an input (`prompt`, `steer`, `followUp`). */
export interface InboxOptions {
  /** Deduplication key: an input whose id was already received is not added twice. */
  id?: string;
  /** Who sent it (default `user`); content never changes permissions, whatever its source. */
  source?: InboxSource;
}

export interface SessionOptions {
  sessionId: string;
  /** Builds the per-turn dependencies once the log is open. */
  deps: (
    log: SessionLog,
    emit: (e: AgentEventBody) => void,
    poll: (point: PollPoint) => number,
  ) => TurnDeps;
  openLog: () => Promise<SessionLog>;
  logger: Logger;
  now: () => number;
  ids: (prefix?: string) => string;
  drain: { steer: DrainMode; followUp: DrainMode };
  /**
   * Receives every event of the session, stamped, like a listener (the inspector's sink).
   * Contract: must return quickly and must not throw.
   */
  publish?: (event: AgentEvent) => void;
  /** @internal Test seam: the drain policy (default `lanesToDrain`; mutation tests only). */
  lanesToDrain?: DrainPolicy;
  /** Sees the coordinator's statechart (its doorbell) like every other actor. */
  inspect?: (event: InspectionEvent) => void;
  /** Closes what a crash left open in the log before anything else runs. */
  recover?: (log: SessionLog) => Promise<unknown>;
}

/**
 * One conversation: its log, its inbox and the coordinator that runs one turn at a time.
 *
 * Inputs are inbox events (DESIGN §3.5), persisted before they are acknowledged:
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
  private readonly options: SessionOptions;
  private log!: SessionLog;
  private deps!: TurnDeps;
  private inbox: Inbox = emptyInbox();
  private listeners = new Set<(event: AgentEvent) => void>();
  private waiters = new Map<string, (result: PromptResult) => void>();
  private coordinatorRef: Coordinator | undefined;
  private current: TurnRun | undefined;
  /** Inbox seq at the last interrupt: older queued inputs wait for an explicit wake. */
  private interruptedAt = -1;
  private inboxSeq = 0;

  /** @internal Sessions are opened by `agent.session(id)`. */
  constructor(options: SessionOptions) {
    this.id = options.sessionId;
    this.options = options;
    this.ready = options.openLog().then(async (log) => {
      this.log = log;
      await options.recover?.(log);
      // From the log's incremental state, not its entries: a long session opens from its
      // checkpoint without decoding its history.
      this.inbox = log.inbox();
      this.inboxSeq = log.lastSeq;
      this.interruptedAt = this.inboxSeq; // restored inputs wait for resume() or a new input
      this.deps = {
        ...options.deps(
          log,
          (e) => this.emit(e),
          (point) => this.poll(point),
        ),
        wantsPreviews: () => this.listeners.size > 0,
      };
      // An interrupt a stopped process received and did not record: its turn is long over.
      if (queued(this.inbox, "interrupt").length > 0) {
        this.poll(TURN_ENDED);
        await log.flush();
      }
    });
  }

  /** Submits a prompt; resolves when the turn that consumes it ends. */
  async prompt(text: string, options: InboxOptions = {}): Promise<PromptResult> {
    const id = await this.submit("next-turn", text, options);
    return new Promise((resolve) => {
      this.waiters.set(id, resolve);
      this.coordinator.wake("input");
    });
  }

  /** Queues a follow-up: read when the current turn would otherwise end; starts the next turn. */
  async followUp(text: string, options: InboxOptions = {}): Promise<string> {
    const id = await this.submit("next-turn", text, options);
    this.coordinator.wake("input");
    return id;
  }

  /** Queues steering: read at the next safe point of the running turn (or starts one). */
  async steer(text: string, options: InboxOptions = {}): Promise<string> {
    const id = await this.submit("next-step", text, options);
    this.coordinator.wake("steer");
    return id;
  }

  /**
   * Cancels the running turn (if any) at once; queued inputs stay queued. The interrupt is an
   * inbox event (lane `interrupt`, body `reason`), written to the log before the turn is
   * cancelled and recorded as consumed once that turn has ended (at once when none runs).
   * Resolves to its inbox id once the entry is durable. A repeated `id` changes nothing.
   */
  async interrupt(reason = "interrupted by the user", options: InboxOptions = {}): Promise<string> {
    // Before the log is open no turn can run: nothing to cancel yet. Once it is, everything up
    // to the cancel runs synchronously, in this call.
    if (!this.log) await this.ready;
    const before = this.inboxSeq;
    const id = this.receiveInterrupt(reason, options); // in the log before the cancel
    if (id === undefined) return options.id as string; // received before: changes nothing
    this.interruptedAt = before;
    this.cancelRunning(reason);
    await this.log.flush(); // persisted before acknowledged
    return id;
  }

  /** Starts turns for inputs left queued by an interrupt or a restart. */
  resume(): void {
    this.interruptedAt = -1;
    if (this.hasRunnable()) this.coordinator.wake("input");
  }

  /**
   * Answers a permission request (and every other pending one of this session, DESIGN §7).
   * Refused with `UNKNOWN_REQUEST` when no request with that id is waiting: it was answered
   * already, its turn ended, or the session asks no permissions.
   */
  replyPermission(
    requestId: string,
    reply: PermissionReply,
  ): { ok: true } | Refusal<"UNKNOWN_REQUEST"> {
    const broker = this.deps?.permissions;
    if (!broker) {
      return refuse(
        "UNKNOWN_REQUEST",
        `no permission request ${requestId} is waiting: session ${this.id} asks no permissions (createAgent has no \`permissions\` option)`,
      );
    }
    if (!broker.reply(requestId, reply)) {
      return refuse(
        "UNKNOWN_REQUEST",
        `no permission request ${requestId} is waiting in session ${this.id}: it was answered already or its turn ended; see session.pendingPermissions()`,
      );
    }
    return { ok: true };
  }

  /** Permission requests waiting for a reply. */
  pendingPermissions(): PermissionRequest[] {
    return this.deps?.permissions?.waiting() ?? [];
  }

  /** The queued, not yet consumed inputs. */
  queued(lane?: InboxLane): readonly InboxEvent[] {
    return queued(this.inbox, lane);
  }

  /** Removes queued inputs (of one lane, or all); their prompts resolve as cancelled. */
  clearQueue(lane?: InboxLane): InboxEvent[] {
    const { cleared, inbox } = clear(this.inbox, lane);
    this.inbox = inbox;
    for (const event of cleared) {
      this.log.append({ type: "inbox_consumed", inboxId: event.id });
      this.waiters.get(event.id)?.({ status: "cancelled", reason: "removed from the queue" });
      this.waiters.delete(event.id);
    }
    void this.log.flush().catch(() => {});
    return cleared;
  }

  /** Calls `listener` with every event of this session; returns the unsubscribe function. */
  subscribe(listener: (event: AgentEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The model's view of the active branch (OpenAI Chat Completions shape). */
  messages(): readonly ChatMessage[] {
    return this.log ? this.log.messages() : [];
  }

  /** The raw append-only log, every branch, in `seq` order. */
  entries(): readonly LogEntry[] {
    return this.log ? this.log.entries() : [];
  }

  /** Moves the active leaf back to `entryId` (the work tree does not roll back; the log says so). */
  async rollback(entryId: string | null, options?: BranchOptions): Promise<BranchResult> {
    return this.branch(() => rollback(this.log, entryId, options));
  }

  /** Starts a new branch from `entryId`; the old branch stays in the log. */
  async fork(entryId: string | null, options?: BranchOptions): Promise<BranchResult> {
    return this.branch(() => fork(this.log, entryId, options));
  }

  /** Makes `entryId` (another branch's tip) the active leaf. */
  async switchLeaf(entryId: string | null, options?: BranchOptions): Promise<BranchResult> {
    return this.branch(() => switchLeaf(this.log, entryId, options));
  }

  /**
   * Replaces older history by a summary written by the session's model (DESIGN §6): cut only
   * at legal points, the summary is a candidate until validated, a failure keeps the old
   * baseline. Refused with `TURN_OPEN` while a turn runs; every refusal is a
   * {@link CompactionResult} with `ok: false`, a `code` and a `message`.
   */
  async compact(
    options: { keepRecentTokens?: number; signal?: AbortSignal } = {},
  ): Promise<CompactionResult> {
    await this.ready;
    if (this.current) return { ...this.turnOpen("compact", this.current.turnId), attempts: [] };
    return compactSession(this.log, {
      ...options,
      summarize: modelSummarizer(this.deps.model, this.options.ids),
    });
  }

  /** The whole log as JSON Lines. */
  exportJsonl(): string {
    return exportJsonl(this.log);
  }

  private async branch(move: () => BranchResult): Promise<BranchResult> {
    await this.ready;
    if (this.current) return this.turnOpen("move the branch", this.current.turnId);
    const result = move();
    if (result.ok) await this.log.flush();
    return result;
  }

  private turnOpen(what: string, turnId: string): Refusal<"TURN_OPEN"> {
    return refuse(
      "TURN_OPEN",
      `cannot ${what} while turn ${turnId} is running; interrupt it or await session.awaitIdle() first`,
    );
  }

  /** @internal The log, for branches, export and recovery. */
  get sessionLog(): SessionLog {
    return this.log;
  }

  /** Resolves when the current execution has finished. */
  awaitSettlement(): Promise<void> {
    return this.coordinatorRef?.awaitSettlement() ?? Promise.resolve();
  }

  /** Resolves when no turn runs and none is about to start. */
  awaitIdle(): Promise<void> {
    return this.coordinatorRef?.awaitIdle() ?? Promise.resolve();
  }

  /** The session's runner host, created at the first input (an idle session holds no actor). */
  private get coordinator(): Coordinator {
    this.coordinatorRef ??= createCoordinator({
      run: (scope, signal) => this.run(scope, signal),
      cleanup: () => this.log.flush().catch(() => {}),
      pending: () => (this.hasRunnable() ? "input" : null),
      inspect: this.options.inspect,
    });
    return this.coordinatorRef;
  }

  /** @internal The running turn, if any (inspection, tests). */
  get currentTurn(): TurnRun | undefined {
    return this.current;
  }

  /** Interrupts the running turn, waits for it to settle and flushes the log. */
  async close(): Promise<void> {
    this.interruptedAt = this.inboxSeq;
    this.cancelRunning("session closed"); // a shutdown, not an input: no inbox event
    await this.awaitSettlement().catch(() => {});
    this.coordinatorRef?.stop();
    if (this.log) await this.log.close();
  }

  /**
   * The one place a live event is stamped: `sessionId` and `at` are set here, once, and the
   * same object goes to the inspector's sink and to every listener.
   */
  private emit(body: AgentEventBody): void {
    const publish = this.options.publish;
    if (this.listeners.size === 0 && !publish) return;
    // Not `{ ...body, sessionId, at }`: each property after a spread is a slow runtime call on
    // Node 20, paid per event.
    const event = Object.assign({}, body, {
      sessionId: this.id,
      at: this.options.now(),
    }) as AgentEvent;
    publish?.(event);
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (err) {
        this.options.logger.warn({ err }, "a session listener threw");
      }
    }
  }

  private async submit(lane: InboxLane, body: string, options: InboxOptions): Promise<string> {
    if (typeof body !== "string" || body.length === 0) {
      throw new TypeError(`${lane} input must be a non-empty string, got ${JSON.stringify(body)}`);
    }
    await this.ready;
    const id = options.id ?? this.options.ids("in");
    const source = options.source ?? "user";
    const seq = ++this.inboxSeq;
    const received = receive(this.inbox, { id, source, lane, body, seq });
    if (received.type === "invalid") throw new TypeError(received.reason);
    if (received.type === "duplicate") return id;
    this.inbox = received.inbox;
    this.log.append({ type: "inbox", inboxId: id, source, lane, body });
    this.emit({ type: "inbox.received", inboxId: id, lane, source });
    await this.log.flush(); // persisted before acknowledged
    return id;
  }

  /** Receives an interrupt into the inbox and the log; its id, or undefined for a duplicate. */
  private receiveInterrupt(reason: string, options: InboxOptions): string | undefined {
    const id = options.id ?? this.options.ids("in");
    const source = options.source ?? "user";
    const seq = ++this.inboxSeq;
    const received = receive(this.inbox, { id, source, lane: "interrupt", body: reason, seq });
    if (received.type === "invalid") throw new TypeError(received.reason);
    if (received.type === "duplicate") return undefined;
    this.inbox = received.inbox;
    this.log.append({ type: "inbox", inboxId: id, source, lane: "interrupt", body: reason });
    this.emit({ type: "inbox.received", inboxId: id, lane: "interrupt", source });
    // Nothing to wait for when no turn runs: recorded now.
    if (!this.current) this.poll(TURN_ENDED);
    return id;
  }

  /** Cancels the running execution and turn, if any. */
  private cancelRunning(reason: string): void {
    this.coordinatorRef?.interrupt();
    this.current?.interrupt(reason);
  }

  private hasRunnable(): boolean {
    return this.inbox.queue.some((e) => e.lane !== "interrupt" && e.seq > this.interruptedAt);
  }

  /**
   * Polls the inbox at `point` of the running turn: logs the interrupts recorded, and makes each
   * input taken a user message of the turn. Returns how many inputs were taken.
   */
  private poll(point: PollPoint): number {
    const { inbox, interrupts, events } = this.takeAt(point);
    this.inbox = inbox;
    for (const event of interrupts) this.consume(event, false);
    for (const event of events) this.consume(event, true);
    return events.length;
  }

  private takeAt(point: PollPoint) {
    return pollInbox(this.inbox, point, this.options.drain, this.options.lanesToDrain);
  }

  private consume(event: InboxEvent, asMessage: boolean): void {
    this.log.append({ type: "inbox_consumed", inboxId: event.id });
    if (asMessage) {
      this.log.append({
        type: "user_message",
        text: event.body,
        inboxId: event.id,
        turnId: this.current?.turnId,
      });
    }
    this.emit({ type: "inbox.consumed", inboxId: event.id, lane: event.lane });
  }

  /** One execution of the coordinator: run turns while runnable inputs are queued. */
  private async run(_scope: WakeScope, signal: AbortSignal): Promise<void> {
    await this.ready;
    while (!signal.aborted && this.hasRunnable()) {
      const { inbox, interrupts, events } = this.takeAt(IDLE);
      this.inbox = inbox;
      for (const event of interrupts) this.consume(event, false);
      if (events.length === 0) break; // the policy reads no input lane between turns
      const turn = new TurnRun(this.deps);
      this.current = turn;
      for (const event of events) this.consume(event, false);
      let output: PromptResult;
      try {
        output = await turn.start(events.map((e) => ({ text: e.body, inboxId: e.id })));
      } catch (err) {
        // A bug, not a turn outcome: still answer every prompt waiting on this turn.
        this.options.logger.error({ err }, "a turn could not run");
        output = { status: "failed", reason: `internal error: ${String(err)}` };
      }
      this.current = undefined;
      this.poll(TURN_ENDED); // interrupts that arrived during the turn are recorded now
      for (const event of events) {
        this.waiters.get(event.id)?.(output);
        this.waiters.delete(event.id);
      }
    }
  }
}
