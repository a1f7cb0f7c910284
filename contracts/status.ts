// Statuses every layer shares: how a turn, an attempt and a call ended, and the inbox lanes.

/** How a turn ended: its run status (not whether its task was accepted). */
export type TurnStatus = "completed" | "cancelled" | "failed" | "budget_exhausted";
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
