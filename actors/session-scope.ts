import type { AgentEvent, AgentEventBody } from "../contracts/events.ts";
import type { UserPart } from "../contracts/messages.ts";
import { type Refusal, refuse } from "../contracts/refusal.ts";
import type { TurnFailureCode, TurnStatus } from "../contracts/status.ts";
import type { TurnResult } from "../contracts/turn-result.ts";
import type { PollPoint } from "../machines/policies/inbox.ts";
import type { HandoffRecord } from "../session/entries.ts";
import type { SessionLog } from "../session/log.ts";
import type { PostedInput } from "../session/store.ts";
import type { SessionChart } from "./session-chart.ts";
import { SessionLogSlot } from "./session-log-slot.ts";
import type { PromptResult, SessionOptions, SessionRole } from "./session-options.ts";
import type { TurnDeps } from "./turn-scope.ts";

/** A turn's inputs: the user's messages it starts with. */
export type TurnInputs = readonly { text: string; parts?: readonly UserPart[]; inboxId?: string }[];

/** What the other parts ask of the runner (actors/session-runner.ts). */
export interface RunnerPort {
  /** The running turn, if any. */
  readonly current: { readonly turnId: string } | undefined;
  /** Rings the coordinator's doorbell: runnable inputs are queued. */
  wake(): void;
  /** Cancels the running execution and turn (`status`/`code` for a runtime failure). */
  cancelRunning(reason: string, status?: TurnStatus, code?: TurnFailureCode): void;
  /**
   * Runs one turn with `inputs` (the acceptance loop's follow-ups); not at all when
   * `cancelled()` says so just before it would start.
   */
  runTurn(inputs: TurnInputs, cancelled?: () => boolean): Promise<TurnResult>;
  /** What the session chart counts as runnable: the inbox's next turn, or a cut turn to continue. */
  runnable(): number;
  /** A takeover's recovery left turn `turnId` open: the next run continues it first. */
  continueAfterTakeover(turnId: string | undefined): void;
}

/** What the other parts ask of the inbox (actors/session-inputs.ts). */
export interface InputsPort {
  /** Polls the inbox at `point` of the running turn; returns how many inputs were taken. */
  poll(point: PollPoint): number;
  /** Inputs restored from the log wait for `resume()` or a new input (at open and takeover). */
  holdRestored(): void;
  /** Records interrupts a stopped process received and never recorded; true when there were. */
  recordStrandedInterrupts(): boolean;
  /** Takes an input another process posted into the log; true when it is new and runnable. */
  takePosted(input: PostedInput): Promise<boolean>;
  /** Whether inputs are queued that a worker should run (none held back by a user's interrupt). */
  pendingWork(): boolean;
  /** Makes these prompts' waiters this session's (a takeover: it runs their inputs now). */
  adoptWaiters(waiters: Map<string, (result: PromptResult) => void>): void;
  /** Queued inputs run again: what an interrupt or a restart held back. */
  resume(): void;
  /** Queued inputs are runnable again, without ringing the doorbell (a takeover's end does). */
  release(): void;
  /** How many inputs the next turn would take now (0: none runnable). */
  runnableCount(): number;
}

/** What the other parts ask of the lease (actors/session-lease.ts). */
export interface LeasePort {
  /** The lease was lost: stop at once, follow the new owner. */
  lost(why: string): void;
  /** `resolve` answers input `id`, which the owner runs: settled from the owner's log. */
  forward(id: string, resolve: (result: PromptResult) => void): void;
  /** Why the lease was lost last: the reason the running turn ends with. */
  readonly lostReason: string | undefined;
  /** Posts an input to the owner's inbox (a follower's input); durable when it resolves. */
  post(input: PostedInput): Promise<void>;
}

/** What the other parts ask of the acceptance facade (actors/session-acceptance.ts). */
export interface AcceptancePort {
  readonly busy: boolean;
  interrupt(reason: string): void;
  /** The checks (and the loop) after a turn; the prompt's result with both layers. */
  afterTurn(output: PromptResult): Promise<PromptResult>;
  /** The note telling the model what a handoff's verified facts are now (its checks re-run). */
  regressionText(record: HandoffRecord): Promise<string>;
  /** A turn of the acceptance loop (the chart's follow-up). */
  runLoopTurn(text: string, cancelled: () => boolean): Promise<TurnResult>;
}

/**
 * What the parts of one session share: its id and options, its log (replaced when a follower
 * takes the session over) and the per-turn dependencies built on it, its role across processes,
 * its listeners, and the ports the parts reach each other by: `SessionInputs` (the inbox, owned
 * by the log), `SessionRunner` (the coordinator and the loop that runs turns), `SessionLease`
 * (owner and follower across processes) and `SessionAcceptance` (checks, the loop, handoffs).
 * `Session` (actors/session.ts) makes the parts and is their public face.
 */
export class SessionScope {
  readonly id: string;
  readonly options: SessionOptions;
  /** The log and the per-turn dependencies built on it, awake or asleep. */
  readonly slot: SessionLogSlot;
  role: SessionRole = "solo";
  /** Resolves once the log is loaded and recovery ran (`session.ready`). */
  ready!: Promise<void>;
  /** The log is loaded and recovery ran: the synchronous readers may run. */
  opened = false;
  /** `close()` was called (its promise). */
  closing: Promise<void> | undefined;
  private listenerSet: Set<(event: AgentEvent) => void> | undefined;
  /** The `Session` these parts belong to (what an instructions function is called with). */
  session!: object;

  /** The session chart's host (machines/session.machine.ts): where the lifecycle is decided. */
  chart!: SessionChart;
  /** Takes a log as the session's state (`Session.adopt`): at open and at a takeover. */
  adopt!: (log: SessionLog) => Promise<void>;
  runner!: RunnerPort;
  inputs!: InputsPort;
  lease: LeasePort | undefined;
  acceptance: AcceptancePort | undefined;

  constructor(options: SessionOptions) {
    this.id = options.sessionId;
    this.options = options;
    this.slot = new SessionLogSlot(this);
  }

  /** `session.subscribe` listeners (made at the first; let go empty when the session sleeps). */
  get listeners(): Set<(event: AgentEvent) => void> {
    this.listenerSet ??= new Set();
    return this.listenerSet;
  }

  /** Whether anyone listens to this session's events. */
  get listened(): boolean {
    return (this.listenerSet?.size ?? 0) > 0;
  }

  /**
   * The session's log (undefined before it is open). A session that slept reopens it here,
   * synchronously, from the store's checkpoint: every reader and input finds it as before.
   */
  get log(): SessionLog {
    return this.slot.log;
  }

  set log(log: SessionLog) {
    this.slot.set(log);
  }

  /** Whether the log is in memory now (false before it is open and while the session sleeps). */
  get awake(): boolean {
    return this.slot.awake;
  }

  /**
   * Lets the log and the per-turn dependencies built on it go (`SessionLogSlot.sleep`), and
   * the listener set when empty: what an idle session holds is then its options and parts.
   */
  sleep(): void {
    this.slot.sleep();
    if (this.listenerSet?.size === 0) this.listenerSet = undefined;
  }

  /**
   * The per-turn dependencies built on the log (undefined before it is open). Built at the
   * first read, not at open: a session that is opened and never prompted holds none of them
   * (its context budget, spill writer, permission broker).
   */
  get deps(): TurnDeps {
    return this.slot.deps;
  }

  get follower(): boolean {
    return this.role === "follower";
  }

  setRole(role: SessionRole): void {
    this.role = role;
    if (role === "owner") this.chart.send({ type: "role.owner" });
    else if (role === "follower") this.chart.send({ type: "role.follower" });
    this.options.lease?.onRole?.(role);
  }

  /**
   * The one place a live event is stamped: `sessionId` and `at` are set here, once, and the
   * same object goes to the inspector's sink and to every listener.
   */
  emit(body: AgentEventBody): void {
    const publish = this.options.publish;
    const listeners = this.listenerSet;
    if (!listeners?.size && !publish) return;
    // Not `{ ...body, sessionId, at }`: each property after a spread is a slow runtime call on
    // Node 20, paid per event.
    const event = Object.assign({}, body, {
      sessionId: this.id,
      at: this.options.now(),
    }) as AgentEvent;
    publish?.(event);
    if (listeners)
      for (const listener of listeners) {
        try {
          listener(event);
        } catch (err) {
          this.options.logger().warn({ err }, "a session listener threw");
        }
      }
  }

  /**
   * The log, once open. Reading before then would show an empty history that looks exactly
   * like a lost one, so it throws instead.
   */
  openLog(what: string): SessionLog {
    if (!this.opened) {
      throw new Error(
        `session ${this.id}: ${what}() was called before the session finished opening; use \`await agent.openSession(${JSON.stringify(this.id)})\` (or \`await session.ready\`) before reading it`,
      );
    }
    return this.log;
  }

  /** The refusal of a change while a turn runs, or undefined when none runs. */
  turnOpen(what: string): Refusal<"TURN_OPEN"> | undefined {
    const turn = this.runner.current;
    const work = this.chart.work().value;
    if (!turn && work !== "running" && work !== "stopping") return undefined;
    return refuse(
      "TURN_OPEN",
      `cannot ${what} while ${turn ? `turn ${turn.turnId}` : "a turn"} is running; interrupt it or await session.awaitIdle() first`,
    );
  }
}
