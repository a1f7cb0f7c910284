import type { AgentEventBody } from "../contracts/events.ts";
import type { IdGenerator } from "../contracts/ids.ts";
import type { Message, Usage } from "../contracts/messages.ts";
import type { Model } from "../contracts/model.ts";
import { estimateTextTokens, messageTokens, type TextCounter } from "../contracts/tokens.ts";
import type { CompactionMode } from "../machines/turn.machine.ts";
import { type CompactionResult, compactSession } from "../session/compaction.ts";
import type { CutRule, TokenEstimator } from "../session/compaction-cuts.ts";
import { ContextBudget, type ContextUsage } from "../session/context-budget.ts";
import type { SessionLog } from "../session/log.ts";
import type { Registry } from "../tools/registry.ts";
import { modelSummarizer } from "./model-summarizer.ts";

/** `createAgent({ context })`: the context budget and automatic compaction. */
export interface ContextOptions {
  /**
   * Compact automatically before a model request whose budget (used + reserve) exceeds this
   * fraction of the model's window. Default 0.85; `false`: never (overflow recovery still runs).
   */
  compactAt?: number | false;
  /**
   * Recent context an automatic compaction keeps, in tokens. Default: a quarter of the window
   * less the reserve, at most 20 000. An overflow compaction keeps half of it.
   */
  keepRecentTokens?: number;
  /** Harder compactions after a context-overflow error, per turn (not retries). Default 1. */
  overflowRecoveries?: number;
  /**
   * Registers the built-in `read_result` tool, with which the model restores a tool result that
   * `session.clearToolResults()` cleared. Default false (then `clearToolResults` refuses).
   */
  readResultTool?: boolean;
  /** @internal Test seam: where compaction may cut (mutation tests only). */
  cutPoints?: CutRule;
}

/** Checks `options`; throws a `TypeError` that names the option and the expected value. */
export function checkContextOptions(options: ContextOptions | undefined): void {
  if (!options) return;
  const { compactAt, keepRecentTokens, overflowRecoveries } = options;
  if (compactAt !== undefined && compactAt !== false && !(compactAt > 0 && compactAt <= 1)) {
    throw new TypeError(
      `createAgent: \`context.compactAt\` must be a fraction of the window in (0, 1] or false, got ${String(compactAt)}`,
    );
  }
  if (
    keepRecentTokens !== undefined &&
    !(Number.isInteger(keepRecentTokens) && keepRecentTokens >= 0)
  ) {
    throw new TypeError(
      `createAgent: \`context.keepRecentTokens\` must be an integer ≥ 0 (tokens), got ${String(keepRecentTokens)}`,
    );
  }
  if (
    overflowRecoveries !== undefined &&
    !(Number.isInteger(overflowRecoveries) && overflowRecoveries >= 0)
  ) {
    throw new TypeError(
      `createAgent: \`context.overflowRecoveries\` must be an integer ≥ 0, got ${String(overflowRecoveries)}`,
    );
  }
}

export interface SessionContextDeps {
  log: SessionLog;
  model: Model;
  registry: Registry;
  ids: IdGenerator;
  /** The session's emit. Contract: must not throw. */
  emit: (event: AgentEventBody) => void;
  options: ContextOptions;
}

/** What a compaction of the turn reports back to the chart. */
export interface CompactionReport {
  ok: boolean;
  reason?: string;
}

/**
 * One session's context: the instructions in force, the running budget of the next request
 * and the compactions the turn chart asks for. Lives as long as the session object.
 */
export class SessionContext {
  readonly budget: ContextBudget;
  readonly count: TextCounter;
  /** Tokens per message, with the model's tokenizer (compaction's estimator). */
  readonly estimate: TokenEstimator;
  private readonly deps: SessionContextDeps;
  private lastEmitted: ContextUsage | null = null;
  /** After an automatic compaction that could not help: no new try below this `used`. */
  private quietBelow = 0;

  constructor(deps: SessionContextDeps) {
    this.deps = deps;
    const { model } = deps;
    this.count = model.countTokens ?? estimateTextTokens;
    const count = this.count;
    this.estimate = (m: Message) => messageTokens(m, count);
    const window = model.contextWindow ?? Number.POSITIVE_INFINITY;
    this.budget = new ContextBudget({
      source: deps.log,
      count,
      window,
      reserve: model.maxOutputTokens ?? 0,
    });
  }

  /** The instructions in force: the last `settings` entry's on the active path. */
  instructions(): string | undefined {
    const v = this.deps.log.settings().instructions;
    return typeof v === "string" ? v : undefined;
  }

  /** Measures the next request's usage; emits `context.measured` when it changed. */
  measure(): ContextUsage {
    const { registry, model } = this.deps;
    const usage = this.budget.measure(this.instructions(), registry.modelTools(), model.name);
    if (usage !== this.lastEmitted) {
      this.lastEmitted = usage;
      this.deps.emit({
        type: "context.measured",
        used: usage.used,
        window: usage.window,
        reserve: usage.reserve,
        trusted: usage.trusted,
      });
    }
    return usage;
  }

  /** Records a response's provider usage (see `ContextBudget.measured`). */
  measured(usage: Usage | undefined): void {
    this.budget.measured(usage, this.deps.model.name);
  }

  /** Whether `usage` crossed the automatic compaction threshold. */
  compactDue(usage: ContextUsage): boolean {
    const at = this.deps.options.compactAt ?? 0.85;
    if (at === false || !Number.isFinite(usage.window)) return false;
    return usage.used + usage.reserve > at * usage.window && usage.used >= this.quietBelow;
  }

  /** Recent tokens a compaction of `mode` keeps. */
  keepRecentTokens(mode: CompactionMode): number {
    const { window, reserve } = this.budget;
    const room = Number.isFinite(window) ? window - reserve : 80_000;
    const auto = this.deps.options.keepRecentTokens ?? Math.min(20_000, Math.floor(room / 4));
    return mode === "overflow" ? Math.floor(auto / 2) : auto;
  }

  /**
   * Compacts the session's history (docs/long-sessions.md) at the latest legal cut that keeps
   * `keepRecentTokens(mode)`; every failure leaves the old baseline. Emits `context.compacted`.
   */
  async compact(mode: CompactionMode, signal: AbortSignal): Promise<CompactionReport> {
    const { log, model, ids, emit } = this.deps;
    const keepRecentTokens = this.keepRecentTokens(mode);
    let result: CompactionResult;
    try {
      result = await compactSession(log, {
        summarize: modelSummarizer(model, ids),
        keepRecentTokens,
        estimate: this.estimate,
        signal,
        cutPoints: this.deps.options.cutPoints,
      });
    } catch (error) {
      result = { ok: false, code: "SUMMARY_FAILED", message: String(error), attempts: [] };
    }
    const used = this.budget.current?.used ?? 0;
    if (result.ok) {
      this.quietBelow = 0;
      emit({
        type: "context.compacted",
        mode,
        ok: true,
        tokensBefore: result.tokensBefore,
        tokensAfter: result.tokensAfter,
      });
      return { ok: true };
    }
    // Do not try again every step: only once the context grew by a tenth of the window.
    const window = this.budget.window;
    this.quietBelow = used + (Number.isFinite(window) ? Math.ceil(window / 10) : 0);
    emit({
      type: "context.compacted",
      mode,
      ok: false,
      reason: `${result.code}: ${result.message}`,
    });
    const reason =
      mode === "overflow"
        ? `context overflow (not retried as it was): the request exceeds the model's context window (${window} tokens) and a compaction keeping ${keepRecentTokens} recent tokens did not help (${result.code}: ${result.message}); clear old tool results (session.clearToolResults), compact with a smaller keepRecentTokens, or use a model with a larger window`
        : `${result.code}: ${result.message}`;
    return { ok: false, reason };
  }
}
