import { hostname } from "node:os";
import type { Logger } from "pino";
import type { InspectionEvent } from "xstate";
import type { AcceptanceReport, AcceptanceStatus, Evidence } from "../contracts/acceptance.ts";
import type { ChatMessage } from "../contracts/chat.ts";
import type { AgentEvent, AgentEventBody } from "../contracts/events.ts";
import type { Message } from "../contracts/messages.ts";
import type { Model } from "../contracts/model.ts";
import type { PermissionReply, PermissionRequest } from "../contracts/permission.ts";
import { type Refusal, refuse } from "../contracts/refusal.ts";
import type { InboxLane, InboxSource, TurnStatus } from "../contracts/status.ts";
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
import {
  type BranchOptions,
  type BranchResult,
  exportJsonl,
  fork,
  rollback,
  switchLeaf,
} from "../session/branches.ts";
import { type CompactionResult, compactSession } from "../session/compaction.ts";
import type { ContextUsage } from "../session/context-budget.ts";
import type { EntryOf, HandoffRecord, LogEntry } from "../session/entries.ts";
import type { SessionLog } from "../session/log.ts";
import type { Lease, LeaseStore, SessionStore } from "../session/store.ts";
import { refusalCode } from "../session/store-error.ts";
import { TurnResults } from "../session/turn-result.ts";
import type { ToolSet } from "../tools/tool-set.ts";
import type { AcceptanceHost } from "./acceptance.ts";
import type { AcceptanceSpec } from "./acceptance-spec.ts";
import { type Coordinator, createCoordinator } from "./coordinator.ts";
import { buildHandoff, type HandoffOptions, handoffMarkdown, regressionText } from "./handoff.ts";
import { modelSummarizer } from "./model-summarizer.ts";
import { clearedResultText, READ_RESULT_TOOL } from "./read-result-tool.ts";
import { type TurnDeps, type TurnResult, TurnRun } from "./turn-runner.ts";
import { type NormalizedInput, normalizeUserInput, type UserInput } from "./user-input.ts";

const TURN_ENDED: PollPoint = { type: "turn.ended" };

const sum = <T>(items: readonly T[], of: (item: T) => number) =>
  items.reduce((total, item) => total + of(item), 0);
const IDLE: PollPoint = { type: "idle" };

/**
 * What `session.prompt()` resolves to: how the turn ended (`status`, `reason`), its final
 * assistant text, its summed provider usage and the number of model requests it sent. With
 * `createAgent({ acceptance })`, also the task's acceptance, a layer of its own: `acceptance`
 * and the `evidence` behind it, and the follow-up `rounds` the acceptance loop sent (their
 * turns' usage and steps are included; `status`, `reason` and `text` are the last turn's).
 */
export interface PromptResult extends TurnResult {
  acceptance?: AcceptanceStatus;
  evidence?: Evidence;
  rounds?: number;
}

/** A prompt that never ran (removed from the queue): nothing was said, nothing spent. */
const notRun = (status: TurnStatus, reason: string): PromptResult => ({
  status,
  reason,
  text: "",
  usage: { inputTokens: 0, outputTokens: 0 },
  steps: 0,
});

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
  /** The instructions this session runs with (recorded at its first turn when they differ). */
  instructions?: string | ((session: Session) => string);
  /** The agent's model (its window and reserve, for `contextUsage()` before the log is open). */
  model: Model;
  /** Whether the `read_result` tool is registered (`clearToolResults` needs it). */
  readResultTool: boolean;
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
  /** Called once when `close()` has finished (the agent forgets the session then). */
  onClosed?: () => void;
  /** A store shared by processes: run only while holding the session's lease (DESIGN §5, §12). */
  lease?: SessionLeaseOptions;
  /**
   * Builds the session's acceptance host once its log is open (with `createAgent({ acceptance })`).
   * `followUp` runs a turn of the acceptance loop.
   */
  acceptance?: (
    log: SessionLog,
    emit: (e: AgentEventBody) => void,
    followUp: (text: string, cancelled: () => boolean) => Promise<TurnResult>,
  ) => AcceptanceHost;
  /** A handoff this session starts from: its verified checks are re-run before the first turn. */
  handoff?: HandoffRecord;
}

/** How a session shares its store with other processes. */
export interface SessionLeaseOptions {
  store: SessionStore & LeaseStore;
  /** This process's name in lease rows (host:pid by default). */
  owner: string;
  /** How long a lease lasts without renewal; renewed every third of it. */
  ttlMs: number;
  /** How often a follower tries to take the lease over and re-reads posted inputs. */
  pollMs: number;
  /** Rings when another process posted an input for this session (a hint). Returns the unsubscribe. */
  onDoorbell: (sessionId: string, ring: () => void) => () => void;
  /** Called when this session's role changes (tests, logs). */
  onRole?: (role: SessionRole) => void;
}

/**
 * `solo`: the store is not shared (memory); `owner`: this process holds the lease and runs the
 * session; `follower`: another live runner owns it: this one reads, and its inputs are posted to
 * the owner; `closed`.
 */
export type SessionRole = "solo" | "owner" | "follower" | "closed";

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
  /**
   * Inbox seq at the last interrupt the user sent (`interrupt()`), until `resume()`: the inputs
   * queued before it are not work another runner should pick up. Unlike `interruptedAt`, not
   * moved by an open (restored inputs) or by `close()` (a shutdown is no user's decision).
   */
  private heldAt = -1;
  private inboxSeq = 0;
  private opened = false;
  private closing: Promise<void> | undefined;
  /** Inputs called but not yet acknowledged: pending work for `awaitIdle()`. */
  private submitting = new Set<Promise<unknown>>();
  /** The configured instructions were compared with the log's (once per session object). */
  private instructionsSynced = false;
  private roleValue: SessionRole = "solo";
  private lease: Lease | undefined;
  private timers: ReturnType<typeof setInterval>[] = [];
  private unring: (() => void) | undefined;
  private pulling: Promise<void> | null = null;
  private repull = false;
  /** Prompts submitted while following: resolved from the owner's log. */
  private forwarded = new Map<string, (result: PromptResult) => void>();
  /** The owner's turns that forwarded prompts wait for, read from its log's tail. */
  private results = new TurnResults();
  /** The seq of the last owner's entry read (a follower reads only what comes after it). */
  private readAfter = 0;
  private readingTail = false;
  /** The follower's poll of the owner's log (referenced while a forwarded prompt waits). */
  private forwardPoll: ReturnType<typeof setInterval> | undefined;
  /** A follower's takeover in flight: `close()` waits for it, so it never ends in a closed session. */
  private takingOver: Promise<void> | undefined;
  private acceptanceHost: AcceptanceHost | undefined;
  /** Turns of the acceptance loop in the current run (their cost adds to the prompt's). */
  private loopTurns: TurnResult[] = [];
  /** A handoff whose regression check has not run yet. */
  private pendingHandoff: HandoffRecord | undefined;

  /** @internal Sessions are opened by `agent.session(id)`. */
  constructor(options: SessionOptions) {
    this.id = options.sessionId;
    this.options = options;
    this.ready = (async () => {
      const lease = options.lease;
      const held = lease ? await takeLease(lease, options.sessionId) : null;
      const log = await options.openLog();
      if (held) log.fence(held);
      // Crash recovery only by the lease's holder: a follower never touches a live owner's log.
      if (!lease || held) await options.recover?.(log);
      await this.adopt(log);
      if (lease) {
        if (held) this.becomeOwner(held);
        else this.becomeFollower();
      }
      this.pendingHandoff = options.handoff;
      this.opened = true;
    })();
    // Observed here so a failed open is not an unhandled rejection; callers still see it.
    this.ready.catch(() => {});
  }

  /** Takes `log` as the session's state: inbox, seq, turn dependencies. */
  private async adopt(log: SessionLog): Promise<void> {
    this.log = log;
    // A write the store fenced: another runner owns the session now. Stop, and follow it.
    log.onRefused((error) => {
      if (this.log === log && refusalCode(error) === "LEASE_LOST") {
        this.lost("is written by another runner now (the store refused this runner's write)");
      }
    });
    // From the log's incremental state, not its entries: a long session opens from its
    // checkpoint without decoding its history.
    this.inbox = log.inbox();
    this.inboxSeq = log.lastSeq;
    this.interruptedAt = this.inboxSeq; // restored inputs wait for resume() or a new input
    this.deps = {
      ...this.options.deps(
        log,
        (e) => this.emit(e),
        (point) => this.poll(point),
      ),
      wantsPreviews: () => this.listeners.size > 0,
    };
    // What writes to the log at open is the lease holder's to do (or a store's only process).
    const writer = !this.options.lease || log.heldLease !== undefined;
    this.acceptanceHost = writer
      ? this.options.acceptance?.(
          log,
          (e) => this.emit(e),
          (text, cancelled) => this.runLoopTurn(text, cancelled),
        )
      : undefined;
    if (this.acceptanceHost) {
      this.acceptanceHost.open();
      const host = this.acceptanceHost;
      this.deps.guardCall = (call) => host.guardCall(call);
      this.deps.watchCall = (call) => host.watchCall(call);
      await log.flush();
    }
    // An interrupt a stopped process received and did not record: its turn is long over.
    if (writer && queued(this.inbox, "interrupt").length > 0) {
      this.poll(TURN_ENDED);
      await log.flush();
    }
  }

  /** Whether `close()` was called: a closed session accepts no input (reopen it by id). */
  get closed(): boolean {
    return this.closing !== undefined;
  }

  /** This session's role across processes: `solo`, `owner`, `follower` or `closed` (see `SessionRole` in actors/session-runtime.ts). */
  get role(): SessionRole {
    return this.roleValue;
  }

  private setRole(role: SessionRole): void {
    this.roleValue = role;
    this.options.lease?.onRole?.(role);
  }

  private clearTimers(): void {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.forwardPoll = undefined;
    this.unring?.();
    this.unring = undefined;
  }

  private every(ms: number, fn: () => void): ReturnType<typeof setInterval> {
    const t = setInterval(fn, ms);
    t.unref?.();
    this.timers.push(t);
    return t;
  }

  /** Holds the lease: heartbeat, doorbell, and the posted inputs moved into the log. */
  private becomeOwner(lease: Lease): void {
    const options = this.options.lease!;
    this.clearTimers();
    this.lease = lease;
    this.log.fence(lease);
    this.setRole("owner");
    // One renewal at a time: a slow one is not joined by more in the pool's queue. One in flight
    // longer than the lease (a connection that hangs) no longer holds the next back: that one
    // finds the lease expired and this runner stops writing.
    let beatSince: number | undefined;
    this.every(Math.max(10, Math.floor(options.ttlMs / 3)), () => {
      const now = Date.now();
      if (beatSince !== undefined && now - beatSince < options.ttlMs) return;
      const since = now;
      beatSince = since;
      options.store
        .renewLease(lease, options.ttlMs)
        .then(
          (ok) => {
            if (!ok) this.lost();
          },
          () => {}, // a failed renewal is retried at the next beat; expiry decides
        )
        .finally(() => {
          if (beatSince === since) beatSince = undefined;
        });
    });
    // The inbox table is the truth and the doorbell only a hint: poll it too.
    this.every(options.pollMs, () => this.pullInputs());
    this.unring = options.onDoorbell(this.id, () => this.pullInputs());
    this.pullInputs();
  }

  /** Another runner owns the session: read only, post inputs, try to take over when it ends. */
  private becomeFollower(): void {
    const options = this.options.lease!;
    this.clearTimers();
    this.lease = undefined;
    this.setRole("follower");
    // The owner's log from here on is read as a tail: what this process wrote and the store
    // did not take (a fenced runner's last entries) is not the owner's.
    this.readAfter = this.log.durableSeq;
    this.every(options.pollMs, () => void this.tryTakeover().catch(() => {}));
    this.forwardPoll = this.every(
      options.pollMs,
      () => void this.settleForwarded().catch(() => {}),
    );
    this.keepAlive();
  }

  /**
   * A prompt forwarded to the owner keeps the process alive while it waits, as an owner's turn
   * does (its poll timer is referenced then, and only then).
   */
  private keepAlive(): void {
    if (this.forwarded.size > 0) this.forwardPoll?.ref?.();
    else this.forwardPoll?.unref?.();
  }

  /** `resolve` answers input `id`, run by the owner: settled from the owner's log. */
  private forward(id: string, resolve: (result: PromptResult) => void): void {
    this.forwarded.set(id, resolve);
    this.results.watch(id);
    this.keepAlive();
  }

  /**
   * A follower takes the lease when its owner released it or died (it expired). Never for a
   * session being closed: a lease taken while `close()` runs is given back (marked pending: the
   * dead owner may have left work), and `close()` waits for a takeover already loading the log,
   * then releases as an owner. Otherwise a closed session, which runs no turn, would go on
   * renewing the lease and taking inputs that nobody runs, and no worker could take it.
   */
  private tryTakeover(): Promise<void> {
    if (this.roleValue !== "follower" || this.takingOver || this.closing) return Promise.resolve();
    const run = (async () => {
      const options = this.options.lease!;
      const held = await takeLease(options, this.id);
      if (!held) return;
      if (this.roleValue !== "follower" || this.closing) {
        await options.store.releaseLease(held, { pending: true });
        return;
      }
      try {
        const log = await this.options.openLog();
        log.fence(held);
        await this.options.recover?.(log);
        // Prompts this process forwarded whose turns the old owner ended (recovery ended a
        // crashed one) are answered from the log; the others are this runner's to answer now.
        await this.settleForwarded();
        await this.adopt(log);
      } catch (error) {
        // Not held for a lease's length by a runner that cannot run: the next try starts afresh.
        await options.store.releaseLease(held, { pending: true }).catch(() => {});
        throw error;
      }
      for (const [id, resolve] of this.forwarded) {
        this.results.unwatch(id);
        this.waiters.set(id, resolve);
      }
      this.forwarded.clear();
      this.becomeOwner(held);
      if (this.closing) return; // close() resumes here: it flushes and releases as the owner
      this.resume(); // acknowledged inputs the dead owner left queued run now
    })();
    this.takingOver = run.finally(() => {
      this.takingOver = undefined;
    });
    return this.takingOver;
  }

  /**
   * The lease was lost (expired, taken over, or the store fenced a write): stop at once; the log
   * is another runner's now. The running turn ends `failed` (`LEASE_LOST`).
   */
  private lost(why = "its lease expired or another runner took it over"): void {
    if (this.roleValue !== "owner") return;
    this.options.logger.warn({ sessionId: this.id }, "session lease lost; following its new owner");
    this.becomeFollower();
    const reason = `lease lost: session ${this.id} ${why}; this runner stopped and wrote nothing more. The session follows its new owner`;
    this.coordinatorRef?.interrupt();
    this.current?.interrupt(reason, "failed", "LEASE_LOST");
    if (this.acceptanceHost?.busy) this.acceptanceHost.interrupt(reason);
  }

  /**
   * Moves inputs posted by other processes into this owner's log (deduplicated by id: an input
   * already in the log is only marked taken), then rings the coordinator. Coalesces concurrent
   * calls; a call during a pull pulls again after it, so no ring is lost.
   */
  private pullInputs(): void {
    if (this.pulling) {
      this.repull = true;
      return;
    }
    const store = this.options.lease?.store;
    if (!store || this.roleValue !== "owner") return;
    this.pulling = (async () => {
      do {
        this.repull = false;
        const posted = await store.postedInputs(this.id);
        if (posted.length === 0) continue;
        let woke = false;
        for (const input of posted) {
          if (input.lane === "interrupt") {
            await this.interrupt(input.body, { id: input.id, source: input.source });
            continue;
          }
          const seq = ++this.inboxSeq;
          const received = receive(this.inbox, { ...input, seq });
          if (received.type !== "accepted") continue;
          this.inbox = received.inbox;
          this.log.append({
            type: "inbox",
            inboxId: input.id,
            source: input.source,
            lane: input.lane,
            body: input.body,
          });
          this.emit({
            type: "inbox.received",
            inboxId: input.id,
            lane: input.lane,
            source: input.source,
          });
          woke = true;
        }
        await this.log.flush();
        await store.markTaken(
          this.id,
          posted.map((p) => p.id),
        );
        // Released meanwhile (release() waits for this pull): the inputs stay queued, pending.
        if (woke && this.roleValue === "owner") this.coordinator.wake();
      } while (this.repull && this.roleValue === "owner");
    })()
      .catch((err) => this.options.logger.warn({ err }, "pulling posted inputs failed"))
      .finally(() => {
        this.pulling = null;
      });
  }

  /**
   * Reads the inputs other processes posted for this session now (the owner moves them into
   * its log and rings its coordinator) and resolves once that is done.
   */
  async syncInputs(): Promise<void> {
    await this.ready;
    this.pullInputs();
    while (this.pulling) await this.pulling;
  }

  /** Whether a turn runs or runnable inputs are queued. */
  get busy(): boolean {
    return this.current !== undefined || this.hasRunnable();
  }

  /**
   * Resolves prompts this process forwarded, from the owner's log: reads only what the owner
   * wrote since the last read (the log's tail), and answers each prompt whose turn ended with
   * that turn's result as the log holds it (session/turn-result.ts, the owner's own rule).
   */
  private async settleForwarded(): Promise<void> {
    if (this.forwarded.size === 0 || this.readingTail) return;
    this.readingTail = true;
    try {
      const store = this.options.lease!.store;
      const after = this.readAfter;
      const tail = store.loadAfter
        ? await store.loadAfter(this.id, after)
        : (await store.load(this.id)).filter((e) => e.seq > after);
      for (const entry of tail) {
        if (entry.seq <= this.readAfter) continue;
        this.results.add(entry);
        this.readAfter = entry.seq;
      }
      for (const { inboxId, result } of this.results.take()) {
        const resolve = this.forwarded.get(inboxId);
        this.forwarded.delete(inboxId);
        resolve?.(result);
      }
    } finally {
      this.readingTail = false;
      this.keepAlive();
    }
  }

  /**
   * Gives the lease up (workers do when a session is idle); `pending` work left in the log is
   * recorded so a worker takes it. The session then follows. Resolves false when it held none.
   */
  async release(): Promise<boolean> {
    await this.ready;
    const options = this.options.lease;
    const lease = this.lease;
    if (!options || !lease || this.roleValue !== "owner") return false;
    // No pull starts now (no poll, no doorbell, not an owner), and the one in flight ends first:
    // every input it moved into the log is counted below, before the lease goes.
    this.clearTimers();
    this.lease = undefined;
    this.setRole("follower");
    while (this.pulling) await this.pulling;
    await this.log.flush().catch(() => {});
    // Pending: any input queued in the log that no interrupt of the user holds back, however
    // this process stopped running it (closed mid-turn, shut down, opened and never resumed).
    const pending = this.inbox.queue.some((e) => e.lane !== "interrupt" && e.seq > this.heldAt);
    await options.store.releaseLease(lease, { pending });
    return true;
  }

  /**
   * Submits a prompt (text, or text and image parts); resolves when the turn that consumes it
   * ends. Throws a `TypeError` before anything is queued or sent when the input is malformed, or
   * has an image and the model does not take images (`Model.input.images`), or an image URL the
   * model does not take (`Model.input.checkImageUrl`).
   */
  async prompt(input: UserInput, options: InboxOptions = {}): Promise<PromptResult> {
    let resolve!: (result: PromptResult) => void;
    const result = new Promise<PromptResult>((r) => {
      resolve = r;
    });
    await this.submit("prompt", "next-turn", input, options, (id) => {
      if (this.roleValue === "follower") this.forward(id, resolve);
      else this.waiters.set(id, resolve);
    });
    return result;
  }

  /** Queues a follow-up: read when the current turn would otherwise end; starts the next turn. */
  async followUp(input: UserInput, options: InboxOptions = {}): Promise<string> {
    return this.submit("followUp", "next-turn", input, options);
  }

  /**
   * Queues steering (text or parts, checked like `prompt`'s): read at the next safe point of
   * the running turn (or starts one).
   */
  async steer(input: UserInput, options: InboxOptions = {}): Promise<string> {
    return this.submit("steer", "next-step", input, options);
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
    if (this.roleValue === "follower") {
      const id = options.id ?? this.options.ids("in");
      const source = options.source ?? "user";
      await this.options.lease!.store.postInput(this.id, {
        id,
        lane: "interrupt",
        source,
        body: reason,
      });
      return id;
    }
    const before = this.inboxSeq;
    const id = this.receiveInterrupt(reason, options); // in the log before the cancel
    if (id === undefined) return options.id as string; // received before: changes nothing
    this.interruptedAt = before;
    this.heldAt = before;
    this.cancelRunning(reason);
    await this.log.flush(); // persisted before acknowledged
    return id;
  }

  /** Starts turns for inputs left queued by an interrupt or a restart. */
  resume(): void {
    this.interruptedAt = -1;
    this.heldAt = -1;
    if (this.hasRunnable()) this.coordinator.wake();
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
      this.waiters.get(event.id)?.(notRun("cancelled", "removed from the queue"));
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

  /** The model's view of the active branch (OpenAI Chat Completions shape; reasoning left out). */
  messages(): readonly ChatMessage[] {
    return this.openLog("messages").messages();
  }

  /**
   * The model's view of the active branch as neutral messages (contracts/messages.ts):
   * reasoning with its provider metadata, images, tool calls and results as parts. Live and
   * owned by the log: do not mutate; `slice()` it to keep a snapshot.
   */
  history(): readonly Message[] {
    return this.openLog("history").history();
  }

  /** Every entry of the log, all branches, in `seq` order. */
  entries(): readonly LogEntry[] {
    return this.openLog("entries").entries();
  }

  /**
   * The log, once open. Reading before then would show an empty history that looks exactly
   * like a lost one, so it throws instead.
   */
  private openLog(what: string): SessionLog {
    if (!this.opened) {
      throw new Error(
        `session ${this.id}: ${what}() was called before the session finished opening; use \`await agent.openSession(${JSON.stringify(this.id)})\` (or \`await session.ready\`) before reading it`,
      );
    }
    return this.log;
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

  /**
   * The context budget of the next model request: `used` tokens (the last provider usage plus
   * an estimate of what was appended since when `trusted`, else an estimate of the whole
   * request), the model's `window` (Infinity: unknown) and the output `reserve`. Cheap: it reads
   * only what changed since it was last measured. `context.measured` events report changes.
   */
  contextUsage(): ContextUsage {
    if (!this.deps) {
      const { model } = this.options;
      return {
        used: 0,
        window: model.contextWindow ?? Number.POSITIVE_INFINITY,
        reserve: model.maxOutputTokens ?? 0,
        trusted: false,
      };
    }
    return this.deps.context.measure();
  }

  /** The instructions in force on the active branch (undefined: none). */
  instructions(): string | undefined {
    return this.deps?.context.instructions();
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
    if (this.current) return this.turnOpen("change the instructions", this.current.turnId);
    this.instructionsSynced = true; // an explicit change wins over the configured text
    const entry = this.recordInstructions(text);
    await this.log.flush();
    return { ok: true, entry };
  }

  /**
   * Clears old tool results from the model's view (DESIGN §6): each becomes a `context_edit`
   * whose text says how many bytes were cleared and the id the built-in `read_result` tool
   * reads it back with (from the log, where the result stays). Clears the results of calls
   * made at least `olderThanSteps` model responses ago (default 0: every one), except the
   * newest `keepLast` (default 0), results already cleared and results shorter than the note
   * that would replace them. Refused with `TURN_OPEN` while a turn runs and `READ_RESULT_OFF`
   * without the tool (`createAgent({ context: { readResultTool: true } })`).
   */
  async clearToolResults(
    options: { olderThanSteps?: number; keepLast?: number } = {},
  ): Promise<
    { ok: true; cleared: number; bytes: number } | Refusal<"TURN_OPEN" | "READ_RESULT_OFF">
  > {
    const { olderThanSteps = 0, keepLast = 0 } = options;
    for (const [name, v] of [
      ["olderThanSteps", olderThanSteps],
      ["keepLast", keepLast],
    ] as const) {
      if (!(Number.isInteger(v) && v >= 0)) {
        throw new TypeError(`clearToolResults: ${name} must be an integer ≥ 0, got ${String(v)}`);
      }
    }
    await this.ready;
    if (this.current) return this.turnOpen("clear tool results", this.current.turnId);
    if (!this.options.readResultTool) {
      return refuse(
        "READ_RESULT_OFF",
        `cleared results could not be read back: the ${READ_RESULT_TOOL} tool is off; create the agent with createAgent({ context: { readResultTool: true } })`,
      );
    }
    const messages = this.log.history().slice();
    const sources = this.log.messageSources().slice();
    let steps = 0;
    const stepOf: number[] = [];
    for (const m of messages) {
      if (m.role === "assistant") steps++;
      stepOf.push(steps);
    }
    const candidates: { index: number; entry: EntryOf<"call_result"> }[] = [];
    for (let i = 0; i < messages.length; i++) {
      const m = messages[i];
      if (m.role !== "tool" || steps - stepOf[i] < olderThanSteps) continue;
      const entry = this.log.get(sources[i]);
      if (entry?.type !== "call_result") continue; // a patched slot, not a recorded result
      candidates.push({ index: i, entry });
    }
    let cleared = 0;
    let bytes = 0;
    for (const { index, entry } of candidates.slice(0, Math.max(0, candidates.length - keepLast))) {
      const m = messages[index];
      if (m.role !== "tool") continue;
      const content = m.content[0].content;
      const size = Buffer.byteLength(content);
      const note = clearedResultText(entry.id, size);
      if (content.startsWith("[result cleared") || note.length >= content.length) continue;
      this.log.append({ type: "context_edit", targetId: entry.id, replacement: note });
      cleared++;
      bytes += size;
    }
    if (cleared > 0) await this.log.flush();
    return { ok: true, cleared, bytes };
  }

  /**
   * The task's acceptance now (DESIGN §13), apart from any turn's run status: reads the
   * artifact's version, so evidence taken against an older version shows as `stale`. Undefined
   * without `createAgent({ acceptance })`.
   */
  async acceptance(): Promise<AcceptanceReport | undefined> {
    await this.ready;
    return this.acceptanceHost?.report();
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
    const host = this.acceptanceHost;
    if (!host) return this.acceptanceOff("run acceptance checks");
    if (this.current) return this.turnOpen("run acceptance checks", this.current.turnId);
    if (host.busy)
      return refuse(
        "ACCEPTANCE_RUNNING",
        `acceptance checks are already running in session ${this.id}; await the prompt or accept() that started them`,
      );
    const ran: string[] = [];
    const unsubscribe = this.subscribe((e) => {
      if (e.type === "check.started") ran.push(e.name);
    });
    try {
      const outcome = await host.check({ reason: "accept", all: options.all === true });
      await this.log.flush();
      return {
        ok: true,
        ran,
        acceptance: outcome.acceptance,
        evidence: outcome.evidence,
        specVersion: host.spec.version,
      };
    } finally {
      unsubscribe();
    }
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
    const host = this.acceptanceHost;
    if (!host) return this.acceptanceOff("change the acceptance spec");
    if (this.current) return this.turnOpen("change the acceptance spec", this.current.turnId);
    if (host.busy)
      return refuse("ACCEPTANCE_RUNNING", "cannot change the acceptance spec while its checks run");
    const { version } = host.setSpec(spec);
    await this.log.flush();
    return { ok: true, version };
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
    const host = this.acceptanceHost;
    if (!host) return this.acceptanceOff("write a handoff");
    if (this.current) return this.turnOpen("write a handoff", this.current.turnId);
    const report = await host.report();
    const record = buildHandoff({
      sessionId: this.id,
      at: this.options.now(),
      entries: this.log.entries(),
      report,
      options,
    });
    const markdown = handoffMarkdown(record);
    this.log.append({ type: "handoff", record, markdown });
    await this.log.flush();
    return { record, markdown };
  }

  private acceptanceOff(what: string): Refusal<"ACCEPTANCE_OFF"> {
    return refuse(
      "ACCEPTANCE_OFF",
      `cannot ${what}: session ${this.id} has no acceptance spec; create the agent with createAgent({ acceptance: { checks: [...] } })`,
    );
  }

  /**
   * A turn of the acceptance loop, with the failing evidence as its input. It starts after the
   * acceptance chart's action that asked for it has returned (an actor created inside another
   * actor's action is XState's misuse), and not at all when `cancelled()` by then.
   */
  private async runLoopTurn(text: string, cancelled: () => boolean): Promise<TurnResult> {
    await this.refreshTools(); // also: after the chart's action that asked for this turn returned
    if (cancelled()) {
      const skipped = notRun("cancelled", "interrupted before the follow-up turn started");
      this.loopTurns.push(skipped);
      return skipped;
    }
    const turn = new TurnRun(this.deps);
    this.current = turn;
    let result: TurnResult;
    try {
      result = await turn.start([{ text }]);
    } catch (err) {
      result = notRun("failed", `internal error: ${String(err)}`);
    } finally {
      this.current = undefined;
    }
    this.loopTurns.push(result);
    return result;
  }

  /**
   * After a turn: the checks (and, with `until: "passed"` after a completed turn, the loop),
   * or, after a cancelled turn or with `runAfterTurn: false`, what the evidence supports now.
   * The result carries both layers.
   */
  private async afterTurn(output: PromptResult): Promise<PromptResult> {
    const host = this.acceptanceHost!;
    this.loopTurns = [];
    let report: AcceptanceReport & { rounds?: number };
    try {
      if (output.status === "cancelled" || !host.runsAfterTurn) {
        report = await host.report();
      } else {
        const outcome = await host.check({
          reason: "turn",
          loop: host.loops && output.status === "completed",
        });
        report = { ...outcome, specVersion: host.spec.version };
      }
    } catch (err) {
      this.options.logger.error({ err }, "acceptance could not run");
      report = host.snapshotReport();
    }
    const last = this.loopTurns.at(-1);
    const result: PromptResult = last
      ? {
          status: last.status,
          text: last.text,
          usage: {
            inputTokens: output.usage.inputTokens + sum(this.loopTurns, (t) => t.usage.inputTokens),
            outputTokens:
              output.usage.outputTokens + sum(this.loopTurns, (t) => t.usage.outputTokens),
          },
          steps: output.steps + sum(this.loopTurns, (t) => t.steps),
        }
      : { ...output };
    if (last?.reason !== undefined) result.reason = last.reason;
    result.acceptance = report.acceptance;
    result.evidence = report.evidence;
    result.rounds = report.rounds ?? 0;
    this.loopTurns = [];
    return result;
  }

  /**
   * Before any new work of a session started from a handoff: re-run the checks the handoff
   * verified and tell the model (a note in its view) what no longer holds.
   */
  private async regressionCheck(record: HandoffRecord): Promise<void> {
    this.pendingHandoff = undefined;
    const host = this.acceptanceHost;
    const names = record.verified.map((v) => v.evidence.name);
    let text: string;
    if (!host) {
      text = `Handoff from session ${record.sessionId}: its ${names.length} verified fact(s) could not be re-checked here (no acceptance spec); treat them as unverified.`;
    } else {
      const outcome = await host.check({ reason: "handoff", names });
      text = regressionText(record, { ...outcome, specVersion: host.spec.version });
    }
    this.log.append({ type: "note", text, audience: "model" });
    await this.log.flush();
  }

  /** The whole log as JSON Lines. */
  exportJsonl(): string {
    return exportJsonl(this.openLog("exportJsonl"));
  }

  private async branch(move: () => BranchResult): Promise<BranchResult> {
    await this.ready;
    if (this.current) return this.turnOpen("move the branch", this.current.turnId);
    await this.log.loadHistory();
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
    return this.openLog("sessionLog");
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
    while (this.submitting.size > 0) await Promise.allSettled([...this.submitting]);
    await this.coordinatorRef?.awaitIdle();
    // A turn that ended may have been followed by an input called meanwhile.
    if (this.submitting.size > 0) return this.awaitIdle();
  }

  /** The session's runner host, created at the first input (an idle session holds no actor). */
  private get coordinator(): Coordinator {
    this.coordinatorRef ??= createCoordinator({
      run: (signal) => this.run(signal),
      cleanup: () => this.log.flush().catch(() => {}),
      pending: () => this.hasRunnable(),
      inspect: this.options.inspect,
    });
    return this.coordinatorRef;
  }

  /** @internal The running turn, if any (inspection, tests). */
  get currentTurn(): TurnRun | undefined {
    return this.current;
  }

  /**
   * Interrupts the running turn, waits for it to settle, flushes the log and releases the
   * session: the agent forgets it, so `agent.openSession(id)` afterwards opens a fresh one from
   * the store. Idempotent; inputs after it throw.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.ready.catch(() => {});
      // A takeover already loading the log ends first (as the owner): this close releases it.
      await this.takingOver?.catch(() => {});
      this.interruptedAt = this.inboxSeq;
      this.cancelRunning("session closed"); // a shutdown, not an input: no inbox event
      await this.awaitSettlement().catch(() => {});
      this.coordinatorRef?.stop();
      try {
        await this.pulling;
        // A follower's log is the owner's: nothing of it is this process's to write.
        if (this.log && this.roleValue !== "follower") await this.log.close();
        if (this.roleValue === "owner") await this.release().catch(() => {});
      } finally {
        this.clearTimers();
        this.setRole("closed");
        for (const [id, resolve] of this.waiters) {
          resolve(
            notRun(
              "cancelled",
              `session closed before input ${id} ran; it stays queued in the log and runs after the session is reopened and resumed`,
            ),
          );
        }
        this.waiters.clear();
        this.listeners.clear();
        this.options.onClosed?.();
      }
    })();
    return this.closing;
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

  /**
   * Persists an input, then wakes the coordinator; `onId` runs before the wake (a prompt's
   * waiter). Tracked until acknowledged, so `awaitIdle()` counts it as pending work. A malformed
   * input throws a `TypeError` naming `session.<method>` before anything is queued.
   */
  private submit(
    method: string,
    lane: InboxLane,
    input: UserInput,
    options: InboxOptions,
    onId?: (id: string) => void,
  ): Promise<string> {
    const normalized = normalizeUserInput(`session.${method}`, input);
    if (this.closing) {
      return Promise.reject(
        new Error(
          `session ${this.id} is closed; open it again with \`await agent.openSession(${JSON.stringify(this.id)})\``,
        ),
      );
    }
    const pending = this.receive(method, lane, normalized, options).then((id) => {
      onId?.(id);
      // A follower's input went to the owner's inbox: its doorbell, not ours.
      if (this.roleValue !== "follower") this.coordinator.wake();
      return id;
    });
    this.submitting.add(pending);
    const forget = () => this.submitting.delete(pending);
    pending.then(forget, forget);
    return pending;
  }

  private async receive(
    method: string,
    lane: InboxLane,
    input: NormalizedInput,
    options: InboxOptions,
  ): Promise<string> {
    const { text: body, parts } = input;
    await this.ready;
    const model = this.deps.model;
    if (parts?.some((p) => p.type === "image") && model.input?.images !== true) {
      throw new TypeError(
        `session.${method}: the model "${model.name}" does not take images (its input.images is not true); send text only, or use a model that takes images (openaiModel, or aiSdkModel with an Anthropic, OpenAI or Google model)`,
      );
    }
    const checkUrl = model.input?.checkImageUrl;
    for (const [i, p] of parts?.entries() ?? []) {
      if (!checkUrl || p.type !== "image" || !("url" in p) || !/^https?:/i.test(p.url)) continue;
      const why = checkUrl(p.url, p.mediaType);
      if (why !== undefined) {
        throw new TypeError(
          `session.${method}: part ${i}: the model "${model.name}" does not take the image URL ${JSON.stringify(p.url.slice(0, 120))}: ${why}; send the image's bytes instead ({ type: "image", image: bytes })`,
        );
      }
    }
    const id = options.id ?? this.options.ids("in");
    const source = options.source ?? "user";
    if (this.roleValue === "follower") {
      // Another runner owns the session: the input goes to it through the store's inbox.
      await this.options.lease!.store.postInput(this.id, { id, lane, source, body });
      return id;
    }
    const seq = ++this.inboxSeq;
    const event = parts ? { id, source, lane, body, parts, seq } : { id, source, lane, body, seq };
    const received = receive(this.inbox, event);
    if (received.type === "invalid") throw new TypeError(received.reason);
    if (received.type === "duplicate") return id;
    this.inbox = received.inbox;
    this.log.append(
      parts
        ? { type: "inbox", inboxId: id, source, lane, body, parts }
        : { type: "inbox", inboxId: id, source, lane, body },
    );
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
    if (this.acceptanceHost?.busy) this.acceptanceHost.interrupt(reason);
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

  /** Records `event` consumed (and, `asMessage`, as a user message of the turn); returns the consume entry's seq. */
  private consume(event: InboxEvent, asMessage: boolean): number {
    const { seq } = this.log.append({ type: "inbox_consumed", inboxId: event.id });
    if (asMessage) {
      this.log.append({
        type: "user_message",
        text: event.body,
        ...(event.parts ? { parts: [...event.parts] } : {}),
        inboxId: event.id,
        turnId: this.current?.turnId,
      });
    }
    this.emit({ type: "inbox.consumed", inboxId: event.id, lane: event.lane });
    return seq;
  }

  /** Appends a `settings` entry with `text` as the instructions (other settings kept). */
  private recordInstructions(text: string): EntryOf<"settings"> {
    return this.log.append({
      type: "settings",
      settings: { ...this.log.settings(), instructions: text },
    });
  }

  /**
   * Once per session object, before its first turn: records the configured instructions when
   * they differ from those in force on the branch (a new session, or new instructions). Later
   * turns leave them: a rollback or fork keeps the instructions of the point it moved to.
   */
  private syncInstructions(): void {
    if (this.instructionsSynced) return;
    this.instructionsSynced = true;
    const configured = this.options.instructions;
    if (configured === undefined) return;
    const text = typeof configured === "function" ? configured(this) : configured;
    if (typeof text !== "string") {
      throw new TypeError(
        `instructions: the function must return a string, got ${typeof text} (session ${this.id})`,
      );
    }
    if (text !== this.log.settings().instructions) this.recordInstructions(text);
  }

  /** Applies the tool set's pending changes (a set never rejects its refresh). */
  private async refreshTools(): Promise<void> {
    const set = this.deps.registry as Partial<ToolSet>;
    if (set.refresh) await set.refresh();
  }

  /** One execution of the coordinator: run turns while runnable inputs are queued. */
  private async run(signal: AbortSignal): Promise<void> {
    await this.ready;
    try {
      this.syncInstructions();
    } catch (err) {
      // The embedder's function threw: say so, and run with the instructions in force.
      const message = `instructions not updated: ${err instanceof Error ? err.message : String(err)}`;
      this.options.logger.warn({ err }, message);
      this.emit({ type: "log.written", level: "warn", message });
    }
    if (this.pendingHandoff && !signal.aborted) await this.regressionCheck(this.pendingHandoff);
    while (!signal.aborted && this.hasRunnable()) {
      // A session's tool set changes between turns only (an MCP server's list change, a
      // reconnection): never under a running turn.
      await this.refreshTools();
      if (signal.aborted) break;
      const { inbox, interrupts, events } = this.takeAt(IDLE);
      this.inbox = inbox;
      for (const event of interrupts) this.consume(event, false);
      if (events.length === 0) break; // the policy reads no input lane between turns
      const turn = new TurnRun(this.deps);
      this.current = turn;
      let consumedSeq = 0;
      for (const event of events) consumedSeq = this.consume(event, false);
      let output: PromptResult;
      try {
        output = await turn.start(
          events.map((e) => ({ text: e.body, parts: e.parts, inboxId: e.id })),
        );
      } catch (err) {
        // A bug, not a turn outcome: still answer every prompt waiting on this turn.
        this.options.logger.error({ err }, "a turn could not run");
        output = notRun("failed", `internal error: ${String(err)}`);
      }
      this.current = undefined;
      // A turn the runtime failed (the store refused it) has no acceptance round: its checks'
      // evidence could not be written either.
      if (this.acceptanceHost && output.code === undefined) output = await this.afterTurn(output);
      this.poll(TURN_ENDED); // interrupts that arrived during the turn are recorded now
      // Lost to another runner before the inputs' consumption was durable: the new owner runs
      // them, and their prompts wait for its answer.
      const rerun =
        output.code === "LEASE_LOST" &&
        this.roleValue === "follower" &&
        consumedSeq > this.log.durableSeq;
      for (const event of events) {
        const resolve = this.waiters.get(event.id);
        this.waiters.delete(event.id);
        if (resolve && rerun) this.forward(event.id, resolve);
        else resolve?.(output);
      }
    }
  }
}

/** `host:pid`: the default lease owner, which lets a process of the same host see a dead holder. */
export function defaultLeaseOwner(): string {
  return `${hostname()}:${process.pid}`;
}

/**
 * Takes the session's lease: free, released or expired; or held by a process of this host that
 * no longer exists (its `host:pid` owner name says so), by compare-and-set on its token.
 */
async function takeLease(
  options: SessionLeaseOptions,
  sessionId: string,
): Promise<(Lease & { takeover: boolean }) | null> {
  const { store, owner, ttlMs } = options;
  const held = await store.acquireLease(sessionId, owner, ttlMs);
  if (held) return held;
  const current = await store.readLease(sessionId);
  const match = current && /^(.*):(\d+)$/.exec(current.owner);
  if (!current || !match || match[1] !== hostname() || processAlive(Number(match[2]))) return null;
  const taken = await store.acquireLease(sessionId, owner, ttlMs, { ifToken: current.token });
  return taken && { ...taken, takeover: true };
}

function processAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
