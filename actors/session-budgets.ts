import { type Budget, type BudgetKind, NO_SPEND, type Spend } from "../contracts/budget.ts";
import type { Clock } from "../contracts/clock.ts";
import { addSpend, type ScopeBudget } from "../machines/policies/budget.ts";
import type { SessionLog } from "../session/log.ts";
import { spendOf } from "../session/spend.ts";

/** Whether a budget has any cap. */
const capped = (b: Budget) => Object.values(b).some((v) => typeof v === "number" && v > 0);

/**
 * An agent's budget (`createAgent({ budget })`) and what its sessions spent in this process:
 * each turn's spend is added when it ends, so a turn sees the other sessions' spend as of its
 * own start.
 */
export class AgentSpend {
  private total: Spend = NO_SPEND;
  private estimateTold = false;

  constructor(
    readonly budget: Budget,
    private readonly onProblem?: (message: string) => void,
  ) {}

  /**
   * Tells `createAgent({ onProblem })` of a charging problem; with `once`, only the first time
   * this agent tells of one (the first response charged by Keel's estimate).
   */
  problem(message: string, once = false): void {
    if (once && this.estimateTold) return;
    if (once) this.estimateTold = true;
    try {
      this.onProblem?.(message);
    } catch {
      // Contract: must not throw; a sink that does loses its message, not the turn.
    }
  }

  get spent(): Spend {
    return this.total;
  }

  add(spent: Spend): void {
    this.total = addSpend(this.total, spent);
  }
}

export interface SessionBudgetsOptions {
  log: SessionLog;
  clock: Clock;
  /** The session's budget (`agent.session(id, { budget })`). */
  session: Budget;
  /** Each prompt's budget, defaults filled in. */
  prompt: Budget;
  /** The prompt caps that are Keel's defaults. */
  promptDefaulted: readonly BudgetKind[];
  agent?: AgentSpend;
}

/**
 * The budgets wider than a turn, for one session (docs/embedding.md, "Budgets"): the prompt's
 * (one input's turn and every acceptance round after it), the session's (continued from its
 * log when it reopens: `session/spend.ts`) and the agent's. Holds what each spent; the turn
 * chart decides when one is spent (`scopes()` is its input, machines/policies/budget.ts).
 *
 * Lifecycle: `load()` before the session's first turn; `promptStarted()` when a run takes an
 * input; `turnEnded(spend)` after each turn; `promptEnded()` when its result is given.
 */
export class SessionBudgets {
  private session: Spend | undefined;
  private prompt: { spent: Spend; startedAt: number } | undefined;
  private estimated = false;

  constructor(private readonly o: SessionBudgetsOptions) {}

  /** Lets go of the log while the session sleeps; `rebind` takes the reopened one. */
  detach(): void {
    this.o.log = undefined as unknown as SessionLog;
  }

  /**
   * Works on `log`, the session's log reopened after a sleep: the session's spend, read once,
   * carries over. Returns itself.
   */
  rebind(log: SessionLog): this {
    this.o.log = log;
    return this;
  }

  /** Reads what the session spent from its log (once; only when the session has a budget). */
  async load(): Promise<void> {
    if (this.session || !capped(this.o.session)) return;
    await this.o.log.loadHistory();
    this.session = spendOf(this.o.log.entries());
  }

  promptStarted(): void {
    this.prompt = { spent: NO_SPEND, startedAt: this.o.clock.now() };
  }

  promptEnded(): void {
    this.prompt = undefined;
  }

  /** What the current prompt spent so far (its turns), if one runs. */
  get promptSpent(): Spend | undefined {
    return this.prompt?.spent;
  }

  /** True the first time a response of this session is charged by Keel's estimate. */
  firstEstimate(): boolean {
    if (this.estimated) return false;
    this.estimated = true;
    return true;
  }

  /** A charging problem, told to the agent's `onProblem` (see `AgentSpend.problem`). */
  problem(message: string, once = false): void {
    this.o.agent?.problem(message, once);
  }

  /** A turn's spend (its responses, usage, cost, and wall time) adds to every scope. */
  turnEnded(spent: Spend): void {
    if (this.prompt) this.prompt.spent = addSpend(this.prompt.spent, spent);
    if (this.session) this.session = addSpend(this.session, spent);
    this.o.agent?.add(spent);
  }

  /** The wider scopes with a cap, each with what it has spent now (the turn chart's input). */
  scopes(): ScopeBudget[] {
    const out: ScopeBudget[] = [];
    const { prompt, session, agent, promptDefaulted, clock } = this.o;
    if (this.prompt && capped(prompt)) {
      const timeMs = Math.max(0, clock.now() - this.prompt.startedAt);
      out.push({
        scope: "prompt",
        budget: prompt,
        spent: { ...this.prompt.spent, timeMs },
        defaulted: promptDefaulted,
      });
    }
    if (capped(session)) {
      out.push({ scope: "session", budget: session, spent: this.session ?? NO_SPEND });
    }
    if (agent && capped(agent.budget)) {
      out.push({ scope: "agent", budget: agent.budget, spent: agent.spent });
    }
    return out;
  }
}
