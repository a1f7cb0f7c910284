import type { AcceptanceReport } from "../contracts/acceptance.ts";
import { type Refusal, refuse } from "../contracts/refusal.ts";
import type { TurnResult } from "../contracts/turn-result.ts";
import type { HandoffRecord } from "../session/entries.ts";
import type { AcceptanceHost } from "./acceptance.ts";
import type { AcceptanceSpec } from "./acceptance-spec.ts";
import { buildHandoff, type HandoffOptions, handoffMarkdown, regressionText } from "./handoff.ts";
import { notRun, type PromptResult } from "./session-options.ts";
import type { AcceptancePort, SessionScope } from "./session-scope.ts";

const sum = <T>(items: readonly T[], of: (item: T) => number) =>
  items.reduce((total, item) => total + of(item), 0);

/** The refusal of an acceptance call on session `id`, which has no acceptance spec. */
export function acceptanceOff(id: string, what: string): Refusal<"ACCEPTANCE_OFF"> {
  return refuse(
    "ACCEPTANCE_OFF",
    `cannot ${what}: session ${id} has no acceptance spec; create the agent with createAgent({ acceptance: { checks: [...] } })`,
  );
}

/**
 * A session's acceptance (docs/acceptance.md), over its `AcceptanceHost` (actors/acceptance.ts,
 * which hosts the acceptance chart): the checks after a turn and the loop of follow-up turns,
 * `session.accept()`, a new spec, handoffs and the regression check a handoff asks for. Exists
 * only for a session made with `createAgent({ acceptance })`.
 */
export class SessionAcceptance implements AcceptancePort {
  /** Turns of the acceptance loop in the current run (their cost adds to the prompt's). */
  private loopTurns: TurnResult[] = [];

  constructor(
    private readonly s: SessionScope,
    readonly host: AcceptanceHost,
  ) {}

  get busy(): boolean {
    return this.host.busy;
  }

  interrupt(reason: string): void {
    this.host.interrupt(reason);
  }

  /** What the evidence supports now (reads the artifact's version). */
  report(): Promise<AcceptanceReport> {
    return this.host.report();
  }

  /** `session.accept()`, once the facade checked no turn runs. */
  async accept(options: {
    all?: boolean;
  }): Promise<({ ok: true; ran: string[] } & AcceptanceReport) | Refusal<"ACCEPTANCE_RUNNING">> {
    const { host, s } = this;
    if (host.busy)
      return refuse(
        "ACCEPTANCE_RUNNING",
        `acceptance checks are already running in session ${s.id}; await the prompt or accept() that started them`,
      );
    const ran: string[] = [];
    const listener = (e: { type: string; name?: string }) => {
      if (e.type === "check.started" && e.name !== undefined) ran.push(e.name);
    };
    s.listeners.add(listener);
    try {
      const outcome = await host.check({ reason: "accept", all: options.all === true });
      await s.log.flush();
      return {
        ok: true,
        ran,
        acceptance: outcome.acceptance,
        evidence: outcome.evidence,
        specVersion: host.spec.version,
      };
    } finally {
      s.listeners.delete(listener);
    }
  }

  /** `session.setAcceptanceSpec()`, once the facade checked no turn runs. */
  async setSpec(
    spec: AcceptanceSpec,
  ): Promise<{ ok: true; version: number } | Refusal<"ACCEPTANCE_RUNNING">> {
    if (this.host.busy)
      return refuse("ACCEPTANCE_RUNNING", "cannot change the acceptance spec while its checks run");
    const { version } = this.host.setSpec(spec);
    await this.s.log.flush();
    return { ok: true, version };
  }

  /** `session.handoff()`, once the facade checked no turn runs. */
  async handoff(options: HandoffOptions): Promise<{ record: HandoffRecord; markdown: string }> {
    const { s } = this;
    const report = await this.host.report();
    const record = buildHandoff({
      sessionId: s.id,
      at: s.options.now(),
      entries: s.log.entries(),
      report,
      options,
    });
    const markdown = handoffMarkdown(record);
    s.log.append({ type: "handoff", record, markdown });
    await s.log.flush();
    return { record, markdown };
  }

  /**
   * A turn of the acceptance loop, with the failing evidence as its input. It starts after the
   * acceptance chart's action that asked for it has returned (an actor created inside another
   * actor's action is XState's misuse), and not at all when `cancelled()` by then.
   */
  async runLoopTurn(text: string, cancelled: () => boolean): Promise<TurnResult> {
    await Promise.resolve();
    const skipped = notRun("cancelled", "interrupted before the follow-up turn started");
    const result = cancelled() ? skipped : await this.s.runner.runTurn([{ text }], cancelled);
    this.loopTurns.push(result);
    return result;
  }

  /**
   * After a turn: the checks (and, with `until: "passed"` after a completed turn, the loop),
   * or, after a cancelled turn or with `runAfterTurn: false`, what the evidence supports now.
   * The result carries both layers.
   */
  async afterTurn(output: PromptResult): Promise<PromptResult> {
    const { host } = this;
    this.loopTurns = [];
    let report: AcceptanceReport & { rounds?: number };
    try {
      if (output.status === "cancelled" || !host.runsAfterTurn) {
        report = await host.report();
      } else {
        const outcome = await host.check({
          reason: "turn",
          loop: host.loops && output.status === "completed",
        });
        report = { ...outcome, specVersion: host.spec.version };
      }
    } catch (err) {
      this.s.options.logger().error({ err }, "acceptance could not run");
      report = host.snapshotReport();
    }
    const turns = this.loopTurns;
    const last = turns.at(-1);
    const result: PromptResult = last
      ? {
          status: last.status,
          text: last.text,
          usage: {
            inputTokens: output.usage.inputTokens + sum(turns, (t) => t.usage.inputTokens),
            outputTokens: output.usage.outputTokens + sum(turns, (t) => t.usage.outputTokens),
          },
          steps: output.steps + sum(turns, (t) => t.steps),
        }
      : { ...output };
    if (last?.reason !== undefined) result.reason = last.reason;
    if (last?.code !== undefined) result.code = last.code;
    if (last?.budget !== undefined) result.budget = last.budget;
    if (last && (output.cost !== undefined || turns.some((t) => t.cost !== undefined)))
      result.cost = (output.cost ?? 0) + sum(turns, (t) => t.cost ?? 0);
    result.acceptance = report.acceptance;
    result.evidence = report.evidence;
    result.rounds = report.rounds ?? 0;
    this.loopTurns = [];
    return result;
  }

  async regressionText(record: HandoffRecord): Promise<string> {
    const names = record.verified.map((v) => v.evidence.name);
    const outcome = await this.host.check({ reason: "handoff", names });
    return regressionText(record, { ...outcome, specVersion: this.host.spec.version });
  }
}

/**
 * Before any new work of a session started from a handoff: re-run the checks the handoff
 * verified and tell the model (a note in its view) what no longer holds; without an acceptance
 * spec, that nothing could be re-checked.
 */
export async function checkHandoff(s: SessionScope, record: HandoffRecord): Promise<void> {
  const text = s.acceptance
    ? await s.acceptance.regressionText(record)
    : `Handoff from session ${record.sessionId}: its ${record.verified.length} verified fact(s) could not be re-checked here (no acceptance spec); treat them as unverified.`;
  s.log.append({ type: "note", text, audience: "model" });
  await s.log.flush();
}
