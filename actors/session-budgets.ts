import {
  type Budget,
  type BudgetKind,
  type BudgetStop,
  NO_SPEND,
  type Spend,
} from "../contracts/budget.ts";
import type { Clock } from "../contracts/clock.ts";
import { addSpend, type ScopeBudget } from "../machines/policies/budget.ts";
import type { SessionLog } from "../session/log.ts";
import { spendOf } from "../session/spend.ts";
import type { SharedSpend } from "./postgres-agent-budget.ts";

/** `s` with every count negated (to give a hold back). */
const negate = (s: Spend): Spend => ({
  steps: -s.steps,
  inputTokens: -s.inputTokens,
  outputTokens: -s.outputTokens,
  cost: -s.cost,
  timeMs: -s.timeMs,
});

/** The caps a reservation checks (time is the turns' deadline, not reserved). */
const RESERVED: readonly { kind: BudgetKind; field: keyof Budget; of: (s: Spend) => number }[] = [
  { kind: "steps", field: "maxSteps", of: (s) => s.steps },
  { kind: "tokens", field: "maxSpendTokens", of: (s) => s.inputTokens + s.outputTokens },
  { kind: "inputTokens", field: "maxInputTokens", of: (s) => s.inputTokens },
  { kind: "outputTokens", field: "maxOutputTokens", of: (s) => s.outputTokens },
  { kind: "cost", field: "maxCost", of: (s) => s.cost },
];

/** Whether a budget has any cap. */
const capped = (b: Budget) => Object.values(b).some((v) => typeof v === "number" && v > 0);

/**
 * An agent's budget (`createAgent({ budget })`) and what its sessions spent in this process:
 * each turn's spend is added when it ends, so a turn sees the other sessions' spend as of its
 * own start.
 */
export class AgentSpend {
  private total: Spend = NO_SPEND;
  /** What the requests in flight may spend (`reserve`), not yet charged. */
  private held: Spend = NO_SPEND;
  private estimateTold = false;

  constructor(
    readonly budget: Budget,
    private readonly onProblem?: (message: string) => void,
    /** Spend shared with the agent's other processes (`createAgent({ sharedSpend })`). */
    private readonly shared?: SharedSpend,
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

  /** What the agent spent: in every process sharing its spend, else in this one. */
  get spent(): Spend {
    return this.shared ? this.shared.spent() : this.total;
  }

  add(spent: Spend): void {
    this.total = addSpend(this.total, spent);
    this.shared?.charge(spent);
  }

  /**
   * Reserves what one request may spend (`step`: its input estimate and the output reserve, at
   * the model's price) before it is sent, so concurrent sessions cannot all start requests the
   * budget covers only once. Refuses (returns the stop) when what is charged, what other
   * requests hold and `step` together pass a cap of steps, tokens or cost. The returned
   * `release` gives the hold back (call it once the response is charged, or the request ended).
   */
  reserve(step: Spend): { ok: true; release: () => void } | { ok: false; stop: BudgetStop } {
    this.shared?.refresh(); // the next request's check sees the other processes' latest charges
    const charged = this.spent;
    const now = addSpend(charged, this.held);
    for (const d of RESERVED) {
      const limit = this.budget[d.field];
      if (limit === undefined || !(limit > 0)) continue;
      if (d.of(now) + d.of(step) > limit || d.of(now) >= limit) {
        const spent = d.of(charged);
        return {
          ok: false,
          stop: { scope: "agent", kind: d.kind, limit, spent, defaulted: false },
        };
      }
    }
    this.held = addSpend(this.held, step);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.held = addSpend(this.held, negate(step));
      },
    };
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

  /**
   * A turn's spend (its responses, usage, cost, and wall time) adds to the prompt and the
   * session; the agent has had its responses as they were charged (`charged`) and takes the
   * turn's time now.
   */
  turnEnded(spent: Spend): void {
    if (this.prompt) this.prompt.spent = addSpend(this.prompt.spent, spent);
    if (this.session) this.session = addSpend(this.session, spent);
    this.o.agent?.add({ ...NO_SPEND, timeMs: spent.timeMs });
  }

  /** A response or summary charged now: the agent's spend takes it at once (others see it). */
  charged(spent: Spend): void {
    this.o.agent?.add(spent);
  }

  /** Reserves one request's worth of the agent's budget (see `AgentSpend.reserve`). */
  reserve(step: Spend): ReturnType<AgentSpend["reserve"]> {
    return this.o.agent ? this.o.agent.reserve(step) : { ok: true, release: () => {} };
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
