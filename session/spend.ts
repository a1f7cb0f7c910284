import { NO_SPEND, type Spend } from "../contracts/budget.ts";
import type { LogEntry } from "./entries.ts";

/**
 * What a session's log says it spent (docs/embedding.md, "Budgets"), over every branch: one
 * step per committed model response (`assistant_message`), their provider usage and cost, and
 * the wall time of its turns (`turn_start` to the turn's last `turn_end`). A reopened session
 * continues its session budget from this. This is a pure function.
 */
export function spendOf(entries: readonly LogEntry[]): Spend {
  const spent: Spend = { ...NO_SPEND };
  const started = new Map<string, number>();
  const ended = new Map<string, number>();
  for (const e of entries) {
    switch (e.type) {
      case "assistant_message":
        spent.steps++;
        spent.inputTokens += e.usage?.inputTokens ?? 0;
        spent.outputTokens += e.usage?.outputTokens ?? 0;
        spent.cost += e.cost ?? 0;
        break;
      case "compaction": // its summary requests: tokens and cost, not a step
        spent.inputTokens += e.usage?.inputTokens ?? 0;
        spent.outputTokens += e.usage?.outputTokens ?? 0;
        spent.cost += e.cost ?? 0;
        break;
      case "turn_start":
        started.set(e.turnId, e.at);
        break;
      case "turn_end":
        ended.set(e.turnId, e.at);
        break;
    }
  }
  for (const [turnId, end] of ended) {
    const start = started.get(turnId);
    if (start !== undefined && end > start) spent.timeMs += end - start;
  }
  return spent;
}
