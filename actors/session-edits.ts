// The session's edits of its own history between turns: compaction, instructions, cleared tool
// results and branch moves. Each is refused with TURN_OPEN while a turn runs, writes its entries
// and flushes them before it answers. `Session` (actors/session.ts) documents each as a method.

import { type Refusal, refuse } from "../contracts/refusal.ts";
import { summarySpend } from "../machines/policies/budget.ts";
import type { BranchResult } from "../session/branches.ts";
import { READ_RESULT_TOOL, resultsToClear } from "../session/clear-results.ts";
import { type CompactionResult, compactSession } from "../session/compaction.ts";
import type { EntryOf } from "../session/entries.ts";
import { modelSummarizer } from "./model-summarizer.ts";
import type { SessionRunner } from "./session-runner.ts";
import type { SessionScope } from "./session-scope.ts";

/** `session.compact()` once the session is open. */
export async function compactNow(
  s: SessionScope,
  options: { keepRecentTokens?: number; signal?: AbortSignal },
): Promise<CompactionResult> {
  const open = s.turnOpen("compact");
  if (open) return { ...open, attempts: [] };
  // Its summary requests count in the session's budgets like any request.
  const charges = s.deps.context.summaries;
  const result = await compactSession(s.log, {
    ...options,
    summarize: modelSummarizer(s.deps.model, s.options.ids, charges.record),
    charge: () => charges.peek(),
  });
  const c = charges.take();
  if (c) {
    s.deps.budgets?.turnEnded(summarySpend(c));
    s.deps.budgets?.charged(summarySpend(c));
  }
  return result;
}

/** `session.setInstructions(text)` once the session is open (`text` is checked). */
export async function changeInstructions(
  s: SessionScope,
  runner: SessionRunner,
  text: string,
): Promise<{ ok: true; entry: EntryOf<"settings"> } | Refusal<"TURN_OPEN">> {
  const open = s.turnOpen("change the instructions");
  if (open) return open;
  runner.instructionsSet(); // an explicit change wins over the configured text
  const entry = runner.recordInstructions(text);
  await s.log.flush();
  return { ok: true, entry };
}

/** Throws a `TypeError` naming the option when `clearToolResults`' options are not counts. */
export function checkClearOptions(options: { olderThanSteps?: number; keepLast?: number }): void {
  for (const name of ["olderThanSteps", "keepLast"] as const) {
    const v = options[name] ?? 0;
    if (!(Number.isInteger(v) && v >= 0)) {
      throw new TypeError(`clearToolResults: ${name} must be an integer ≥ 0, got ${String(v)}`);
    }
  }
}

/** `session.clearToolResults(options)` once the session is open (options checked). */
export async function clearResults(
  s: SessionScope,
  options: { olderThanSteps?: number; keepLast?: number },
): Promise<
  { ok: true; cleared: number; bytes: number } | Refusal<"TURN_OPEN" | "READ_RESULT_OFF">
> {
  const open = s.turnOpen("clear tool results");
  if (open) return open;
  if (!s.options.readResultTool) {
    return refuse(
      "READ_RESULT_OFF",
      `cleared results could not be read back: the ${READ_RESULT_TOOL} tool is off; create the agent with createAgent({ context: { readResultTool: true } })`,
    );
  }
  const { log } = s;
  const clear = resultsToClear(
    log.history().slice(),
    log.messageSources().slice(),
    (id) => log.get(id),
    { olderThanSteps: options.olderThanSteps ?? 0, keepLast: options.keepLast ?? 0 },
  );
  let bytes = 0;
  for (const c of clear) {
    log.append({ type: "context_edit", targetId: c.entryId, replacement: c.note });
    bytes += c.bytes;
  }
  if (clear.length > 0) await log.flush();
  return { ok: true, cleared: clear.length, bytes };
}

/** A rollback, fork or leaf switch once the session is open: `move` changes the log's leaf. */
export async function moveBranch(s: SessionScope, move: () => BranchResult): Promise<BranchResult> {
  const open = s.turnOpen("move the branch");
  if (open) return open;
  await s.log.loadHistory();
  const result = move();
  if (result.ok) await s.log.flush();
  return result;
}
