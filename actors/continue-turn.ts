// A turn cut by a crash, continued (invariant 20 of docs/architecture.md, docs/crashes.md): the
// process that recovered the session's log runs the cut turn on, under the same turn id, with
// no new prompt. Recovery already settled what ran (a cut call is `unknown`, an idempotent one
// re-ran with its key: actors/recover-calls.ts); what is left are the calls of the last response
// that never started. They go through the permission gate again (a request asked before the
// crash is pending again with the same id; a decision in the log is taken as it is), the allowed
// ones run with their start record written first, and then the model is asked again.

import { type ToolCallPart, toolCallsOf } from "../contracts/messages.ts";
import type { PermissionDecision } from "../contracts/permission.ts";
import type { CallOutcome } from "../contracts/status.ts";
import { notExecuted, type ToolResult } from "../contracts/tool-result.ts";
import type { TurnResult } from "../contracts/turn-result.ts";
import type { EntryOf } from "../session/entries.ts";
import { flat } from "../session/flat.ts";
import type { SessionLog } from "../session/log.ts";
import { TurnTally } from "../session/turn-result.ts";
import { truncatedCallResult } from "../tools/prepare/truncated-call.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import type { PreparedCall } from "../tools/types.ts";
import { decisionEntry, persistRequest, restoreAlways } from "./durable-permissions.ts";
import { decideAll } from "./permissions.ts";
import { runTool } from "./run-tool.ts";
import type { TurnDeps } from "./turn-scope.ts";

/**
 * Continues the cut turn `turnId`: settles the calls of its last response that never started
 * (the gate, then the allowed ones run), then `run()` asks the model again under the same turn
 * id. A denial without feedback at the gate ends the turn `cancelled` without asking the model,
 * as it would have before the crash. `signal` (a close, an interrupt) withdraws the waiting
 * requests: they are declined and the turn ends cancelled.
 */
export async function continueCutTurn(
  deps: TurnDeps,
  turnId: string,
  signal: AbortSignal,
  run: () => Promise<TurnResult>,
): Promise<TurnResult> {
  deps.logger.info({ turnId }, "continuing a turn cut by a crash");
  const declined = await settleUnstarted(deps, turnId, signal);
  if (declined === undefined && !signal.aborted) return run();
  const reason = declined ?? "the turn was interrupted while it was being continued";
  deps.log.append({ type: "turn_end", turnId, status: "cancelled", reason });
  await deps.log.flush();
  deps.emit({ type: "turn.ended", turnId, status: "cancelled", reason });
  const tally = new TurnTally(turnId);
  await deps.log.loadHistory();
  for (const entry of deps.log.path()) tally.add(entry);
  return tally.result()!;
}

/**
 * Gives every unstarted call of the last response its one result (running the allowed ones).
 * Resolves with the reason when a denial without feedback stopped the turn.
 */
async function settleUnstarted(
  deps: TurnDeps,
  turnId: string,
  signal: AbortSignal,
): Promise<string | undefined> {
  const { log } = deps;
  await log.loadHistory();
  await restoreAlways(deps.permissions, log);
  const unstarted = log.unstartedCalls();
  const asking = unstarted.length > 0 ? askingMessage(log, unstarted[0]!.callId) : undefined;
  if (!asking) return undefined;
  const valid: PreparedCall[] = [];
  for (const { callId, name } of unstarted) {
    const raw = toolCallsOf(asking.content).find((c) => c.id === callId);
    const outcome = refusedBeforeGate(deps, asking, raw, callId, name);
    if (outcome.ok) valid.push(outcome.call);
    else settle(deps, turnId, callId, name, "not_executed", outcome.result);
  }
  const decisions = await decide(deps, turnId, valid, signal);
  const declined = decisions.find((d) => d.decision.type === "declined")?.decision;
  for (const { call, decision } of decisions) {
    if (declined?.type === "declined") {
      const result = notExecuted("DENIED", `${declined.reason}; the turn was stopped`);
      settle(deps, turnId, call.id, call.name, "not_executed", result);
    } else if (decision.type === "corrected") {
      settle(
        deps,
        turnId,
        call.id,
        call.name,
        "not_executed",
        notExecuted("DENIED", decision.feedback),
      );
    } else {
      await runAllowed(deps, turnId, call, flat(`${deps.sessionId}:${asking.id}:${call.id}`));
    }
  }
  await log.flush();
  return declined?.type === "declined" ? declined.reason : undefined;
}

/** A call that cannot reach the gate gets its result here: cut by length, or invalid. */
function refusedBeforeGate(
  deps: TurnDeps,
  asking: EntryOf<"assistant_message">,
  raw: ToolCallPart | undefined,
  callId: string,
  name: string,
): { ok: true; call: PreparedCall } | { ok: false; result: ToolResult } {
  const argumentsText = raw?.arguments ?? "";
  if (asking.finishReason === "length") {
    return { ok: false, result: truncatedCallResult({ id: callId, name, argumentsText }) };
  }
  const prepared = prepareCall({ id: callId, name, argumentsText }, deps.registry);
  return prepared.ok ? prepared : { ok: false, result: prepared.error };
}

/** The gate: every decision from the log, the policy or an answer, each written as it comes. */
async function decide(
  deps: TurnDeps,
  turnId: string,
  calls: readonly PreparedCall[],
  signal: AbortSignal,
): Promise<{ call: PreparedCall; decision: PermissionDecision }[]> {
  const broker = deps.permissions;
  if (!broker) return calls.map((call) => ({ call, decision: { type: "allow" } }));
  const withdraw = () => broker.cancelAll("the turn was interrupted before a reply");
  signal.addEventListener("abort", withdraw, { once: true });
  try {
    return await decideAll(
      broker,
      calls,
      deps.sessionId,
      (event, decided) => {
        if (event.type === "permission.decided" && !decided?.logged) {
          deps.log.append(decisionEntry(turnId, event, decided?.answerId));
        }
        deps.emit(event);
      },
      (request) => persistRequest(deps.log, turnId, request),
    );
  } finally {
    signal.removeEventListener("abort", withdraw);
  }
}

/** Runs an allowed call once: its start record durable first (write-ahead), then its result. */
async function runAllowed(
  deps: TurnDeps,
  turnId: string,
  call: PreparedCall,
  idempotencyKey: string,
): Promise<void> {
  const { log } = deps;
  log.append({
    type: "call_started",
    callId: call.id,
    name: call.name,
    args: call.args,
    idempotencyKey,
    idempotent: call.traits.idempotent,
  });
  await log.flush();
  deps.emit({ type: "call.started", turnId, callId: call.id, name: call.name, args: call.args });
  const report = await runTool(
    call.tool,
    call.args,
    {
      callId: call.id,
      signal: new AbortController().signal,
      idempotencyKey,
      sessionId: deps.sessionId,
      onUpdate: () => {},
      log: deps.logger.child({ callId: call.id, tool: call.name, continued: true }),
    },
    { name: call.name, budget: call.traits.outputBudget, repairs: call.repairs },
  );
  // Nothing aborts it, so the report always carries a result.
  const result: ToolResult =
    report.type === "call.aborted"
      ? notExecuted("CANCELLED", "the call was stopped")
      : report.result;
  settle(deps, turnId, call.id, call.name, result.ok ? "completed" : "failed", result);
}

function settle(
  deps: TurnDeps,
  turnId: string,
  callId: string,
  name: string,
  outcome: CallOutcome,
  result: ToolResult,
): void {
  deps.log.append({ type: "call_result", callId, name, outcome, result });
  deps.emit({ type: "call.settled", turnId, callId, name, outcome, result });
}

/** The last assistant message on the active path that asked for call `callId`. */
function askingMessage(log: SessionLog, callId: string): EntryOf<"assistant_message"> | undefined {
  const path = log.path();
  for (let i = path.length - 1; i >= 0; i--) {
    const e = path[i]!;
    if (e.type === "assistant_message" && toolCallsOf(e.content).some((c) => c.id === callId)) {
      return e;
    }
  }
  return undefined;
}
