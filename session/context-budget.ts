import type { Message, Usage } from "../contracts/messages.ts";
import type { ModelToolSpec } from "../contracts/model.ts";
import { headTokens, messageTokens, type TextCounter } from "../contracts/tokens.ts";

/**
 * The context budget of a session's next model request (docs/long-sessions.md), kept incrementally.
 *
 * used = the last trusted provider usage (input + output of the last response, same model,
 *        same view of the log) + an estimate of every message appended or changed since;
 *      = an estimate of the whole request when nothing is trusted.
 * budget = used + the output reserve; automatic compaction compares it with the window.
 *
 * Usage is not trusted once the view was rebuilt (a compaction, a leaf move, an omission), when
 * the instructions or tools changed, or when it was measured under another model. All-zero
 * usage means "not measured" and changes nothing. Every token count goes through the small
 * functions below over the projection's messages, so the estimate can follow the message
 * model wherever it goes.
 */

/** What the budget reads of the log: its live view and the messages changed in place. */
export interface ContextSource {
  /**
   * The live neutral projection (an array replaced by a new one on every rebuild): what every
   * adapter renders and sends.
   */
  history(): readonly Message[];
  /**
   * Indexes of messages replaced in place since the last call (tool results filling their
   * slots, text edits), or "all" when too many piled up to list. Consumes them.
   */
  takeChanges(): readonly number[] | "all";
}

/** What `session.contextUsage()` reports. */
export interface ContextUsage {
  /** Tokens the next request uses before the model answers. */
  used: number;
  /** The model's context window (Infinity: unknown). */
  window: number;
  /** Tokens kept free for the answer. */
  reserve: number;
  /** Whether `used` starts from provider usage (false: estimated whole). */
  trusted: boolean;
}

export interface ContextBudgetOptions {
  source: ContextSource;
  count: TextCounter;
  window: number;
  reserve: number;
  /** The model's input limit when it has one below its window (`Model.maxInputTokens`). */
  maxInputTokens?: number;
}

interface Anchor {
  tokens: number;
  /** The view's estimated sum when measured. */
  sum: number;
  model: string;
  view: readonly Message[];
  head: number;
}

/** The view of a detached budget (`detach`): what it measured holds for the reopened log. */
const ASLEEP: readonly Message[] = Object.freeze([]);

/**
 * The running budget of one session. `measure` reads only what changed since its last call:
 * appended messages and in-place changes, never the whole history (except once after a
 * rebuild, which is what a compaction or a leaf move costs anyway).
 */
export class ContextBudget {
  readonly window: number;
  readonly reserve: number;
  /**
   * What a request may use before the model answers: the window less the reserve, or the
   * model's input limit when that is lower (Infinity: unknown). No request is sent over it
   * (invariant 21 of docs/architecture.md).
   */
  readonly room: number;
  private source: ContextSource | null;
  private readonly count: TextCounter;
  private view: readonly Message[] | null = null;
  private costs: number[] = [];
  private sum = 0;
  private head = 0;
  private headKey: { instructions: string | undefined; tools: readonly ModelToolSpec[] } | null =
    null;
  private anchor: Anchor | null = null;
  private last: ContextUsage | null = null;

  constructor(options: ContextBudgetOptions) {
    this.source = options.source;
    this.count = options.count;
    this.window = options.window;
    this.reserve = options.reserve;
    this.room = Math.min(
      options.window - options.reserve,
      options.maxInputTokens ?? Number.POSITIVE_INFINITY,
    );
  }

  /**
   * The usage of the next request with these instructions and tools (O(what changed since the
   * previous call)).
   */
  measure(
    instructions: string | undefined,
    tools: readonly ModelToolSpec[],
    model: string,
  ): ContextUsage {
    this.sync();
    const key = this.headKey;
    if (!key || key.instructions !== instructions || key.tools !== tools) {
      this.head = headTokens(instructions, tools, this.count);
      // A different head is a different prefix: usage measured with the old one does not hold.
      if (key && (key.instructions !== instructions || !sameTools(key.tools, tools))) {
        this.anchor = null;
      }
      this.headKey = { instructions, tools };
    }
    const a = this.anchor;
    const trusted = a !== null && a.view === this.view && a.model === model && a.head === this.head;
    const used = trusted ? Math.max(0, a.tokens + this.sum - a.sum) : this.head + this.sum;
    const last = this.last;
    if (last && last.used === used && last.trusted === trusted) return last;
    this.last = { used, window: this.window, reserve: this.reserve, trusted };
    return this.last;
  }

  /**
   * Lets go of the source and its messages while the session sleeps (`rebind` takes the
   * reopened one). What changed since the last `measure` (an edit between turns) is folded in
   * first; the provider's measured usage is kept only if it is for the view as it is now.
   */
  detach(): void {
    if (this.view !== null) {
      this.sync();
      const a = this.anchor;
      this.anchor = a && a.view === this.view ? { ...a, view: ASLEEP } : null;
      this.view = ASLEEP;
    }
    this.source = null;
  }

  /**
   * Reads from `source` from now on: the session's log reopened after a sleep. Its view is
   * counted afresh (O(projection), once a wake); the provider's measured usage carries over
   * when the view counts as it did at `detach` (no edit since), else it is dropped.
   */
  rebind(source: ContextSource): void {
    this.source = source;
    if (this.view !== ASLEEP) return; // never measured: nothing carried
    const { sum, costs } = this;
    this.view = null;
    this.sync();
    const a = this.anchor;
    if (a?.view !== ASLEEP) return;
    const same = this.sum === sum && this.costs.length === costs.length;
    this.anchor = same ? { ...a, view: this.view as unknown as readonly Message[] } : null;
  }

  /** The last measured usage (null before the first `measure`). */
  get current(): ContextUsage | null {
    return this.last;
  }

  /**
   * Records a response's provider usage, measured for the view as it is now (its message just
   * committed). All-zero or absent usage is "not measured" and leaves the previous anchor.
   */
  measured(usage: Usage | undefined, model: string): void {
    if (!usage || usage.inputTokens + usage.outputTokens <= 0) return;
    this.sync();
    this.anchor = {
      tokens: usage.inputTokens + usage.outputTokens,
      sum: this.sum,
      model,
      view: this.view!,
      head: this.head,
    };
  }

  /** Folds appended and changed messages into the running sum. */
  private sync(): void {
    const source = this.source!;
    const messages = source.history();
    const changes = source.takeChanges();
    if (messages !== this.view || changes === "all") {
      this.view = messages;
      this.costs = [];
      this.sum = 0;
    } else {
      for (const i of changes) {
        if (i >= this.costs.length) continue;
        const cost = messageTokens(messages[i], this.count);
        this.sum += cost - this.costs[i];
        this.costs[i] = cost;
      }
    }
    for (let i = this.costs.length; i < messages.length; i++) {
      const cost = messageTokens(messages[i], this.count);
      this.costs.push(cost);
      this.sum += cost;
    }
  }
}

function sameTools(a: readonly ModelToolSpec[], b: readonly ModelToolSpec[]): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}
