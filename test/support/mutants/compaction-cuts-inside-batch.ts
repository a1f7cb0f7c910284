import { toolCallsOf } from "../../../contracts/messages.ts";
import { type CutRule, legalCutPoints } from "../../../session/compaction-cuts.ts";
import type { LogEntry } from "../../../session/entries.ts";

/**
 * MUTANT — a cut rule that also lets a compaction start between two results of one batch (at
 * the second or a later `call_result` answering the same assistant message): the batch's call
 * is summarised away while some of its results are kept — orphans (invariant 10 of docs/architecture.md). The runtime's
 * automatic compaction takes its cut from this rule through the `context.cutPoints` test seam;
 * tests assert the interleaving search FAILS with it.
 */
export const cutsInsideBatch: CutRule = (path: readonly LogEntry[]) => {
  const legal = new Set(legalCutPoints(path));
  const batchOf = new Map<string, string>();
  const answered = new Set<string>();
  for (const e of path) {
    if (e.type === "assistant_message")
      for (const c of toolCallsOf(e.content)) batchOf.set(c.id, e.id);
    if (e.type === "call_result") {
      const batch = batchOf.get(e.callId);
      if (batch && answered.has(batch)) legal.add(e.id);
      if (batch) answered.add(batch);
    }
  }
  return path.filter((e) => legal.has(e.id)).map((e) => e.id);
};
