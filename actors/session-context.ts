import type { Clock } from "../contracts/clock.ts";
import type { AgentEventBody } from "../contracts/events.ts";
import type { IdGenerator } from "../contracts/ids.ts";
import type { Message, Usage } from "../contracts/messages.ts";
import type { Model } from "../contracts/model.ts";
import {
  estimateTextTokens,
  headTokens,
  messageTokens,
  type TextCounter,
} from "../contracts/tokens.ts";
import type { CompactionMode } from "../machines/turn.types.ts";
import { type CompactionResult, compactSession } from "../session/compaction.ts";
import type { CutRule, TokenEstimator } from "../session/compaction-cuts.ts";
import {
  clipMiddle,
  editableText,
  mechanicalSummary,
  oversized,
} from "../session/compaction-fallback.ts";
import type { Summarize } from "../session/compaction-summary.ts";
import { ContextBudget, type ContextUsage } from "../session/context-budget.ts";
import type { SessionLog } from "../session/log.ts";
import type { Registry } from "../tools/registry.ts";
import { modelSummarizer } from "./model-summarizer.ts";

/** Refusals after which the model's summary is replaced by a mechanical one. */
const MODEL_FAILURES = new Set(["SUMMARY_FAILED", "INVALID_SUMMARY", "CONTEXT_OVERFLOW"]);

function sumTokens(messages: readonly Message[], estimate: (m: Message) => number): number {
  let t = 0;
  for (const m of messages) t += estimate(m);
  return t;
}

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
  /**
   * Harder compactions after a context-overflow error, per turn (not retries). Default 3: each
   * keeps less (half the automatic amount, then an eighth, then nothing), and when the history
   * is already as small as it gets, a message too large for the window is clipped to its head
   * and tail with a note.
   */
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
  /** Times a compaction (`context.compacted`'s `durationMs`); absent: not timed. */
  clock?: Clock;
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
  /** Overflow recoveries since the last response that fit (each keeps less). */
  private overflowLevel = 0;

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

  /** Lets go of the log while the session sleeps; `rebind` takes the reopened one. */
  detach(): void {
    this.deps.log = undefined as unknown as SessionLog;
    this.budget.detach();
  }

  /**
   * Works on `log`, the session's log reopened after a sleep (the same entries): what this
   * context learned (the provider's measured usage, a compaction that could not help, overflow
   * recoveries) carries over. Returns itself.
   */
  rebind(log: SessionLog): this {
    this.deps.log = log;
    this.budget.rebind(log);
    return this;
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
    this.overflowLevel = 0; // a response arrived: the request fit
    this.budget.measured(usage, this.deps.model.name);
  }

  /** Whether `usage` crossed the automatic compaction threshold. */
  compactDue(usage: ContextUsage): boolean {
    const at = this.deps.options.compactAt ?? 0.85;
    if (at === false || !Number.isFinite(usage.window)) return false;
    return usage.used + usage.reserve > at * usage.window && usage.used >= this.quietBelow;
  }

  /**
   * Recent tokens a compaction of `mode` keeps; an overflow recovery keeps less each time the
   * request still overflowed (`level`): half the automatic amount, an eighth, then nothing.
   */
  keepRecentTokens(mode: CompactionMode, level = 0): number {
    const { window, reserve } = this.budget;
    const room = Number.isFinite(window) ? window - reserve : 80_000;
    const auto = this.deps.options.keepRecentTokens ?? Math.min(20_000, Math.floor(room / 4));
    if (mode !== "overflow") return auto;
    return level === 0 ? Math.floor(auto / 2) : level === 1 ? Math.floor(auto / 8) : 0;
  }

  /**
   * Compacts the session's history (docs/long-sessions.md) at the latest legal cut that keeps
   * `keepRecentTokens(mode)`; every failure leaves the old baseline. Emits `context.compacted`.
   * When the model cannot summarise (the request fails, returns nothing usable, or overflows at
   * its smallest) the summary is written mechanically (`mechanicalSummary`), so one bad
   * summarizer does not leave every later turn failing. An overflow recovery escalates: each
   * one since the last response that fit keeps less (down to nothing), and once nothing more can
   * be summarised, every message still too large for the window is clipped to its head and tail
   * with a note (a `context_edit`; the log keeps the whole text).
   */
  async compact(mode: CompactionMode, signal: AbortSignal): Promise<CompactionReport> {
    const { log, model, ids, emit, registry, clock } = this.deps;
    const startedAt = clock?.now();
    // Instructions and tool specs alone over the window: no compaction of the history can help.
    const { window: size, reserve } = this.budget;
    const head = headTokens(this.instructions(), registry.modelTools(), this.count);
    if (Number.isFinite(size) && head + reserve >= size) {
      const reason = `the instructions and tool specs alone take ${head} tokens, and with the ${reserve} reserved for the answer that is over the model's context window (${size} tokens): no compaction of the history can make the request fit. Shorten the instructions (session.setInstructions), offer fewer tools, or use a model with a larger context window`;
      emit({ type: "context.compacted", mode, ok: false, reason });
      return { ok: false, reason };
    }
    const level = mode === "overflow" ? this.overflowLevel++ : 0;
    const keepRecentTokens = this.keepRecentTokens(mode, level);
    const run = async (summarize: Summarize): Promise<CompactionResult> => {
      try {
        return await compactSession(log, {
          summarize,
          keepRecentTokens,
          estimate: this.estimate,
          signal,
          cutPoints: this.deps.options.cutPoints,
        });
      } catch (error) {
        return { ok: false, code: "SUMMARY_FAILED", message: String(error), attempts: [] };
      }
    };
    let result = await run(modelSummarizer(model, ids));
    if (!result.ok && MODEL_FAILURES.has(result.code) && !signal.aborted) {
      const why = `${result.code}: ${result.message}`;
      result = await run(async (messages) => mechanicalSummary(messages, this.summaryChars()));
      if (result.ok) {
        emit({
          type: "log.written",
          level: "warn",
          message: `the model's summary could not be used (${why}); a mechanical summary replaced the older messages`,
        });
      }
    }
    if (mode === "overflow" && !signal.aborted && (level >= 2 || !result.ok)) {
      const clipped = this.clipOversized();
      if (clipped > 0) {
        emit({
          type: "context.compacted",
          mode,
          ok: true,
          tokensBefore: result.ok ? result.tokensBefore : (this.budget.current?.used ?? 0),
          tokensAfter: sumTokens(log.history(), this.estimate),
          ...(startedAt === undefined ? {} : { durationMs: clock!.now() - startedAt }),
        });
        return { ok: true };
      }
    }
    const used = this.budget.current?.used ?? 0;
    const took = startedAt === undefined ? {} : { durationMs: clock!.now() - startedAt };
    if (result.ok) {
      this.quietBelow = 0;
      emit({
        type: "context.compacted",
        mode,
        ok: true,
        tokensBefore: result.tokensBefore,
        tokensAfter: result.tokensAfter,
        ...took,
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
      ...took,
    });
    const reason =
      mode === "overflow"
        ? `context overflow (not retried as it was): the request exceeds the model's context window (${window} tokens) and a compaction keeping ${keepRecentTokens} recent tokens did not help (${result.code}: ${result.message}); clear old tool results (session.clearToolResults), compact with a smaller keepRecentTokens, or use a model with a larger window`
        : `${result.code}: ${result.message}`;
    return { ok: false, reason };
  }

  /** The longest mechanical summary (characters): a tenth of the usable window, ≥ 2 000. */
  private summaryChars(): number {
    const { window, reserve } = this.budget;
    return Number.isFinite(window)
      ? Math.max(2000, Math.floor(((window - reserve) * 4) / 10))
      : 8000;
  }

  /**
   * Clips every message of the view that costs more than half the usable window to its head and
   * tail (a `context_edit` per message; the log keeps the original). Returns how many.
   */
  private clipOversized(): number {
    const { log } = this.deps;
    const { window, reserve } = this.budget;
    if (!Number.isFinite(window)) return 0;
    const limit = Math.max(64, Math.floor((window - reserve) / 2));
    const messages = log.history();
    const sources = log.messageSources();
    let clipped = 0;
    for (const i of oversized(messages, limit, this.estimate)) {
      const text = editableText(messages[i]);
      const target = sources[i];
      if (text === undefined || target === undefined) continue;
      // Tokens → characters at the estimate's rate (4 a token), with room for the note.
      const replacement = clipMiddle(text, limit * 4 - 200);
      if (replacement === text) continue;
      log.append({ type: "context_edit", targetId: target, replacement });
      clipped++;
    }
    return clipped;
  }
}
