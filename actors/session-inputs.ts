import type { InboxLane } from "../contracts/status.ts";
import {
  clear,
  type InboxEvent,
  type PollPoint,
  pollInbox,
  queued,
  receive,
} from "../machines/policies/inbox.ts";
import type { PostedInput } from "../session/store.ts";
import { durableInbox, refusedInput } from "./durable-inbox.ts";
import { type InboxOptions, notRun, type PromptResult } from "./session-options.ts";
import type { InputsPort, SessionScope } from "./session-scope.ts";
import { type NormalizedInput, normalizeUserInput, type UserInput } from "./user-input.ts";

const TURN_ENDED: PollPoint = { type: "turn.ended" };
const IDLE: PollPoint = { type: "idle" };

/**
 * A session's inputs (docs/architecture.md, the inbox): every input is an inbox event,
 * persisted before it is acknowledged. There is ONE inbox and it is the log's: the queue and the
 * set of ids ever received are folded from the log's `inbox` and `inbox_consumed` entries
 * (`SessionLog.inbox()`), so receiving an input is appending its entry and taking one is
 * appending its consumption; an event's `seq` is its entry's. This class decides nothing the
 * inbox policy does not say (`pollInbox`, `lanesToDrain` in machines/policies/inbox.ts); it
 * writes the entries, keeps the prompts' waiters, and remembers which queued inputs a user's
 * interrupt holds back.
 */
export class SessionInputs implements InputsPort {
  /** Prompts waiting for the turn that consumes their input. */
  private waiterMap: Map<string, (result: PromptResult) => void> | undefined;
  /** Inputs called but not yet acknowledged: pending work for `awaitIdle()`. */
  private submittingSet: Set<Promise<unknown>> | undefined;
  /** Log seq at the last interrupt: older queued inputs wait for an explicit wake. */
  private interruptedAt = -1;
  /**
   * Log seq at the last interrupt the user sent (`interrupt()`), until `resume()`: the inputs
   * queued before it are not work another runner should pick up. Unlike `interruptedAt`, not
   * moved by an open (restored inputs) or by `close()` (a shutdown is no user's decision).
   */
  private heldAt = -1;

  constructor(private readonly s: SessionScope) {}

  // Made at the first input, and let go when the session sleeps (`compact`).
  private get waiters(): Map<string, (result: PromptResult) => void> {
    this.waiterMap ??= new Map();
    return this.waiterMap;
  }

  private get submitting(): Set<Promise<unknown>> {
    this.submittingSet ??= new Set();
    return this.submittingSet;
  }

  /** The session goes to sleep quiet: its empty bookkeeping goes with its log. */
  compact(): void {
    if (this.waiterMap?.size === 0) this.waiterMap = undefined;
    if (this.submittingSet?.size === 0) this.submittingSet = undefined;
  }

  /** A prompt: its input, then its turn's result. See `Session.prompt`. */
  async prompt(input: UserInput, options: InboxOptions): Promise<PromptResult> {
    let resolve!: (result: PromptResult) => void;
    const result = new Promise<PromptResult>((r) => {
      resolve = r;
    });
    await this.submit("prompt", "next-turn", input, options, (id) => {
      if (this.s.follower) this.s.lease!.forward(id, resolve);
      else this.waiters.set(id, resolve);
    });
    return result;
  }

  /**
   * Persists an input, then wakes the runner; `onId` runs before the wake (a prompt's waiter).
   * Tracked until acknowledged, so `awaitIdle()` counts it as pending work. A malformed input
   * throws a `TypeError` naming `session.<method>` before anything is queued.
   */
  submit(
    method: string,
    lane: InboxLane,
    input: UserInput,
    options: InboxOptions,
    onId?: (id: string) => void,
  ): Promise<string> {
    const normalized = normalizeUserInput(`session.${method}`, input);
    if (this.s.closing) {
      return Promise.reject(
        new Error(
          `session ${this.s.id} is closed; open it again with \`await agent.openSession(${JSON.stringify(this.s.id)})\``,
        ),
      );
    }
    const pending = this.receive(method, lane, normalized, options).then((id) => {
      onId?.(id);
      // A follower's input went to the owner's inbox: its doorbell, not ours.
      if (!this.s.follower) this.s.runner.wake();
      return id;
    });
    this.submitting.add(pending);
    const forget = () => this.submitting.delete(pending);
    pending.then(forget, forget);
    return pending;
  }

  /** Resolves once every input called so far is acknowledged (or refused). */
  async submitted(): Promise<void> {
    while (this.submittingSet?.size) await Promise.allSettled([...this.submittingSet]);
  }

  /** Whether an input was called and is not acknowledged yet. */
  get unacknowledged(): boolean {
    return (this.submittingSet?.size ?? 0) > 0;
  }

  private async receive(
    method: string,
    lane: InboxLane,
    input: NormalizedInput,
    options: InboxOptions,
  ): Promise<string> {
    const { text: body, parts } = input;
    await this.s.ready;
    const model = this.s.deps.model;
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
    const id = options.id ?? this.s.options.ids("in");
    const source = options.source ?? "user";
    if (this.s.follower) {
      // Another runner owns the session: the input goes to it through the store's inbox.
      await this.s.lease!.post({ id, lane, source, body });
      return id;
    }
    const { log } = this.s;
    const seq = log.lastSeq + 1; // the seq its entry gets
    const event = parts ? { id, source, lane, body, parts, seq } : { id, source, lane, body, seq };
    const received = receive(log.inbox(), event);
    if (received.type === "invalid") throw new TypeError(received.reason);
    if (received.type === "duplicate") return id;
    log.append(
      parts
        ? { type: "inbox", inboxId: id, source, lane, body, parts }
        : { type: "inbox", inboxId: id, source, lane, body },
      refusedInput(log, id), // a refused write: it never runs (invariant 15)
    );
    this.s.emit({ type: "inbox.received", inboxId: id, lane, source });
    await log.flush(); // persisted before acknowledged
    return id;
  }

  /** An interrupt. See `Session.interrupt`. */
  async interrupt(reason: string, options: InboxOptions): Promise<string> {
    // Before the log is open no turn can run: nothing to cancel yet. Once it is, everything up
    // to the cancel runs synchronously, in this call.
    if (!this.s.log) await this.s.ready;
    if (this.s.follower) {
      const id = options.id ?? this.s.options.ids("in");
      await this.s.lease!.post({
        id,
        lane: "interrupt",
        source: options.source ?? "user",
        body: reason,
      });
      return id;
    }
    const before = this.s.log.lastSeq;
    const id = this.receiveInterrupt(reason, options); // in the log before the cancel
    if (id === undefined) return options.id as string; // received before: changes nothing
    this.interruptedAt = before;
    this.heldAt = before;
    this.s.runner.cancelRunning(reason);
    await this.s.log.flush(); // persisted before acknowledged
    return id;
  }

  /** Receives an interrupt into the inbox and the log; its id, or undefined for a duplicate. */
  private receiveInterrupt(reason: string, options: InboxOptions): string | undefined {
    const { log } = this.s;
    const id = options.id ?? this.s.options.ids("in");
    const source = options.source ?? "user";
    const event = { id, source, lane: "interrupt" as const, body: reason, seq: log.lastSeq + 1 };
    const received = receive(log.inbox(), event);
    if (received.type === "invalid") throw new TypeError(received.reason);
    if (received.type === "duplicate") return undefined;
    log.append({ type: "inbox", inboxId: id, source, lane: "interrupt", body: reason });
    this.s.emit({ type: "inbox.received", inboxId: id, lane: "interrupt", source });
    // Nothing to wait for when no turn runs: recorded now.
    if (!this.s.runner.current) this.poll(TURN_ENDED);
    return id;
  }

  /** Queued inputs run again: what an interrupt or a restart held back. */
  resume(): void {
    this.release();
    if (this.hasRunnable()) this.s.runner.wake();
  }

  /** Queued inputs are runnable again (what `resume` does before it rings the doorbell). */
  release(): void {
    this.interruptedAt = -1;
    this.heldAt = -1;
  }

  holdRestored(): void {
    this.interruptedAt = this.s.log.lastSeq;
  }

  /** Nothing queued now starts by itself (a close: a shutdown, not a user's interrupt). */
  holdAll(): void {
    this.interruptedAt = this.s.log.lastSeq;
  }

  recordStrandedInterrupts(): boolean {
    if (queued(this.s.log.inbox(), "interrupt").length === 0) return false;
    this.poll(TURN_ENDED);
    return true;
  }

  async takePosted(input: PostedInput): Promise<boolean> {
    if (input.lane === "interrupt") {
      await this.interrupt(input.body, { id: input.id, source: input.source });
      return false;
    }
    const { log } = this.s;
    const received = receive(log.inbox(), { ...input, seq: log.lastSeq + 1 });
    if (received.type !== "accepted") return false;
    log.append({
      type: "inbox",
      inboxId: input.id,
      source: input.source,
      lane: input.lane,
      body: input.body,
    });
    this.s.emit({
      type: "inbox.received",
      inboxId: input.id,
      lane: input.lane,
      source: input.source,
    });
    return true;
  }

  pendingWork(): boolean {
    if (!this.s.awake) return false; // a session sleeps with an empty inbox
    return this.inbox().queue.some((e) => e.lane !== "interrupt" && e.seq > this.heldAt);
  }

  /** No input is queued, being called, or waiting for its turn's result (a session may sleep). */
  get quiet(): boolean {
    return (
      !this.waiterMap?.size && !this.submittingSet?.size && this.s.log.inbox().queue.length === 0
    );
  }

  adoptWaiters(waiters: Map<string, (result: PromptResult) => void>): void {
    for (const [id, resolve] of waiters) this.waiters.set(id, resolve);
  }

  /** The queued, not yet consumed inputs (of one lane, or all). */
  queued(lane?: InboxLane): readonly InboxEvent[] {
    return queued(this.s.log.inbox(), lane);
  }

  /** Removes queued inputs (of one lane, or all); their prompts resolve as cancelled. */
  clearQueue(lane?: InboxLane): InboxEvent[] {
    const { log } = this.s;
    const { cleared } = clear(log.inbox(), lane);
    for (const event of cleared) {
      log.append({ type: "inbox_consumed", inboxId: event.id });
      this.waiters.get(event.id)?.(notRun("cancelled", "removed from the queue"));
      this.waiters.delete(event.id);
    }
    void log.flush().catch(() => {});
    return cleared;
  }

  /** Whether runnable inputs are queued (none held back by an interrupt or a restart). */
  hasRunnable(): boolean {
    if (!this.s.awake) return false; // a session sleeps with an empty inbox
    return this.inbox().queue.some((e) => e.lane !== "interrupt" && e.seq > this.interruptedAt);
  }

  /**
   * How many inputs the next turn would take now (the `idle` point of the inbox policy), 0 when
   * none is runnable: what the session chart's doorbell decides "again or idle" from.
   */
  runnableCount(): number {
    return this.hasRunnable() ? this.takeAt(IDLE).events.length : 0;
  }

  /**
   * Polls the inbox at `point` of the running turn: logs the interrupts recorded, and makes each
   * input taken a user message of the turn. Returns how many inputs were taken.
   */
  poll(point: PollPoint): number {
    const { interrupts, events } = this.takeAt(point);
    for (const event of interrupts) this.consume(event, false);
    for (const event of events) this.consume(event, true);
    return events.length;
  }

  /**
   * Takes the next turn's inputs (the `idle` point): records the interrupts, consumes the
   * inputs (the turn makes them its user messages). Returns them and the seq of the last
   * consumption; none when the policy reads no input lane between turns.
   */
  takeTurn(): { events: InboxEvent[]; consumedSeq: number } {
    const { interrupts, events } = this.takeAt(IDLE);
    for (const event of interrupts) this.consume(event, false);
    let consumedSeq = 0;
    for (const event of events) consumedSeq = this.consume(event, false);
    return { events, consumedSeq };
  }

  /** The prompt waiting for input `id`'s turn, taken (undefined: none waits). */
  takeWaiter(id: string): ((result: PromptResult) => void) | undefined {
    const resolve = this.waiters.get(id);
    this.waiters.delete(id);
    return resolve;
  }

  /** Answers every waiting prompt with `result(id)` (a close). */
  answerAll(result: (id: string) => PromptResult): void {
    for (const [id, resolve] of this.waiters) resolve(result(id));
    this.waiters.clear();
  }

  private takeAt(point: PollPoint) {
    const { drain, lanesToDrain } = this.s.options;
    return pollInbox(this.inbox(), point, drain, lanesToDrain);
  }

  /** The inputs the runner may take: those whose entry is durable (see `durableInbox`). */
  private inbox() {
    return durableInbox(this.s.log.inbox(), this.s.log.durableSeq);
  }

  /** Records `event` consumed (and, `asMessage`, as a user message of the turn); returns the consume entry's seq. */
  private consume(event: InboxEvent, asMessage: boolean): number {
    const { log } = this.s;
    const { seq } = log.append({ type: "inbox_consumed", inboxId: event.id });
    if (asMessage) {
      log.append({
        type: "user_message",
        text: event.body,
        ...(event.parts ? { parts: [...event.parts] } : {}),
        inboxId: event.id,
        turnId: this.s.runner.current?.turnId,
      });
    }
    this.s.emit({ type: "inbox.consumed", inboxId: event.id, lane: event.lane });
    return seq;
  }
}
