import type { Logger } from "pino";
import type { Clock } from "../contracts/clock.ts";

/** What the agent's dormancy asks of a session (actors/session.ts). */
export interface Sleeper {
  /** Lets the session's log go if it is still quiet; resolves to whether it slept. */
  sleep(): Promise<boolean>;
}

/**
 * Puts an agent's idle sessions to sleep `afterMs` after they went idle (`dormantAfterMs`): a
 * session that slept holds no log, projection or per-turn dependencies, and its next read or
 * input reopens them from the store's checkpoint. One timer per agent, for the earliest
 * deadline, and not one that keeps the process alive: sessions are kept in the order they went
 * idle, so a sweep stops at the first one not yet due.
 */
export class Dormancy {
  /** Each idle session and when it sleeps; insertion order is deadline order (one `afterMs`). */
  private readonly due = new Map<Sleeper, number>();
  private timer: unknown;
  private armedFor = Number.POSITIVE_INFINITY;

  constructor(
    private readonly afterMs: number,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** `session` went idle: it sleeps `afterMs` from now unless it works again meanwhile. */
  rested(session: Sleeper): void {
    this.due.delete(session); // to the end: the latest deadline
    this.due.set(session, this.clock.now() + this.afterMs);
    this.arm();
  }

  /** `session` closed: it is not put to sleep. */
  forget(session: Sleeper): void {
    this.due.delete(session);
  }

  /** The agent closed: no timer is left behind. */
  stop(): void {
    this.due.clear();
    this.disarm();
  }

  private arm(): void {
    const first = this.due.values().next();
    if (first.done) {
      this.disarm();
      return;
    }
    const at = first.value;
    if (this.timer !== undefined && this.armedFor <= at) return;
    this.disarm();
    this.armedFor = at;
    const handle = this.clock.setTimeout(
      () => {
        this.timer = undefined;
        this.armedFor = Number.POSITIVE_INFINITY;
        this.sweep();
      },
      Math.max(0, at - this.clock.now()),
    );
    // An idle agent's timer does not keep the process alive (Node's timers have `unref`).
    (handle as { unref?: () => void } | undefined)?.unref?.();
    this.timer = handle;
  }

  private disarm(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.armedFor = Number.POSITIVE_INFINITY;
  }

  private sweep(): void {
    const now = this.clock.now();
    for (const [session, at] of this.due) {
      if (at > now) break;
      this.due.delete(session);
      session.sleep().catch((err) => {
        // It stays awake: the checkpoint could not be written (the store refused or closed).
        this.logger.warn({ err }, "an idle session could not go to sleep; it stays in memory");
      });
    }
    this.arm();
  }
}
