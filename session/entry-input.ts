// What an input must be to join a session's log, and the entry it becomes: the entries it may
// point at, an encodable copy when the store could not encode it, and the stamped fields (id,
// parent, seq, time). Kept apart from session/log.ts, which holds the log's state and order.
import { jsonProblem, MAX_JSON_DEPTH, toEncodable } from "../contracts/json-limits.ts";
import type { EntryInput, EntryWriter, LogEntry } from "./entries.ts";
import { flat } from "./flat.ts";

/** An entry's own levels (entry → result → continuation → args) above the values' limit. */
const ENTRY_DEPTH = MAX_JSON_DEPTH + 4;

/**
 * Throws a `TypeError` saying what to pass instead when `input` refers to an entry the log
 * cannot take: a leaf move to an unknown id or to another leaf entry, a `context_edit` of an
 * unknown entry, a `compaction` whose first kept entry is not on the active path. `get` and
 * `path` are the log's readers (its history must be loaded for a leaf move).
 * This is a pure function.
 */
export function checkEntryRefs(
  input: EntryInput,
  sessionId: string,
  get: (id: string) => LogEntry | undefined,
  path: () => readonly LogEntry[],
): void {
  if (input.type === "leaf" && input.leafId !== null) {
    const target = get(input.leafId);
    if (!target || target.type === "leaf") {
      throw new TypeError(
        `leaf entry: leafId ${JSON.stringify(input.leafId)} is ${target ? "a leaf entry, not a position" : "not an entry of this session"}; pass the id of a message-bearing entry, or null for the root`,
      );
    }
  } else if (input.type === "context_edit" && !get(input.targetId)) {
    throw new TypeError(
      `context_edit: targetId ${JSON.stringify(input.targetId)} is not an entry of session ${sessionId}; pass the id of an existing entry (see messageSources())`,
    );
  } else if (input.type === "compaction" && !path().some((e) => e.id === input.firstKeptId)) {
    throw new TypeError(
      `compaction: firstKeptId ${JSON.stringify(input.firstKeptId)} is not on the active path; pass the id of the first entry to keep (an entry of path())`,
    );
  }
}

/**
 * `input` as the frozen entry it becomes at `seq`, after `parentId`, stamped `at`; `suffix` is
 * the random part of its id. Input the store could not encode (a `BigInt`, nesting deeper than
 * the JSON limit, a cycle, a throwing `toJSON`) becomes an encodable copy with
 * `encodingProblem` saying what was replaced: one bad value never makes a flush fail, which would
 * lose every entry queued with it. `writer`: set on the entry when given (the log passes it on
 * the first entry a Keel writes to a session another Keel, or none, stamped last).
 */
export function stampEntry(
  input: EntryInput,
  seq: number,
  parentId: string | null,
  at: number,
  suffix: string,
  writer?: EntryWriter,
): LogEntry {
  const problem = jsonProblem(input, "entry", ENTRY_DEPTH);
  if (problem !== undefined) {
    input = Object.assign(toEncodable(input, ENTRY_DEPTH) as EntryInput, {
      encodingProblem: problem,
    });
  }
  // The seq (base 36, fixed width) leads the id, so ids grow with seq: SQLite's unique index on
  // (session, id) then appends at its right edge instead of writing a random page per commit
  // (bench/FIGURES.md, "Costs behind code choices"). The random rest keeps ids unique beyond
  // one session.
  const id = flat(`e${seq.toString(36).padStart(7, "0")}${suffix}`);
  // Object.assign onto a literal is ~8× cheaper than a spread here; the base fields are
  // written again afterwards so input can never override them.
  const entry = Object.assign({ id, parentId, seq, at }, input) as unknown as LogEntry;
  entry.id = id;
  entry.parentId = parentId;
  entry.seq = seq;
  entry.at = at;
  if (writer) entry.writer = writer;
  return Object.freeze(entry);
}
