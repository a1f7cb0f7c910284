// Statuses every layer shares: how a turn, an attempt and a call ended, and the inbox lanes.

export type TurnStatus = "completed" | "cancelled" | "failed" | "budget_exhausted";
export type AttemptStatus = "completed" | "interrupted" | "failed";
/** How a call ended. `not_executed`: it never started (cancelled while queued, gated, invalid). */
export type CallOutcome = "completed" | "failed" | "cancelled" | "unknown" | "not_executed";
export type InboxLane = "interrupt" | "next-step" | "next-turn";
export type InboxSource = "user" | "tool" | "job" | "system";
