import { type CutRule, legalCutPoints } from "../../../session/compaction-cuts.ts";
import type { LogEntry } from "../../../session/entries.ts";

/**
 * MUTANT — a cut rule that also lets a compaction start at a tool result (`call_result`): the
 * kept history then begins with a result whose call was summarised away — an orphan the
 * projection can only hide by dropping it (invariant 10 of docs/architecture.md). Tests assert the compaction property
 * FAILS with it.
 */
export const cutsAtResults: CutRule = (path: readonly LogEntry[]) => {
  const results = new Set(path.filter((e) => e.type === "call_result").map((e) => e.id));
  const legal = new Set([...legalCutPoints(path), ...results]);
  return path.filter((e) => legal.has(e.id)).map((e) => e.id);
};
