import { jsonSchemaParameters, type LogEntry } from "../index.ts";

/**
 * A tool call a task expects the model to make: the tool's `name`, and optionally what its
 * arguments must satisfy — a JSON Schema of an object (in a JSON task set), or a predicate
 * (in a task set module). Without `arguments`, a call's arguments are valid when the tool did
 * not refuse them (no `INVALID_ARGS` or `TRUNCATED_CALL` result).
 */
export interface ExpectedCall {
  name: string;
  arguments?: Record<string, unknown> | ((args: Record<string, unknown>) => boolean);
}

/** One run's tool-call counts, from which the task's precision, recall and validity are summed. */
export interface ToolCounts {
  /** Calls the model made. */
  made: number;
  /** Of those, calls to a tool the task expects (whose arguments are checked). */
  chosen: number;
  /** Calls the task expects. */
  expected: number;
  /** Expected calls the model made (matched by tool name, each at most once). */
  matched: number;
  /** Of the calls to an expected tool, those whose arguments are valid. */
  valid: number;
}

/** The task's metrics over its runs: ratios of summed counts, null when nothing to divide by. */
export interface ToolMetrics {
  /**
   * matched / made: of the calls made, the share that matched an expected call (a call to a
   * tool the task does not expect, or one more call than it expects of a tool, lowers it).
   */
  toolPrecision: number | null;
  /** matched / expected: of the calls expected, the share the model made. */
  toolRecall: number | null;
  /** valid / chosen: of the calls to an expected tool, the share with valid arguments. */
  argumentValidity: number | null;
}

/** A compiled expectation: its name and its check of parsed arguments. */
interface Check {
  name: string;
  accepts?: (args: Record<string, unknown>) => boolean;
}

/**
 * Checks a task's `expectedCalls` and compiles their argument checks; throws an Error whose
 * message names the field (`field`) and what is wrong.
 */
export function compileExpectations(expected: unknown, field: string): Check[] {
  if (!Array.isArray(expected))
    throw new Error(`${field} must be an array of { name, arguments? }`);
  return expected.map((e, j) => {
    const at = `${field}[${j}]`;
    if (typeof e?.name !== "string" || e.name === "")
      throw new Error(`${at}.name must be the name of a tool`);
    const check = (e as ExpectedCall).arguments;
    if (check === undefined) return { name: e.name };
    if (typeof check === "function")
      return { name: e.name, accepts: (args) => check(args) === true };
    let schema: ReturnType<typeof jsonSchemaParameters>;
    try {
      schema = jsonSchemaParameters(check, `${at}.arguments`);
    } catch (err) {
      throw new Error((err as Error).message);
    }
    return { name: e.name, accepts: (args) => schema.safeParse(args).success };
  });
}

/** The codes with which a tool refused a call's arguments. */
const REFUSED = new Set(["INVALID_ARGS", "TRUNCATED_CALL"]);

/**
 * One run's counts from its log: every tool call of its committed assistant messages, with the
 * code of the result it got, measured against the task's expectations. A predicate that
 * throws counts the call as invalid. This is a pure function when the checks are.
 */
export function countToolCalls(entries: readonly LogEntry[], checks: readonly Check[]): ToolCounts {
  const calls: { name: string; text: string; code?: string }[] = [];
  const open = new Map<string, (typeof calls)[number]>();
  for (const e of entries) {
    if (e.type === "assistant_message") {
      for (const p of e.content) {
        if (p.type !== "tool-call") continue;
        const call = { name: p.name, text: p.arguments };
        calls.push(call);
        open.set(p.id, call);
      }
    } else if (e.type === "call_result") {
      const call = open.get(e.callId);
      if (call) call.code = e.result.ok ? undefined : e.result.code;
      open.delete(e.callId);
    }
  }
  const names = new Set(checks.map((c) => c.name));
  const chosen = calls.filter((c) => names.has(c.name));
  let matched = 0;
  for (const name of names) {
    const want = checks.filter((c) => c.name === name).length;
    matched += Math.min(want, chosen.filter((c) => c.name === name).length);
  }
  const valid = chosen.filter((c) => {
    const args = parseObject(c.text);
    if (args === undefined) return false;
    return checks
      .filter((k) => k.name === c.name)
      .some((k) => {
        if (!k.accepts) return c.code === undefined || !REFUSED.has(c.code);
        try {
          return k.accepts(args);
        } catch {
          return false;
        }
      });
  }).length;
  return { made: calls.length, chosen: chosen.length, expected: checks.length, matched, valid };
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(text === "" ? "{}" : text);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** The metrics of summed counts. This is a pure function. */
export function toolMetrics(counts: readonly ToolCounts[]): ToolMetrics {
  const sum = (k: keyof ToolCounts) => counts.reduce((a, c) => a + c[k], 0);
  const ratio = (a: number, b: number) => (b === 0 ? null : a / b);
  return {
    toolPrecision: ratio(sum("matched"), sum("made")),
    toolRecall: ratio(sum("matched"), sum("expected")),
    argumentValidity: ratio(sum("valid"), sum("chosen")),
  };
}
