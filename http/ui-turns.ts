/**
 * One session's turns as UI message streams (ui-chunks.ts): the chunks of the turn that runs,
 * kept from its start so a reader that comes back (a page reloaded mid-stream, the AI SDK's
 * resume) gets the whole message again from its `start` and then the rest as it comes, with
 * nothing missed and nothing twice. A turn's chunks are let go when the next turn starts.
 */

import type { Session } from "../actors/session.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { type UiChunk, UiTurnMapper } from "./ui-chunks.ts";

/** The chunks of one turn so far, and who reads them. */
export interface UiTurn {
  readonly turnId: string;
  readonly chunks: readonly UiChunk[];
  readonly ended: boolean;
  /** Calls `listener` with each chunk added from now; returns the function that stops it. */
  follow(listener: (chunk: UiChunk) => void): () => void;
}

interface TurnState extends UiTurn {
  chunks: UiChunk[];
  ended: boolean;
  mapper: UiTurnMapper;
  listeners: Set<(chunk: UiChunk) => void>;
}

/** See the file's comment. Made by the handler once per open session. */
export class UiTurns {
  private turn: TurnState | undefined;
  /** Inputs waiting for the turn that consumes them: inbox id → resolve. */
  private readonly waiting = new Map<string, (turn: UiTurn) => void>();
  /** Inputs consumed, whose turn has not started yet. */
  private consumed: ((turn: UiTurn) => void)[] = [];
  private readonly unsubscribe: () => void;

  constructor(private readonly session: Session) {
    this.unsubscribe = session.subscribe((event) => this.onEvent(event));
  }

  /** The turn that runs now (its message not finished), if any. */
  get active(): UiTurn | undefined {
    return this.turn && !this.turn.ended ? this.turn : undefined;
  }

  /** Resolves with the turn that consumes the input `inboxId` once it starts. Call before submitting. */
  turnFor(inboxId: string): Promise<UiTurn> {
    return new Promise((resolve) => this.waiting.set(inboxId, resolve));
  }

  /** Forgets an input that will not start a turn (its submit failed). */
  forget(inboxId: string): void {
    this.waiting.delete(inboxId);
  }

  /** Stops following the session. */
  close(): void {
    this.unsubscribe();
  }

  private onEvent(event: AgentEvent): void {
    if (event.type === "inbox.consumed") {
      const resolve = this.waiting.get(event.inboxId);
      if (resolve) {
        this.waiting.delete(event.inboxId);
        this.consumed.push(resolve);
      }
      return;
    }
    if (event.type === "turn.started") this.startTurn(event.turnId);
    const turn = this.turn;
    if (!turn) return;
    const added = turn.mapper.map(event);
    if (added.length === 0) return;
    turn.chunks.push(...added);
    turn.ended = turn.mapper.ended;
    for (const listener of [...turn.listeners]) for (const chunk of added) listener(chunk);
  }

  private startTurn(turnId: string): void {
    const session = this.session;
    const mapper = new UiTurnMapper(turnId, (event) => {
      // Reasoning is not streamed as events: it is read from the committed message's entry,
      // one of the last few of the log.
      const entries = session.entries();
      for (let i = entries.length - 1; i >= Math.max(0, entries.length - 16); i--) {
        const e = entries[i];
        if (e.type === "assistant_message" && e.attemptId === event.attemptId) {
          return e.content.filter((p) => p.type === "reasoning");
        }
      }
      return [];
    });
    const listeners = new Set<(chunk: UiChunk) => void>();
    const state: TurnState = {
      turnId,
      chunks: mapper.start(),
      ended: false,
      mapper,
      listeners,
      follow(listener) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    };
    this.turn = state;
    const consumed = this.consumed;
    this.consumed = [];
    for (const resolve of consumed) resolve(state);
  }
}
