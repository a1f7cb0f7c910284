import type { ModelPrice } from "../contracts/budget.ts";
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
import { mechanicalSummary } from "../session/compaction-fallback.ts";
import type { Summarize } from "../session/compaction-summary.ts";
import { ContextBudget, type ContextUsage } from "../session/context-budget.ts";
import { type FitInput, type FitPlan, planFit } from "../session/fit-request.ts";
import type { SessionLog } from "../session/log.ts";
import type { Registry } from "../tools/registry.ts";
import { modelSummarizer } from "./model-summarizer.ts";
import { SummaryCharges } from "./summary-charges.ts";

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
  /** @internal Test seam: how a request is made to fit (mutation tests only). */
  fitPlan?: (input: FitInput) => FitPlan;
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
  /** The model's price (`createAgent({ prices })`): what summary requests cost. */
  price?: ModelPrice;
}

/** What `fitNow` did: whether the request fits now, and how many messages it edited. */
export interface FitReport {
  fits: boolean;
  edits: number;
  /** The request's tokens after the edits, and what the model takes (when it was over). */
  used?: number;
  room?: number;
  /** Why it does not fit (when it does not). */
  reason?: string;
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
  /** What compaction's summary requests were charged (the turn and `session.compact()` take it). */
  readonly summaries: SummaryCharges;
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
    this.summaries = new SummaryCharges({
      count,
      ...(deps.price ? { price: deps.price } : {}),
      ...(model.contextWindow === undefined ? {} : { window: model.contextWindow }),
      warn: (message) => deps.emit({ type: "log.written", level: "warn", message }),
    });
    const window = model.contextWindow ?? Number.POSITIVE_INFINITY;
    this.budget = new ContextBudget({
      source: deps.log,
      count,
      window,
      reserve: model.maxOutputTokens ?? 0,
      ...(model.maxInputTokens === undefined ? {} : { maxInputTokens: model.maxInputTokens }),
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
    if (at === false || usage.used < this.quietBelow) return false;
    const input = this.deps.model.maxInputTokens;
    if (input !== undefined && usage.used > at * input) return true;
    return Number.isFinite(usage.window) && usage.used + usage.reserve > at * usage.window;
  }

  /**
   * Makes the next request fit what the model takes (`budget.room`, scaled by `scale` after the
   * provider counted more than the estimate): the largest tool results are offloaded to a
   * preview and a note, then the largest messages clipped (`planFit`, session/fit-request.ts),
   * each a `context_edit`. Synchronous; compacts nothing. Reports whether it fits now.
   */
  fitNow(scale = 1): FitReport {
    const room = Math.floor(this.budget.room * scale);
    if (!Number.isFinite(room)) return { fits: true, edits: 0 };
    // Measured without `context.measured`: the step's own measure reports it before the request.
    const usedNow = () =>
      this.budget.measure(
        this.instructions(),
        this.deps.registry.modelTools(),
        this.deps.model.name,
      ).used;
    const used = usedNow();
    if (used <= room) return { fits: true, edits: 0 };
    const { log, emit, options } = this.deps;
    const plan = (options.fitPlan ?? planFit)({
      messages: log.history(),
      sources: log.messageSources(),
      over: used - room,
      estimate: this.estimate,
      previewChars: Math.max(80, Math.min(800, Math.floor((room * 4) / 20))),
      readBack: options.readResultTool === true,
      isResult: (id) => log.get(id)?.type === "call_result",
    });
    for (const e of plan.edits) {
      log.append({ type: "context_edit", targetId: e.targetId, replacement: e.replacement });
    }
    const after = usedNow();
    if (plan.edits.length > 0) {
      const offloaded = plan.edits.filter((e) => e.kind === "offload").length;
      const clipped = plan.edits.length - offloaded;
      emit({
        type: "log.written",
        level: "warn",
        message: `the next request was over what the model takes (${used} of ${room} tokens): ${offloaded} tool result(s) offloaded to a preview, ${clipped} message(s) clipped; now ${after} tokens`,
      });
    }
    if (after <= room) return { fits: true, edits: plan.edits.length, used: after, room };
    const reason =
      this.headOverRoom() ??
      `the request does not fit what the model takes (${after} of ${room} tokens) even with every tool result offloaded and the largest messages clipped; compact the session, shorten the instructions or tools, or use a model with a larger context window`;
    return { fits: false, edits: plan.edits.length, used: after, room, reason };
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
   * `keepRecentTokens(mode)`; every failure of the summary leaves the old baseline. Emits
   * `context.compacted`. When the model cannot summarise (the request fails, returns nothing
   * usable, or overflows at its smallest) the summary is written mechanically
   * (`mechanicalSummary`). Then, whatever the summary did, the next request is made to fit
   * (`fitNow`; after an overflow, within a smaller share of the room each time, since the
   * provider counted more than the estimate): results offloaded, messages clipped, and when
   * that is not enough, a mechanical cut keeping nothing but the newest step — a cut that
   * always fits, so a compaction that cannot help does not fail the turn.
   */
  async compact(mode: CompactionMode, signal: AbortSignal): Promise<CompactionReport> {
    const { emit, clock } = this.deps;
    const startedAt = clock?.now();
    const took = () => (startedAt === undefined ? {} : { durationMs: clock!.now() - startedAt });
    const headOver = this.headOverRoom();
    if (headOver) {
      emit({ type: "context.compacted", mode, ok: false, reason: headOver });
      return { ok: false, reason: headOver };
    }
    const level = mode === "overflow" ? this.overflowLevel++ : 0;
    const keepRecentTokens = this.keepRecentTokens(mode, level);
    const tokensBefore = this.budget.current?.used ?? 0;
    const result = await this.summarise(keepRecentTokens, signal);
    const fit = signal.aborted
      ? { fits: false, edits: 0 }
      : await this.forceFit(mode, level, signal);
    if (result.ok) this.quietBelow = 0;
    if (result.ok || (fit.fits && fit.edits > 0)) {
      emit({
        type: "context.compacted",
        mode,
        ok: true,
        tokensBefore: result.ok ? result.tokensBefore : tokensBefore,
        tokensAfter: sumTokens(this.deps.log.history(), this.estimate),
        ...took(),
      });
      if (result.ok || fit.fits) return { ok: true };
    }
    // Do not try again every step: only once the context grew by a tenth of the window.
    const window = this.budget.window;
    const used = this.budget.current?.used ?? 0;
    this.quietBelow = used + (Number.isFinite(window) ? Math.ceil(window / 10) : 0);
    const why = result.ok
      ? `the request is still over what the model takes (${fit.used} of ${fit.room} tokens)`
      : `${result.code}: ${result.message}`;
    emit({ type: "context.compacted", mode, ok: false, reason: why, ...took() });
    const reason =
      mode === "overflow"
        ? `context overflow (not retried as it was): the request exceeds the model's context window (${window} tokens) and a compaction keeping ${keepRecentTokens} recent tokens did not help (${why}); clear old tool results (session.clearToolResults), compact with a smaller keepRecentTokens, or use a model with a larger window`
        : why;
    return { ok: false, reason };
  }

  /** Why no compaction can help: the instructions and tool specs alone are over the room. */
  private headOverRoom(): string | undefined {
    const { window: size, reserve, room } = this.budget;
    const head = headTokens(this.instructions(), this.deps.registry.modelTools(), this.count);
    if (!Number.isFinite(room) || head < room) return undefined;
    return `the instructions and tool specs alone take ${head} tokens, and with the ${reserve} reserved for the answer that is over what the model takes (its context window ${size}${this.deps.model.maxInputTokens === undefined ? "" : `, its input limit ${this.deps.model.maxInputTokens}`} tokens): no compaction of the history can make the request fit. Shorten the instructions (session.setInstructions), offer fewer tools, or use a model with a larger context window`;
  }

  /** The model's summary of the history before the cut, or a mechanical one when it fails. */
  private async summarise(keep: number, signal: AbortSignal): Promise<CompactionResult> {
    const { model, ids, emit } = this.deps;
    const summarize = modelSummarizer(model, ids, this.summaries.record);
    let result = await this.compactWith(summarize, keep, signal);
    if (!result.ok && MODEL_FAILURES.has(result.code) && !signal.aborted) {
      const why = `${result.code}: ${result.message}`;
      const chars = this.summaryChars();
      result = await this.compactWith(async (ms) => mechanicalSummary(ms, chars), keep, signal);
      if (result.ok) {
        emit({
          type: "log.written",
          level: "warn",
          message: `the model's summary could not be used (${why}); a mechanical summary replaced the older messages`,
        });
      }
    }
    return result;
  }

  private async compactWith(
    summarize: Summarize,
    keepRecentTokens: number,
    signal: AbortSignal,
  ): Promise<CompactionResult> {
    try {
      return await compactSession(this.deps.log, {
        summarize,
        keepRecentTokens,
        estimate: this.estimate,
        signal,
        cutPoints: this.deps.options.cutPoints,
        charge: () => this.summaries.peek(),
      });
    } catch (error) {
      return { ok: false, code: "SUMMARY_FAILED", message: String(error), attempts: [] };
    }
  }

  /**
   * The cut that always fits (see `compact`): `fitNow`, and when offloading and clipping are
   * not enough, a mechanical summary of everything before the newest step, then `fitNow` again.
   */
  private async forceFit(mode: CompactionMode, level: number, signal: AbortSignal) {
    const scale = mode === "overflow" ? 0.75 ** (level + 1) : 1;
    const fit = this.fitNow(scale);
    if (fit.fits || signal.aborted) return fit;
    const chars = Math.max(400, Math.floor((this.budget.room * scale) / 2));
    const cut = await this.compactWith(async (ms) => mechanicalSummary(ms, chars), 0, signal);
    const after = this.fitNow(scale);
    return { ...after, edits: after.edits + fit.edits + (cut.ok ? 1 : 0) };
  }

  /** The longest mechanical summary (characters): a tenth of the usable window, ≥ 2 000. */
  private summaryChars(): number {
    const { window, reserve } = this.budget;
    return Number.isFinite(window)
      ? Math.max(2000, Math.floor(((window - reserve) * 4) / 10))
      : 8000;
  }
}
