/**
 * The sessions the HTTP handler serves, each with what follows it: its event feed
 * (session-feed.ts) and its turns as UI message streams (ui-turns.ts). A session is opened from
 * the agent at its first request (`agent.openSession`) and followed until the handler closes or
 * the session is closed (a later request opens it again).
 */
import type { Agent } from "../actors/agent-options.ts";
import type { Session } from "../actors/session.ts";
import { HttpError } from "./http-error.ts";
import { SessionFeed } from "./session-feed.ts";
import { UiTurns } from "./ui-turns.ts";

/** One served session. */
export interface Hub {
  session: Session;
  feed: SessionFeed;
  ui: UiTurns;
}

const SESSION_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

/** A session id from a path or a body, checked: 1–128 of `A-Z a-z 0-9 _ . : -`. */
export function checkSessionId(id: string): string {
  if (!SESSION_ID.test(id)) {
    throw new HttpError(
      400,
      "INVALID_BODY",
      `session id ${JSON.stringify(id.slice(0, 140))} is not valid: use 1–128 of A-Z a-z 0-9 _ . : -`,
    );
  }
  return id;
}

/** The served sessions of one handler (see the file's comment). */
export class SessionHubs {
  private readonly hubs = new Map<string, Promise<Hub>>();

  constructor(
    private readonly agent: Agent,
    private readonly replayBytes: number,
  ) {}

  /** The hub of session `id`, opened (and loaded from the store) if it is not yet. */
  get(id: string): Promise<Hub> {
    checkSessionId(id);
    const known = this.hubs.get(id);
    if (known) {
      return known.then((hub) => {
        if (!hub.session.closed) return hub;
        if (this.hubs.get(id) === known) this.drop(id, hub);
        return this.get(id);
      });
    }
    const opening = this.agent.openSession(id).then((session) => {
      const feed = new SessionFeed(session, this.agent.store, this.replayBytes);
      return { session, feed, ui: new UiTurns(session) };
    });
    this.hubs.set(id, opening);
    opening.catch(() => this.hubs.delete(id));
    return opening;
  }

  /** Whether session `id` is served now. */
  has(id: string): boolean {
    return this.hubs.has(id);
  }

  /** Stops following every session (the sessions stay open: they are the agent's). */
  async close(): Promise<void> {
    const all = [...this.hubs.entries()];
    this.hubs.clear();
    for (const [, opening] of all) {
      const hub = await opening.catch(() => undefined);
      hub?.feed.close();
      hub?.ui.close();
    }
  }

  private drop(id: string, hub: Hub): void {
    hub.feed.close();
    hub.ui.close();
    this.hubs.delete(id);
  }
}
