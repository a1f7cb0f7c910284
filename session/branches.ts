import { type Refusal, refuse } from "../contracts/refusal.ts";
import { checkEntry } from "./decode.ts";
import { type EntryOf, LOG_SCHEMA_VERSION, type LogEntry } from "./entries.ts";
import type { SessionLog } from "./log.ts";

/** Why a branch operation was refused (a {@link Refusal} code). */
export type BranchRefusalCode = "UNKNOWN_ENTRY" | "NOT_A_POSITION" | "TURN_OPEN";

/** What a branch move resolves to: the new leaf (and a note when the work tree did not move), or a refusal. */
export type BranchResult =
  | { ok: true; leaf: EntryOf<"leaf">; note: EntryOf<"note"> | null }
  | Refusal<BranchRefusalCode>;

export interface BranchOptions {
  /** Why, for the log (`leaf.reason`); defaults to the operation's name. */
  reason?: string;
  /** Append a model-facing note that the files did not move (default: true, false for switchLeaf). */
  note?: boolean;
}

/**
 * Moves the active leaf back to `entryId` (null: the empty root) to redo from there: appends a
 * `leaf` entry, then a note telling the model that the work tree (files) did NOT roll back.
 * Settings roll back with the messages (they are read from the path). The abandoned branch stays
 * in the log and can be reached again with {@link switchLeaf}. Refused while a turn is open.
 */
export function rollback(
  log: SessionLog,
  entryId: string | null,
  options: BranchOptions = {},
): BranchResult {
  return moveTo(
    log,
    entryId,
    "rollback",
    options.note ?? true,
    options.reason,
    (id) =>
      `The conversation was rolled back to entry ${id}. The work tree (files and other side effects) did NOT roll back: changes made after that point are still there. Check the current state before relying on earlier observations.`,
  );
}

/**
 * Starts a new branch from `entryId`: the next append becomes a sibling of the entry's
 * existing children; the old branch is kept. Appends a note that files were not touched.
 */
export function fork(
  log: SessionLog,
  entryId: string | null,
  options: BranchOptions = {},
): BranchResult {
  return moveTo(
    log,
    entryId,
    "fork",
    options.note ?? true,
    options.reason,
    (id) =>
      `This branch was forked from entry ${id}. The work tree (files) was not changed by the fork: it is as the previous branch left it.`,
  );
}

/** Makes `entryId` (typically another branch's tip) the active leaf. No note unless asked. */
export function switchLeaf(
  log: SessionLog,
  entryId: string | null,
  options: BranchOptions = {},
): BranchResult {
  return moveTo(
    log,
    entryId,
    "switch",
    options.note ?? false,
    options.reason,
    (id) =>
      `The conversation switched to the branch ending at entry ${id}. The work tree (files) did not change with it.`,
  );
}

/** The tips of every branch: entries (other than `leaf` entries) that no entry has as parent, in seq order. */
export function branchTips(log: SessionLog): LogEntry[] {
  const parents = new Set<string>();
  for (const e of log.entries())
    if (e.parentId !== null && e.type !== "leaf") parents.add(e.parentId);
  return log.entries().filter((e) => e.type !== "leaf" && !parents.has(e.id));
}

/** The whole log as JSON Lines (one entry per line, seq order, trailing newline). */
export function exportJsonl(log: SessionLog): string {
  const entries = log.entries();
  let out = "";
  for (const e of entries) out += `${JSON.stringify(e)}\n`;
  return out;
}

/**
 * Parses a JSONL export back into entries. Blank lines are skipped.
 * This is a pure function; a bad line is reported by number with the parser's message.
 */
export function parseJsonl(
  text: string,
): { ok: true; entries: LogEntry[] } | (Refusal<"INVALID_LINE"> & { line: number }) {
  const entries: LogEntry[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === "") continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (error) {
      return {
        ...refuse("INVALID_LINE", `line ${i + 1}: not JSON: ${(error as Error).message}`),
        line: i + 1,
      };
    }
    const checked = checkEntry(value);
    if (!checked.ok) {
      return {
        ...refuse(
          "INVALID_LINE",
          `line ${i + 1}: not a log entry of schema ${LOG_SCHEMA_VERSION} (${checked.problem}): ${line.slice(0, 200)}`,
        ),
        line: i + 1,
      };
    }
    entries.push(checked.entry);
  }
  return { ok: true, entries };
}

function moveTo(
  log: SessionLog,
  entryId: string | null,
  operation: string,
  withNote: boolean,
  reason: string | undefined,
  noteText: (id: string) => string,
): BranchResult {
  const turnId = log.openWork().turnId;
  if (turnId !== null) {
    return refuse(
      "TURN_OPEN",
      `cannot ${operation} while turn ${turnId} is running; interrupt it or await session.awaitIdle() first`,
    );
  }
  if (entryId !== null) {
    const target = log.get(entryId);
    if (!target) {
      return refuse(
        "UNKNOWN_ENTRY",
        `cannot ${operation} to ${entryId}: no such entry in session ${log.sessionId}; pick an id from session.entries() or branchTips()`,
      );
    }
    if (target.type === "leaf") {
      return refuse(
        "NOT_A_POSITION",
        `cannot ${operation} to ${entryId}: it is a leaf-move record, not a position; pick an entry of the branch (see branchTips())`,
      );
    }
  }
  const leaf = log.append({
    type: "leaf",
    leafId: entryId,
    reason: reason ?? operation,
  }) as EntryOf<"leaf">;
  const note = withNote
    ? (log.append({
        type: "note",
        text: noteText(entryId ?? "root"),
        audience: "model",
      }) as EntryOf<"note">)
    : null;
  return { ok: true, leaf, note };
}
