import { hostname } from "node:os";
import type { Logger } from "pino";
import type { InspectionEvent } from "xstate";
import type { ChatMessage } from "../contracts/model.ts";
import { type Refusal, refuse } from "../contracts/refusal.ts";
import type { InboxLane, InboxSource } from "../contracts/status.ts";
import type { WakeScope } from "../machines/coordinator.machine.ts";
import {
  clear,
  type DrainMode,
  drain,
  emptyInbox,
  type Inbox,
  type InboxEvent,
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
import type { Lease, LeaseStore, SessionStore } from "../session/store.ts";
import { type Coordinator, createCoordinator } from "./coordinator.ts";
import type { AgentEvent, AgentEventBody } from "./events.ts";
import { modelSummarizer } from "./model-summarizer.ts";
import type { PermissionReply, PermissionRequest } from "./permissions.ts";
import { type TurnDeps, TurnRun } from "./turn-runner.ts";

/** What `session.prompt()` resolves to. */
export type PromptResult = TurnOutput;

export interface InboxOptions {
  id?: string;
  source?: InboxSource;
}

export interface SessionOptions {
  sessionId: string;
  /** Builds the per-turn dependencies once the log is open. */
  deps: (log: SessionLog, emit: (e: AgentEventBody) => void, drainSteer: () => number) => TurnDeps;
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
  /** Sees the coordinator's statechart (its doorbell) like every other actor. */
  inspect?: (event: InspectionEvent) => void;
  /** Closes what a crash left open in the log before anything else runs. */
  recover?: (log: SessionLog) => Promise<unknown>;
  /** A store shared by processes: run only while holding the session's lease (DESIGN §5, §12). */
  lease?: SessionLeaseOptions;
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
 * - `interrupt` cancels the current turn at once. Inputs queued before the interrupt stay
 *   queued (never dropped: `queued()` shows them) but do not start by themselves; the next
 *   input, `resume()`, or `clearQueue()` decides. An input submitted after the interrupt runs.
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
  private roleValue: SessionRole = "solo";
  private lease: Lease | undefined;
  private timers: ReturnType<typeof setInterval>[] = [];
  private unring: (() => void) | undefined;
  private pulling: Promise<void> | null = null;
  private repull = false;
  /** Prompts submitted while following: resolved from the owner's log. */
  private forwarded = new Map<string, (result: PromptResult) => void>();

  constructor(options: SessionOptions) {
    this.id = options.sessionId;
    this.options = options;
    this.ready = (async () => {
      const lease = options.lease;
      const held = lease ? await takeLease(lease, options.sessionId) : null;
      const log = await options.openLog();
      // Crash recovery only by the lease's holder: a follower never touches a live owner's log.
      if (held) log.fence(held);
      if (!lease || held) await options.recover?.(log);
      this.adopt(log);
      if (!lease) return;
      if (held) this.becomeOwner(held);
      else this.becomeFollower();
    })();
  }

  /** This session's role across processes (see {@link SessionRole}). */
  get role(): SessionRole {
    return this.roleValue;
  }

  /** Takes `log` as the session's state: inbox, seq, turn dependencies. */
  private adopt(log: SessionLog): void {
    this.log = log;
    // From the log's incremental state, not its entries: a long session opens from its
    // checkpoint without decoding its history.
    this.inbox = log.inbox();
    this.inboxSeq = log.lastSeq;
    this.interruptedAt = this.inboxSeq; // restored inputs wait for resume() or a new input
    this.deps = {
      ...this.options.deps(
        log,
        (e) => this.emit(e),
        () => this.drainSteer(),
      ),
      wantsPreviews: () => this.listeners.size > 0,
    };
  }

  private setRole(role: SessionRole): void {
    this.roleValue = role;
    this.options.lease?.onRole?.(role);
  }

  private clearTimers(): void {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.unring?.();
    this.unring = undefined;
  }

  private every(ms: number, fn: () => void): void {
    const t = setInterval(fn, ms);
    t.unref?.();
    this.timers.push(t);
  }

  /** Holds the lease: heartbeat, doorbell, and the posted inputs moved into the log. */
  private becomeOwner(lease: Lease): void {
    const options = this.options.lease!;
    this.clearTimers();
    this.lease = lease;
    this.log.fence(lease);
    this.setRole("owner");
    this.every(Math.max(10, Math.floor(options.ttlMs / 3)), () => {
      options.store.renewLease(lease, options.ttlMs).then(
        (ok) => {
          if (!ok) this.lost();
        },
        () => {}, // a failed renewal is retried at the next beat; expiry decides
      );
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
    this.every(options.pollMs, () => void this.tryTakeover().catch(() => {}));
    this.every(options.pollMs, () => void this.settleForwarded().catch(() => {}));
  }

  private takingOver = false;

  /** A follower takes the lease when its owner released it or died (it expired). */
  private async tryTakeover(): Promise<void> {
    const options = this.options.lease!;
    if (this.roleValue !== "follower" || this.takingOver) return;
    this.takingOver = true;
    try {
      const held = await takeLease(options, this.id);
      if (!held || this.roleValue !== "follower") return;
      const log = await this.options.openLog();
      log.fence(held);
      await this.options.recover?.(log);
      this.adopt(log);
      this.becomeOwner(held);
      await this.settleForwarded();
      this.resume(); // acknowledged inputs the dead owner left queued run now
    } finally {
      this.takingOver = false;
    }
  }

  /** The lease was lost (expired, taken over): stop writing; the log is another runner's now. */
  private lost(): void {
    if (this.roleValue !== "owner") return;
    this.options.logger.warn({ sessionId: this.id }, "session lease lost; following its new owner");
    this.becomeFollower();
    this.current?.interrupt("the session's lease was lost to another runner");
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
        let scope: "input" | "steer" | null = null;
        for (const input of posted) {
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
          if (input.lane === "interrupt") this.interrupt("interrupted by another process");
          else if (input.lane === "next-turn") scope = "input";
          else scope ??= "steer";
        }
        await this.log.flush();
        await store.markTaken(
          this.id,
          posted.map((p) => p.id),
        );
        if (scope) this.coordinator.wake(scope);
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

  /** Resolves prompts this process forwarded, from the owner's log (their turns' ends). */
  private async settleForwarded(): Promise<void> {
    if (this.forwarded.size === 0) return;
    const entries = await this.options.lease!.store.load(this.id);
    const turnOf = new Map<string, string>();
    const ended = new Map<string, PromptResult>();
    for (const e of entries) {
      if (e.type === "user_message" && e.inboxId && e.turnId) turnOf.set(e.inboxId, e.turnId);
      if (e.type === "turn_end")
        ended.set(e.turnId, { status: e.status, reason: e.reason } as PromptResult);
    }
    for (const [id, resolve] of this.forwarded) {
      const turn = turnOf.get(id);
      const result = turn && ended.get(turn);
      if (result) {
        this.forwarded.delete(id);
        resolve(result);
      }
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
    await this.log.flush().catch(() => {});
    this.clearTimers();
    this.lease = undefined;
    this.setRole("follower");
    await options.store.releaseLease(lease, { pending: this.hasRunnable() });
    this.clearTimers();
    return true;
  }

  /** Submits a prompt; resolves when the turn that consumes it ends. */
  async prompt(text: string, options: InboxOptions = {}): Promise<PromptResult> {
    const id = await this.submit("next-turn", text, options);
    if (this.roleValue === "follower") {
      return new Promise((resolve) => this.forwarded.set(id, resolve));
    }
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

  /** Cancels the running turn (if any). Queued inputs stay queued. */
  interrupt(reason = "interrupted by the user"): void {
    this.interruptedAt = this.inboxSeq;
    this.coordinatorRef?.interrupt();
    this.current?.interrupt(reason);
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

  subscribe(listener: (event: AgentEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The model's view of the active branch (OpenAI Chat Completions shape). */
  messages(): readonly ChatMessage[] {
    return this.log ? this.log.messages() : [];
  }

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

  /** The log, for branches, export and recovery. */
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

  /** The running turn, if any (inspection, tests). */
  get currentTurn(): TurnRun | undefined {
    return this.current;
  }

  async close(): Promise<void> {
    await this.ready.catch(() => {});
    this.interrupt("session closed");
    await this.awaitSettlement().catch(() => {});
    this.coordinatorRef?.stop();
    await this.pulling;
    if (this.log && this.roleValue !== "follower") await this.log.close().catch(() => {});
    if (this.roleValue === "owner") await this.release().catch(() => {});
    this.clearTimers();
    this.setRole("closed");
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
    if (this.roleValue === "follower") {
      // Another runner owns the session: the input goes to it through the store's inbox.
      await this.options.lease!.store.postInput(this.id, { id, lane, source, body });
      return id;
    }
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

  private hasRunnable(): boolean {
    return this.inbox.queue.some((e) => e.lane !== "interrupt" && e.seq > this.interruptedAt);
  }

  /** Steering at a safe point: each pending steer becomes a user message of the running turn. */
  private drainSteer(): number {
    const { events, inbox } = drain(this.inbox, "next-step", this.options.drain.steer);
    if (events.length === 0) return 0;
    this.inbox = inbox;
    for (const event of events) this.consume(event, true);
    return events.length;
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
      const lane = queued(this.inbox, "next-turn").length > 0 ? "next-turn" : "next-step";
      const mode = lane === "next-turn" ? this.options.drain.followUp : this.options.drain.steer;
      const { events, inbox } = drain(this.inbox, lane, mode);
      this.inbox = inbox;
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
      for (const event of events) {
        this.waiters.get(event.id)?.(output);
        this.waiters.delete(event.id);
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
