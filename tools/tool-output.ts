import { jsonProblem } from "../contracts/json-limits.ts";
import type {
  Continuation,
  ToolErrorCode,
  ToolFailure,
  ToolResult,
  ToolSuccess,
} from "../contracts/tool-result.ts";
import type { OutputBudget } from "./types.ts";
import { truncateUtf8, utf8Length } from "./utf8.ts";

const CODES: ReadonlySet<string> = new Set<ToolErrorCode>([
  "UNKNOWN_TOOL",
  "INVALID_ARGS",
  "TRUNCATED_CALL",
  "EXECUTION_FAILED",
  "CANCELLED",
  "OUTCOME_UNKNOWN",
  "DENIED",
  "PATH_OUTSIDE_WORKSPACE",
  "PARAMETER_MISMATCH",
  "NOT_FOUND",
  "TIMEOUT",
  "NO_RESULT_RECORDED",
]);

/**
 * Normalises what `execute` returned: a string becomes `{ ok: true, content }`; a well-formed
 * `ToolResult` is kept (copied, unknown fields dropped); anything else becomes an
 * `EXECUTION_FAILED` result explaining the expected shape. Pure; never throws.
 */
export function toToolResult(output: unknown, toolName = "tool"): ToolResult {
  if (typeof output === "string") return { ok: true, content: output };
  const problem = shapeProblem(output);
  if (problem === undefined) {
    const r = output as ToolResult;
    if (!r.ok) return { ok: false, code: r.code, message: r.message, retryable: r.retryable };
    const kept = keptData(r);
    // The log stores the continuation: one it cannot encode is dropped, and the model is told.
    const unstorable =
      r.continuation !== undefined ? jsonProblem(r.continuation, "continuation") : undefined;
    if (unstorable !== undefined) {
      return {
        ok: true,
        content: `${r.content}\n[${toolName}'s continuation was dropped: ${unstorable}; continuation args must be plain JSON.]`,
        ...(r.truncated !== undefined && { truncated: r.truncated }),
        ...kept,
      };
    }
    return {
      ok: true,
      content: r.content,
      ...(r.truncated !== undefined && { truncated: r.truncated }),
      ...(r.continuation !== undefined && { continuation: r.continuation }),
      ...kept,
    };
  }
  return {
    ok: false,
    code: "EXECUTION_FAILED",
    retryable: false,
    message: `${toolName} returned an invalid result (${problem}); expected a string, { ok: true, content: string, truncated?: boolean, continuation?: { tool, args } } or { ok: false, code, message: string, retryable: boolean }. Received: ${preview(output)}`,
  };
}

/**
 * A success's `structured` and `images`, when the log can store them: `structured` must be
 * plain JSON, each image `{ mediaType, base64 }` strings. What cannot be stored is dropped.
 */
function keptData(r: ToolSuccess): Pick<ToolSuccess, "structured" | "images"> {
  const out: Pick<ToolSuccess, "structured" | "images"> = {};
  if (r.structured !== undefined && jsonProblem(r.structured, "structured") === undefined) {
    out.structured = r.structured;
  }
  const images = Array.isArray(r.images)
    ? r.images.filter(
        (i) =>
          typeof i === "object" &&
          i !== null &&
          typeof i.mediaType === "string" &&
          typeof i.base64 === "string",
      )
    : [];
  if (images.length > 0)
    out.images = images.map((i) => ({ mediaType: i.mediaType, base64: i.base64 }));
  return out;
}

function shapeProblem(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null)
    return `a ${value === null ? "null" : typeof value}`;
  const r = value as Record<string, unknown>;
  if (r.ok === true) {
    if (typeof r.content !== "string") return "content is not a string";
    if (r.truncated !== undefined && typeof r.truncated !== "boolean")
      return "truncated is not a boolean";
    const c = r.continuation as Record<string, unknown> | undefined;
    if (
      c !== undefined &&
      (typeof c !== "object" ||
        c === null ||
        typeof c.tool !== "string" ||
        typeof c.args !== "object" ||
        c.args === null)
    ) {
      return "continuation is not { tool: string, args: object }";
    }
    return undefined;
  }
  if (r.ok === false) {
    if (typeof r.code !== "string" || !CODES.has(r.code))
      return `code ${preview(r.code)} is not a known ToolErrorCode`;
    if (typeof r.message !== "string") return "message is not a string";
    if (typeof r.retryable !== "boolean") return "retryable is not a boolean";
    return undefined;
  }
  return "ok is neither true nor false";
}

/**
 * An `EXECUTION_FAILED` result for a thrown value: `Name: message` plus at most 5 stack frames
 * (trimmed to `at fn (file:line:col)`). Pure; never throws.
 */
export function errorToResult(err: unknown): ToolFailure {
  let message: string;
  try {
    if (err instanceof Error) {
      // The stack starts with "Name: message": skip it, a message can be megabytes long.
      const header = `${err.name}: ${err.message}`;
      const stack = err.stack ?? "";
      const frames = (stack.startsWith(header) ? stack.slice(header.length) : stack.slice(-8192))
        .split("\n")
        .filter((l) => /^\s+at /.test(l))
        .slice(0, 5)
        .map((l) => `  ${l.trim()}`);
      message = `${err.name}: ${err.message}${frames.length > 0 ? `\n${frames.join("\n")}` : ""}`;
    } else {
      message = `threw a non-Error value: ${preview(err)}`;
    }
  } catch {
    message = "threw a value that cannot be described";
  }
  return {
    ok: false,
    code: "EXECUTION_FAILED",
    message: `Tool execution failed: ${message}`,
    retryable: false,
  };
}

export interface OutputBudgetOptions {
  toolName: string;
  args: unknown;
  /**
   * Contract: writes `content` in full to a file and resolves to its path and the content's
   * SHA-256 (hex); may reject, and the output is then truncated instead.
   */
  spill?: (content: string) => Promise<{ path: string; sha256: string }>;
  /**
   * Contract: pure; returns how to fetch the rest after `shownBytes` of `totalBytes`, or
   * undefined when the tool has no way to page (the model is told to narrow its request).
   */
  continuation?: (info: { shownBytes: number; totalBytes: number }) => Continuation | undefined;
}

/** Bytes of a spilled output kept inline as a preview. */
const SPILL_PREVIEW_BYTES = 4096;

/**
 * Keeps a successful result within `budget.maxBytes` (UTF-8 bytes, never splitting a
 * character). `truncate`: the head is kept with a note and `truncated: true`; a continuation
 * comes from the result itself, else from `options.continuation`, else the note says how to
 * narrow the request. `spill`: the whole content goes to `options.spill`, the result holds a
 * preview, a note with the path and hash, and a `read_file` continuation carrying both; if
 * spilling fails or is not provided, it truncates. A failure gets the same budget: a message
 * over it keeps its head and says how much was cut (a thrown error can embed a command's whole
 * output). Results within budget are returned unchanged. Never rejects.
 */
export async function applyOutputBudget(
  result: ToolResult,
  budget: OutputBudget,
  options: OutputBudgetOptions,
): Promise<ToolResult> {
  if (!result.ok) return boundFailure(result, budget.maxBytes);
  const totalBytes = utf8Length(result.content);
  if (totalBytes <= budget.maxBytes) return result;
  let spillError = "";
  if (budget.overflow === "spill" && options.spill) {
    try {
      const { path, sha256 } = await options.spill(result.content);
      const head = truncateUtf8(
        result.content,
        Math.min(SPILL_PREVIEW_BYTES, Math.floor(budget.maxBytes / 2)),
      );
      const nextLine = head.text.split("\n").length;
      const note = `\n[output of ${totalBytes} bytes exceeded the ${budget.maxBytes}-byte budget; the first ${head.bytes} bytes are shown and the full output was saved to ${path} (sha256 ${sha256}). Read the rest with read_file {"path": ${JSON.stringify(path)}, "offset": ${nextLine}}, or search it with grep.]`;
      return {
        ok: true,
        content: head.text + note,
        truncated: true,
        continuation: { tool: "read_file", args: { path, offset: nextLine }, path, sha256 },
        ...keptData(result),
      };
    } catch (err) {
      spillError = ` (saving the full output failed: ${err instanceof Error ? err.message : String(err)})`;
    }
  }
  const note = (shown: number, continuation: Continuation | undefined) => {
    const how = continuation
      ? `Continue with ${continuation.tool} ${safeJson(continuation.args)}.`
      : "To see more, narrow the request (e.g. a smaller range, a more specific pattern, or pipe through head/tail/grep).";
    return `\n[output truncated: first ${shown} of ${totalBytes} bytes shown${spillError}. ${how}]`;
  };
  // The note's size depends on the continuation, which depends on how much is shown: size it
  // with the widest numbers first, then build the real one (never larger).
  const draftCont =
    result.continuation ?? options.continuation?.({ shownBytes: totalBytes, totalBytes });
  const headBytes = Math.max(0, budget.maxBytes - utf8Length(note(totalBytes, draftCont)) - 32);
  const head = truncateUtf8(result.content, headBytes);
  const continuation =
    result.continuation ?? options.continuation?.({ shownBytes: head.bytes, totalBytes });
  const content = truncateUtf8(head.text + note(head.bytes, continuation), budget.maxBytes).text;
  return {
    ok: true,
    content,
    truncated: true,
    ...(continuation && { continuation }),
    ...keptData(result),
  };
}

/** A failure whose message fits `maxBytes` (UTF-8), with a note of what was cut. Pure. */
export function boundFailure(result: ToolFailure, maxBytes: number): ToolFailure {
  // A cheap upper bound first: most messages are far below any budget.
  if (result.message.length * 3 <= maxBytes) return result;
  const total = utf8Length(result.message);
  if (total <= maxBytes) return result;
  const head = truncateUtf8(result.message, Math.max(0, maxBytes - 160));
  const note = `\n[error message truncated: first ${head.bytes} of ${total} bytes shown (output budget ${maxBytes} bytes)]`;
  return { ...result, message: head.text + note };
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? "{}";
  } catch {
    return "{}";
  }
}

function preview(value: unknown): string {
  let text: string;
  try {
    text =
      typeof value === "string" ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  } catch {
    text = Object.prototype.toString.call(value);
  }
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/** The longest repair note a result carries (UTF-8 bytes): one line, however many repairs. */
export const MAX_REPAIR_NOTE_BYTES = 600;

const REPAIR_OPEN = "[Keel repaired this call before running it: ";
const REPAIR_CLOSE = ". Use the declared tool name, parameter names and types next time.]";

/**
 * The one line that tells the model how its call was read differently from how it sent it
 * (`PreparedCall.repairs`), so what the model believes ran is what ran. Empty when there was
 * no repair. At most `MAX_REPAIR_NOTE_BYTES`, with no line break. Pure.
 */
export function repairNote(repairs: readonly string[]): string {
  if (repairs.length === 0) return "";
  const what = repairs.join("; ").replace(/\s*[\r\n]+\s*/g, " ");
  const room = MAX_REPAIR_NOTE_BYTES - utf8Length(REPAIR_OPEN) - utf8Length(REPAIR_CLOSE);
  const cut = truncateUtf8(what, room - 3);
  return `${REPAIR_OPEN}${cut.cut ? `${cut.text}…` : what}${REPAIR_CLOSE}`;
}

/**
 * `result` with the repair note (see {@link repairNote}) as its last line: after a success's
 * content, or a failure's message. Unchanged when there was no repair. Pure.
 */
export function withRepairNote(result: ToolResult, repairs: readonly string[]): ToolResult {
  const note = repairNote(repairs);
  if (note === "") return result;
  if (result.ok) return { ...result, content: `${result.content}\n${note}` };
  return { ...result, message: `${result.message}\n${note}` };
}

/**
 * `result` without the repair note {@link withRepairNote} ended it with (its last line), as the
 * tool itself returned it: what a replay gives back for the runtime to note again. Pure.
 */
export function withoutRepairNote(result: ToolResult): ToolResult {
  const strip = (text: string) => {
    const at = text.lastIndexOf(`\n${REPAIR_OPEN}`);
    return at >= 0 && text.endsWith(REPAIR_CLOSE) ? text.slice(0, at) : text;
  };
  if (result.ok) return { ...result, content: strip(result.content) };
  return { ...result, message: strip(result.message) };
}
