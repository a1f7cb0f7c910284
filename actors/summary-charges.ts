import type { ModelPrice } from "../contracts/budget.ts";
import type { Usage } from "../contracts/messages.ts";
import { messageTokens, type TextCounter } from "../contracts/tokens.ts";
import { chargeOf, costOf } from "../machines/policies/budget.ts";
import type { SummaryCall } from "./model-summarizer.ts";

/** What the summary requests of compactions were charged since it was last taken. */
export interface SummaryCharge {
  usage: Usage;
  cost?: number;
  /** Set when some of it is Keel's estimate. */
  usageEstimated?: true;
}

/**
 * Charges compaction's summary requests (every request counts, docs/embedding.md "Budgets"):
 * `record` each completed summary response (its reported usage when plausible, else the
 * estimate of what was sent and what came back); `peek` is what a compaction entry records,
 * `take` what the turn adds to its spend.
 */
export class SummaryCharges {
  private pending: SummaryCharge | undefined;

  constructor(
    private readonly deps: {
      count: TextCounter;
      price?: ModelPrice;
      window?: number;
      /** A problem with the reported usage. Contract: must not throw. */
      warn: (message: string) => void;
    },
  ) {}

  /** Charges one completed summary response. */
  readonly record = (call: SummaryCall): void => {
    const { count, price, window, warn } = this.deps;
    let input = 0;
    for (const m of call.request) input += messageTokens(m, count);
    const estimate = { inputTokens: input, outputTokens: count(call.text) };
    const charge = chargeOf(call.usage, estimate, window);
    if (charge.problem) warn(`compaction summary: ${charge.problem}`);
    const p = this.pending ?? { usage: { inputTokens: 0, outputTokens: 0 } };
    p.usage = {
      inputTokens: p.usage.inputTokens + charge.usage.inputTokens,
      outputTokens: p.usage.outputTokens + charge.usage.outputTokens,
    };
    if (price) p.cost = (p.cost ?? 0) + costOf(charge.usage, price);
    if (charge.estimated) p.usageEstimated = true;
    this.pending = p;
  };

  /** What is charged and not yet taken (a copy), or undefined. */
  peek(): SummaryCharge | undefined {
    return this.pending && { ...this.pending, usage: { ...this.pending.usage } };
  }

  /** What is charged and not yet taken; clears it. */
  take(): SummaryCharge | undefined {
    const p = this.pending;
    this.pending = undefined;
    return p;
  }
}
