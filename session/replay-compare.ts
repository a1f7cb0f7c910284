import type { LogEntry } from "./entries.ts";

/**
 * Where a replayed log first differs from the recorded one: the recorded entry's seq and type
 * (or the replay's, when the recording ended first), the field that differs (a dotted path, empty
 * for the entry's type or a missing entry) and both values, as compact JSON.
 */
export interface Divergence {
  /** The seq of the first entry that differs (the recorded one's; the replay's past its end). */
  seq: number;
  /** The recorded entry's type, or `(none)` when the replay wrote more than the recording. */
  type: string;
  /** The field that differs, e.g. `content.1.arguments`; empty when the entries' types differ. */
  path: string;
  /** What the recording holds there (JSON, clipped). */
  expected: string;
  /** What the replay wrote there (JSON, clipped). */
  got: string;
}

/**
 * Fields compared through the id map instead of as they are: ids that are random by nature
 * (entry, turn, inbox, request and generated call ids) and the strings that embed them (an
 * attempt id is its turn's id plus `.aN`, an idempotency key is `session:entry:call`).
 */
const ID_FIELDS = new Set([
  "id",
  "parentId",
  "turnId",
  "attemptId",
  "inboxId",
  "requestId",
  "callId",
  "from",
  "leafId",
  "targetId",
  "firstKeptId",
  "idempotencyKey",
]);
/** Never compared: when an entry was written, and its place in the store (checked as order). */
const SKIPPED = new Set(["seq", "at"]);
/** The parts of an id-bearing string that may be ids (base64url runs; `.`, `:` separate). */
const TOKEN = /[A-Za-z0-9_-]+/g;
const MAX_SHOWN = 300;

/**
 * Compares a replayed log with the recorded one, entry by entry in seq order, and returns the
 * first divergence (undefined when they agree). What is compared: each entry's type and every
 * field of its payload, nested content included (messages, tool calls with their ids and
 * arguments, results, statuses, reasons), and the links between entries (`parentId`, edit
 * targets). What is not: `at` (time), `seq` (the order is compared instead), a usage and cost Keel
 * estimated on both sides (`usageEstimated`), and the value of ids
 * that are random by nature: the first time a recorded id meets a replayed one at the same place
 * they are paired, and from then on every occurrence (inside other strings too) must agree with
 * that pairing, both ways. This is a pure function.
 */
export function firstDivergence(
  recorded: readonly LogEntry[],
  replayed: readonly LogEntry[],
): Divergence | undefined {
  const ids = new IdMap();
  const n = Math.max(recorded.length, replayed.length);
  for (let i = 0; i < n; i++) {
    const want = recorded[i];
    const got = replayed[i];
    if (want === undefined || got === undefined) {
      const entry = (want ?? got)!;
      return {
        seq: entry.seq,
        type: want?.type ?? "(none)",
        path: "",
        expected: want ? shown(want) : "(the recording ends here)",
        got: got ? shown(got) : "(the replay wrote nothing more)",
      };
    }
    if (want.type !== got.type) {
      return { seq: want.seq, type: want.type, path: "", expected: shown(want), got: shown(got) };
    }
    const path = differ(estimateless(want, got), estimateless(got, want), ids, "", false);
    if (path !== undefined) {
      return {
        seq: want.seq,
        type: want.type,
        path,
        expected: shown(at(estimateless(want, got), path)),
        got: shown(at(estimateless(got, want), path)),
      };
    }
  }
  return undefined;
}

/**
 * `entry` without the usage and cost Keel estimated, when both sides estimated them (a provider
 * that reported none): an estimate counts the request's text, whose random ids differ in length
 * between a run and its replay; that both were estimated is still compared.
 */
function estimateless(entry: LogEntry, other: LogEntry): LogEntry {
  const estimated = (e: LogEntry) => "usageEstimated" in e && e.usageEstimated === true;
  if (!estimated(entry) || !estimated(other)) return entry;
  const {
    usage: _usage,
    cost: _cost,
    ...rest
  } = entry as LogEntry & { usage?: unknown; cost?: unknown };
  return rest as LogEntry;
}

/** The path of the first field where `a` and `b` differ, or undefined. */
function differ(a: unknown, b: unknown, ids: IdMap, path: string, id: boolean): string | undefined {
  if (typeof a === "string" && typeof b === "string") {
    if (id) return ids.pair(a, b) ? undefined : path;
    return a === b || ids.translate(a) === b ? undefined : path;
  }
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") {
    return Object.is(a, b) ? undefined : path;
  }
  if (Array.isArray(a) !== Array.isArray(b)) return path;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) {
    if (path === "" && SKIPPED.has(key)) continue;
    const va = (a as Record<string, unknown>)[key];
    const vb = (b as Record<string, unknown>)[key];
    const inner = path === "" ? key : `${path}.${key}`;
    if (va === undefined || vb === undefined) {
      if (va !== vb) return inner;
      continue;
    }
    const found = differ(va, vb, ids, inner, id || ID_FIELDS.has(key));
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Recorded ids paired with replayed ones, one to one. */
class IdMap {
  private readonly forward = new Map<string, string>();
  private readonly backward = new Map<string, string>();

  /**
   * Whether the recorded id-bearing string `a` agrees with the replayed `b`: each of its tokens
   * already paired must map to the token at the same place of `b`, and an unpaired one is paired
   * now (unless its counterpart is already another's).
   */
  pair(a: string, b: string): boolean {
    if (a === b && !this.forward.has(a) && !this.backward.has(b)) return true;
    const left = a.match(TOKEN) ?? [];
    const right = b.match(TOKEN) ?? [];
    if (left.length !== right.length || a.replace(TOKEN, "") !== b.replace(TOKEN, "")) return false;
    for (let i = 0; i < left.length; i++) {
      const mapped = this.forward.get(left[i]);
      if (mapped !== undefined) {
        if (mapped !== right[i]) return false;
        continue;
      }
      if (left[i] === right[i] && !this.backward.has(right[i])) continue;
      if (this.backward.has(right[i])) return false;
      this.forward.set(left[i], right[i]);
      this.backward.set(right[i], left[i]);
    }
    return true;
  }

  /** `text` with every paired id in it replaced by its replayed counterpart. */
  translate(text: string): string {
    if (this.forward.size === 0) return text;
    return text.replace(TOKEN, (token) => this.forward.get(token) ?? token);
  }
}

function at(value: unknown, path: string): unknown {
  if (path === "") return value;
  let current = value;
  for (const key of path.split(".")) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

function shown(value: unknown): string {
  if (value === undefined) return "(absent)";
  let text: string;
  if (value !== null && typeof value === "object" && "type" in value && "seq" in value) {
    const { id: _id, parentId: _parent, at: _at, ...rest } = value as LogEntry;
    text = JSON.stringify(rest);
  } else text = JSON.stringify(value);
  return text.length <= MAX_SHOWN ? text : `${text.slice(0, MAX_SHOWN - 1)}…`;
}
