import type { Lease, PostedInput } from "../session/store.ts";
import { TurnResults } from "../session/turn-result.ts";
import type { PromptResult, SessionLeaseOptions } from "./session-options.ts";
import { takePostedAnswer } from "./session-permissions.ts";
import type { LeasePort, SessionScope } from "./session-scope.ts";
import { takeLease } from "./take-lease.ts";

/**
 * A session on a store shared by processes (docs/many-processes.md): one runner per session.
 * The owner holds the session's lease (renewed every third of its time; every append carries its
 * fencing token), moves inputs other processes posted into its log and runs them. A follower
 * reads, posts its inputs to the owner, answers its forwarded prompts from the owner's log (its
 * tail only), and takes the session over (recovery, then its waiters become the runner's) when
 * the owner released the lease or died.
 */
export class SessionLease implements LeasePort {
  private lease: Lease | undefined;
  private timers: ReturnType<typeof setInterval>[] = [];
  private unring: (() => void) | undefined;
  private pulling: Promise<void> | null = null;
  private repull = false;
  /** Prompts submitted while following: resolved from the owner's log. */
  private forwardedMap: Map<string, (result: PromptResult) => void> | undefined;
  /** The owner's turns that forwarded prompts wait for, read from its log's tail. */
  private turnResults: TurnResults | undefined;
  /** The seq of the last owner's entry read (a follower reads only what comes after it). */
  private readAfter = 0;
  private readingTail = false;
  /** The follower's poll of the owner's log (referenced while a forwarded prompt waits). */
  private forwardPoll: ReturnType<typeof setInterval> | undefined;
  /** Why the lease was lost last (the running turn ends with it). */
  lostReason: string | undefined;
  /** A follower's takeover in flight: `close()` waits for it, so it never ends in a closed session. */
  private takingOver: Promise<void> | undefined;

  constructor(
    private readonly s: SessionScope,
    private readonly options: SessionLeaseOptions,
  ) {}

  // A follower's state, made at its first forwarded prompt: an owner's session holds none.
  private get forwarded(): Map<string, (result: PromptResult) => void> {
    this.forwardedMap ??= new Map();
    return this.forwardedMap;
  }

  private get results(): TurnResults {
    this.turnResults ??= new TurnResults();
    return this.turnResults;
  }

  /** The lease this runner holds (undefined: it follows, or the session is not shared). */
  get held(): Lease | undefined {
    return this.lease;
  }

  /** Takes the lease at open, if free (null: another live runner holds it). */
  take(): Promise<(Lease & { takeover: boolean }) | null> {
    return takeLease(this.options, this.s.id);
  }

  /** Holds the lease: heartbeat, doorbell, and the posted inputs moved into the log. */
  becomeOwner(lease: Lease): void {
    const { options, s } = this;
    this.clearTimers();
    this.lease = lease;
    s.log.fence(lease);
    s.setRole("owner");
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
            if (!ok) this.lost("the lease expired or another runner took it over");
          },
          () => {}, // a failed renewal is retried at the next beat; expiry decides
        )
        .finally(() => {
          if (beatSince === since) beatSince = undefined;
        });
    });
    // The inbox table is the truth and the doorbell only a hint: poll it too.
    this.every(options.pollMs, () => this.pullInputs());
    this.unring = options.onDoorbell(s.id, () => this.pullInputs());
    this.pullInputs();
  }

  /** Another runner owns the session: read only, post inputs, try to take over when it ends. */
  becomeFollower(): void {
    const { options, s } = this;
    this.clearTimers();
    this.lease = undefined;
    s.setRole("follower");
    // The owner's log from here on is read as a tail: what this process wrote and the store
    // did not take (a fenced runner's last entries) is not the owner's.
    this.readAfter = s.log.durableSeq;
    this.every(options.pollMs, () => void this.tryTakeover().catch(() => {}));
    this.forwardPoll = this.every(
      options.pollMs,
      () => void this.settleForwarded().catch(() => {}),
    );
    this.keepAlive();
  }

  /**
   * The lease was lost (expired, taken over, or the store fenced a write): stop at once; the
   * log is another runner's now. The running turn ends `failed` (`LEASE_LOST`).
   */
  lost(why: string): void {
    const { s } = this;
    if (s.role !== "owner") return;
    s.options.logger().warn({ sessionId: s.id }, "session lease lost; following its new owner");
    this.lostReason = `lease lost (session ${s.id}: ${why}); this runner stopped and wrote nothing more. The session follows its new owner`;
    // The chart ends the running turn `failed` (LEASE_LOST) and follows.
    s.chart.send({ type: "lease.lost" });
    this.becomeFollower();
  }

  forward(id: string, resolve: (result: PromptResult) => void): void {
    this.forwarded.set(id, resolve);
    this.s.chart.send({ type: "forward" });
    this.results.watch(id);
    this.keepAlive();
  }

  post(input: PostedInput): Promise<void> {
    return this.options.store.postInput(this.s.id, input);
  }

  /**
   * Reads the inputs other processes posted for this session now (the owner moves them into
   * its log and rings its runner) and resolves once that is done.
   */
  async syncInputs(): Promise<void> {
    this.pullInputs();
    while (this.pulling) await this.pulling;
  }

  /**
   * Gives the lease up (workers do when a session is idle); `pending` work left in the log is
   * recorded so a worker takes it. The session then follows. Resolves false when it held none.
   */
  async release(): Promise<boolean> {
    const { s } = this;
    const lease = this.lease;
    if (!lease || s.role !== "owner") return false;
    // No pull starts now (no poll, no doorbell, not an owner), and the one in flight ends first:
    // every input it moved into the log is counted below, before the lease goes.
    this.clearTimers();
    this.lease = undefined;
    s.setRole("follower");
    while (this.pulling) await this.pulling;
    if (s.awake) await s.log.flush().catch(() => {}); // one that slept has nothing to flush
    await this.options.store.releaseLease(lease, { pending: s.inputs.pendingWork() });
    return true;
  }

  /** Effect `adoptForwarded`: the prompts this process forwarded are its runner's to answer now. */
  adoptForwarded(): void {
    if (!this.forwardedMap?.size) return;
    for (const id of this.forwarded.keys()) this.results.unwatch(id);
    this.s.inputs.adoptWaiters(this.forwarded);
    this.forwarded.clear();
    this.keepAlive();
  }

  /** Answers every prompt this process forwarded with `result(id)` (a close). */
  answerForwarded(result: (id: string) => PromptResult): void {
    if (!this.forwardedMap?.size) return;
    for (const [id, resolve] of this.forwarded) resolve(result(id));
    this.forwarded.clear();
    this.keepAlive();
  }

  /** A close: waits for a takeover loading the log and a pull in flight, then stops the timers. */
  async settle(): Promise<void> {
    await this.takingOver?.catch(() => {});
    await this.pulling;
  }

  /** Stops every timer and the doorbell (a close, a role change). */
  clearTimers(): void {
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

  /**
   * A prompt forwarded to the owner keeps the process alive while it waits, as an owner's turn
   * does (its poll timer is referenced then, and only then).
   */
  private keepAlive(): void {
    if ((this.forwardedMap?.size ?? 0) > 0) this.forwardPoll?.ref?.();
    else this.forwardPoll?.unref?.();
  }

  /**
   * A follower takes the lease when its owner released it or died (it expired). Never for a
   * session being closed: a lease taken while `close()` runs is given back (marked pending: the
   * dead owner may have left work), and `close()` waits for a takeover already loading the log,
   * then releases as an owner. Otherwise a closed session, which runs no turn, would go on
   * renewing the lease and taking inputs that nobody runs, and no worker could take it.
   */
  private tryTakeover(): Promise<void> {
    const { s } = this;
    if (s.role !== "follower" || this.takingOver || s.closing) return Promise.resolve();
    const run = (async () => {
      const { options } = this;
      const held = await takeLease(options, s.id);
      if (!held) return;
      if (s.role !== "follower" || s.closing) {
        await options.store.releaseLease(held, { pending: true });
        return;
      }
      let continueTurn: string | undefined;
      s.chart.send({ type: "takeover.begin" });
      try {
        const log = await s.options.openLog();
        log.fence(held);
        continueTurn = (await s.options.recover?.(log))?.continueTurn;
        s.runner.continueAfterTakeover(continueTurn);
        // Prompts this process forwarded whose turns the old owner ended (recovery ended a
        // crashed one) are answered from the log; the others are this runner's to answer now.
        await this.settleForwarded();
        await s.adopt(log);
      } catch (error) {
        // Not held for a lease's length by a runner that cannot run: the next try starts afresh.
        await options.store.releaseLease(held, { pending: true }).catch(() => {});
        s.chart.send({ type: "takeover.failed" });
        throw error;
      }
      this.becomeOwner(held);
      // Acknowledged inputs the dead owner left queued run now, with the prompts this process
      // forwarded (the chart adopts them) and the turn it was running (continued); a close
      // waiting for this takeover flushes and releases as the owner instead.
      s.inputs.release();
      s.chart.send({ type: "takeover.done", runnable: s.runner.runnable() });
    })();
    this.takingOver = run.finally(() => {
      this.takingOver = undefined;
    });
    return this.takingOver;
  }

  /**
   * Moves inputs posted by other processes into this owner's log (deduplicated by id: an input
   * already in the log is only marked taken), then rings the runner. Coalesces concurrent
   * calls; a call during a pull pulls again after it, so no ring is lost.
   */
  private pullInputs(): void {
    const { s } = this;
    if (this.pulling) {
      this.repull = true;
      return;
    }
    if (s.role !== "owner") return;
    const { store } = this.options;
    this.pulling = (async () => {
      do {
        this.repull = false;
        const posted = await store.postedInputs(s.id);
        if (posted.length === 0) continue;
        let woke = false;
        for (const input of posted) {
          // An answer to a permission request (actors/durable-permissions.ts), not an input.
          if (await takePostedAnswer(s, input)) continue;
          if (await s.inputs.takePosted(input)) woke = true;
        }
        await s.log.flush();
        await store.markTaken(
          s.id,
          posted.map((p) => p.id),
        );
        // Released meanwhile (release() waits for this pull): the inputs stay queued, pending.
        if (woke && s.role === "owner") s.runner.wake();
      } while (this.repull && s.role === "owner");
    })()
      .catch((err) => s.options.logger().warn({ err }, "pulling posted inputs failed"))
      .finally(() => {
        this.pulling = null;
      });
  }

  /**
   * Resolves prompts this process forwarded, from the owner's log: reads only what the owner
   * wrote since the last read (the log's tail), and answers each prompt whose turn ended with
   * that turn's result as the log holds it (session/turn-result.ts, the owner's own rule).
   */
  private async settleForwarded(): Promise<void> {
    if (!this.forwardedMap?.size || this.readingTail) return;
    this.readingTail = true;
    try {
      const { store } = this.options;
      const after = this.readAfter;
      const tail = store.loadAfter
        ? await store.loadAfter(this.s.id, after)
        : (await store.load(this.s.id)).filter((e) => e.seq > after);
      for (const entry of tail) {
        if (entry.seq <= this.readAfter) continue;
        this.results.add(entry);
        this.readAfter = entry.seq;
      }
      for (const { inboxId, result } of this.results.take()) {
        const resolve = this.forwarded.get(inboxId);
        this.forwarded.delete(inboxId);
        if (resolve) this.s.chart.send({ type: "forward.answered" });
        resolve?.(result);
      }
    } finally {
      this.readingTail = false;
      this.keepAlive();
    }
  }
}
