import type { Logger } from "pino";
import { toolCallsOf } from "../contracts/messages.ts";
import { notExecuted, type ToolResult } from "../contracts/tool-result.ts";
import type { EntryOf } from "../session/entries.ts";
import type { SessionLog } from "../session/log.ts";
import { outcomeUnknown, recoverSession, type UnknownCall } from "../session/recovery.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import type { Registry } from "../tools/registry.ts";
import { resolveTraits } from "../tools/traits.ts";
import { runTool } from "./run-tool.ts";

const neverStarted = notExecuted(
  "CANCELLED",
  "the process ended before this call started (it has no start record, so it never ran)",
  { retryable: true },
);

/**
 * Brings a reopened session's log back to a well-formed state after a crash (docs/stores.md):
 * cut attempts end interrupted; a call with a start record and no result becomes `unknown`
 * (OUTCOME_UNKNOWN, never re-run) unless its tool is idempotent, in which case it is
 * re-executed with its SAME idempotency key, its arguments prepared again from the model's
 * original text (the start record holds the schema's output, which is not JSON-faithful: a
 * transformed `Date` or `Set` would come back as a string or `{}`); a call of the last
 * response with no start record
 * never ran (write-ahead) and is answered "not executed". Makes it all durable.
 */
export async function recoverCalls(options: {
  log: SessionLog;
  registry: Registry;
  logger: Logger;
  /**
   * Told each result recovery writes (e.g. telemetry's `recovered`), once it is durable.
   * Contract: must not throw.
   */
  onSettled?: (result: EntryOf<"call_result">) => void;
  /** Continue the cut turn rather than close it (`recovery: "continue"`): see `recoverSession`. */
  continueTurns?: { maxContinuations: number };
}): Promise<{ retried: number; unknown: number; notStarted: number; continueTurn?: string }> {
  const { log, registry, logger } = options;
  const settled: EntryOf<"call_result">[] = [];
  const report = await recoverSession(log, {
    isIdempotent: (name) => {
      const tool = registry.get(name);
      return tool ? resolveTraits(tool.traits).idempotent : undefined;
    },
    ...(options.continueTurns ? { continueTurns: options.continueTurns } : {}),
  });
  for (const call of report.retry) settled.push(await retryIdempotent(log, registry, logger, call));
  // Calls of the last response that never started (the crash came first): "not executed" is
  // the truth for them. Kept by the projection, so a long session opens without decoding its
  // history. A call with a start record or a result after that response is never among them.
  // A continued turn decides them at its permission gate again (actors/continue-turn.ts).
  let notStarted = 0;
  for (const c of report.continuedTurn === null ? log.unstartedCalls() : []) {
    settled.push(
      log.append({
        type: "call_result",
        callId: c.callId,
        name: c.name,
        outcome: "not_executed",
        result: neverStarted,
      }),
    );
    notStarted++;
  }
  await log.flush();
  if (options.onSettled)
    for (const entry of [...report.unknown, ...settled]) options.onSettled(entry);
  const counts = { retried: report.retry.length, unknown: report.unknown.length, notStarted };
  return report.continuedTurn === null ? counts : { ...counts, continueTurn: report.continuedTurn };
}

/**
 * Re-runs an idempotent call a crash cut, with its SAME idempotency key and its arguments
 * prepared again from the model's text; returns its result entry (`unknown` when the arguments
 * no longer pass preparation).
 */
async function retryIdempotent(
  log: SessionLog,
  registry: Registry,
  logger: Logger,
  call: UnknownCall,
): Promise<EntryOf<"call_result">> {
  const argumentsText = rawArguments(log, call.callId) ?? JSON.stringify(call.args ?? {});
  const prepared = prepareCall({ id: call.callId, name: call.name, argumentsText }, registry);
  if (!prepared.ok) {
    // It started and may have run; it cannot be re-run with these arguments any more.
    const result: ToolResult = {
      ...outcomeUnknown(call),
      message: `${outcomeUnknown(call).message} (Its arguments no longer pass preparation: ${prepared.error.message})`,
    };
    return log.append({
      type: "call_result",
      callId: call.callId,
      name: call.name,
      outcome: "unknown",
      result,
    });
  }
  const { tool, traits, args, repairs } = prepared.call;
  const report = await runTool(
    tool,
    args,
    {
      callId: call.callId,
      signal: new AbortController().signal,
      idempotencyKey: call.idempotencyKey,
      sessionId: log.sessionId,
      onUpdate: () => {},
      log: logger.child({ callId: call.callId, tool: call.name, recovery: true }),
    },
    { name: call.name, budget: traits.outputBudget, repairs },
  );
  // Nothing aborts a recovery retry, so the report always carries a result.
  const result = report.type === "call.aborted" ? neverStarted : report.result;
  return log.append({
    type: "call_result",
    callId: call.callId,
    name: call.name,
    outcome: result.ok ? "completed" : "failed",
    result,
  });
}

/** The arguments text the model sent for `callId`, from the last assistant message asking it. */
function rawArguments(log: SessionLog, callId: string): string | undefined {
  const messages = log.history();
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role !== "assistant") continue;
    const call = toolCallsOf(m.content).find((c) => c.id === callId);
    if (call) return call.arguments;
  }
  return undefined;
}

/** The default bound on a cut turn's continuations (`recovery: "continue"`). */
export const MAX_CONTINUATIONS = 3;

/**
 * `createAgent({ recovery })` checked: how recovery continues cut turns (undefined: it closes
 * them). Throws a TypeError naming what was expected for anything else.
 */
export function resolveRecovery(
  recovery: "continue" | "close" | { maxContinuations: number } | undefined,
): { maxContinuations: number } | undefined {
  if (recovery === undefined || recovery === "continue")
    return { maxContinuations: MAX_CONTINUATIONS };
  if (recovery === "close") return undefined;
  const max = (recovery as { maxContinuations?: unknown } | null)?.maxContinuations;
  if (typeof max === "number" && Number.isInteger(max) && max >= 0)
    return { maxContinuations: max };
  throw new TypeError(
    `createAgent: recovery must be "continue", "close" or { maxContinuations: n } with n an integer ≥ 0, got ${JSON.stringify(recovery)}`,
  );
}
