import type { Logger } from "pino";
import type { InspectionEvent } from "xstate";
import type { AcceptanceStatus, Evidence } from "../contracts/acceptance.ts";
import type { AgentEvent, AgentEventBody } from "../contracts/events.ts";
import type { Model } from "../contracts/model.ts";
import type { InboxSource, TurnStatus } from "../contracts/status.ts";
import type { TurnResult } from "../contracts/turn-result.ts";
import type { DrainMode, DrainPolicy, PollPoint } from "../machines/policies/inbox.ts";
import type { HandoffRecord } from "../session/entries.ts";
import type { SessionLog } from "../session/log.ts";
import type { LeaseStore, SessionStore } from "../session/store.ts";
import type { AcceptanceHost } from "./acceptance.ts";
import type { TurnDeps } from "./turn-scope.ts";

/**
 * What `session.prompt()` resolves to: how the turn ended (`status`, `reason`, and `code` when
 * the runtime failed it), its final assistant text, its summed provider usage and the number of
 * model requests it sent, as the session's log holds them. With `createAgent({ acceptance })`,
 * also the task's acceptance, a layer of its own: `acceptance` and the `evidence` behind it, and
 * the follow-up `rounds` the acceptance loop sent (their turns' usage and steps are included;
 * `status`, `reason` and `text` are the last turn's).
 */
export interface PromptResult extends TurnResult {
  acceptance?: AcceptanceStatus;
  evidence?: Evidence;
  rounds?: number;
}

/** A prompt that never ran (removed from the queue, cut by a close): nothing said, nothing spent. */
export const notRun = (status: TurnStatus, reason: string): PromptResult => ({
  status,
  reason,
  text: "",
  usage: { inputTokens: 0, outputTokens: 0 },
  steps: 0,
});

/** Options of an input (`prompt`, `steer`, `followUp`, `interrupt`). */
export interface InboxOptions {
  /** Deduplication key: an input whose id was already received is not added twice. */
  id?: string;
  /** Who sent it (default `user`); content never changes permissions, whatever its source. */
  source?: InboxSource;
}

/**
 * @internal What a session's per-turn dependencies learned that outlives a sleep: the context's
 * measured usage and compaction state, the session's spend, the permissions granted "always".
 */
export type CarriedDeps = Pick<TurnDeps, "context" | "budgets" | "permissions"> & {
  /** The log's last seq when the session slept: what is carried holds for that log only. */
  seq: number;
};

/** @internal How the agent makes a session (`agent.session(id)`). */
export interface SessionOptions {
  sessionId: string;
  /** Builds the per-turn dependencies once the log is open. */
  deps: (
    log: SessionLog,
    emit: (e: AgentEventBody) => void,
    poll: (point: PollPoint) => number,
    carried?: CarriedDeps,
  ) => TurnDeps;
  openLog: () => Promise<SessionLog>;
  /**
   * Reopens the log synchronously from the store's checkpoint (memory, SQLite), after the
   * session slept; undefined when the store cannot. Without it the session never sleeps.
   */
  openLogSync?: () => SessionLog | null;
  /** Called when the session is idle again (its runner let go): the agent may put it to sleep. */
  rested?: () => void;
  /** The session's logger (a child of the agent's, made at each call: warnings and errors only). */
  logger: () => Logger;
  now: () => number;
  ids: (prefix?: string) => string;
  drain: { steer: DrainMode; followUp: DrainMode };
  /**
   * The instructions this session runs with (recorded at its first turn when they differ), or a
   * function of the session (the `Session` object: typed `never` here, so this module need not
   * import the class that imports it; `Instructions` in actors/agent.ts is the public type).
   */
  instructions?: string | ((session: never) => string);
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
  /**
   * Closes what a crash left open in the log before anything else runs; `continueTurn`: the cut
   * turn it left open for the runner to continue (actors/continue-turn.ts).
   */
  recover?: (log: SessionLog) => Promise<{ continueTurn?: string }>;
  /** Called once when `close()` has finished (the agent forgets the session then). */
  onClosed?: () => void;
  /** A store shared by processes: run only while holding the session's lease (docs/many-processes.md). */
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
