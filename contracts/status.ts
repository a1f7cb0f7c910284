// Statuses every layer shares: how a turn, an attempt and a call ended, and the inbox lanes.

/** How a turn ended: its run status (not whether its task was accepted). */
export type TurnStatus = "completed" | "cancelled" | "failed" | "budget_exhausted";
/**
 * Why a `failed` turn failed, when the cause is the runtime's and not the model's or a tool's
 * (a stable code beside the free-text reason):
 * - `STORE_FAILED`: the session store refused a write of the turn (a full disk, a lost
 *   connection); what the turn did after the last durable write is not in the log. The entries
 *   stay queued and are written when the store takes writes again.
 * - `LEASE_LOST`: another runner holds the session now (this runner's lease expired or was
 *   taken over, and the store fenced its write); this runner stopped at once and wrote nothing
 *   more. The session object follows the new owner.
 * - `CRASH_LOOP`: the turn was cut by a crash and continued (`recovery: "continue"`) as many
 *   times as `maxContinuations` allows, and cut again: it is closed rather than continued.
 */
export type TurnFailureCode = "STORE_FAILED" | "LEASE_LOST" | "CRASH_LOOP";
/** How one model request ended; an interrupted or failed one never enters the projection. */
export type AttemptStatus = "completed" | "interrupted" | "failed";
/** How a call ended. `not_executed`: it never started (cancelled while queued, gated, invalid). */
export type CallOutcome = "completed" | "failed" | "cancelled" | "unknown" | "not_executed";
/**
 * When an input is read, named in the docs, the trace and the inspector as the interrupt, steer
 * and follow-up lanes: `interrupt` at once; `next-step` (the steer lane) after the current batch
 * commits, before the next model request; `next-turn` (the follow-up lane) when the turn would
 * otherwise end. The values are stored in logs, so they keep these spellings.
 */
export type InboxLane = "interrupt" | "next-step" | "next-turn";
/** Who sent an input. */
export type InboxSource = "user" | "tool" | "job" | "system";
