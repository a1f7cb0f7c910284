/**
 * The loop guard (issue 17; seed: "每次失败都原样重试 … 重复同一个错误"): the same call — tool
 * and normalised arguments — failing the same way several times in a row is a loop. At
 * `repeats` in a row the model is told to change approach; at `failAfter` the turn chart ends
 * the turn `failed` with reason `loop_detected`. Pure: the turn chart keeps the streak in its
 * context and folds every result into it in the order they settle (`foldResults`).
 */
import type { ToolResult } from "../../contracts/tool-result.ts";

/** `createAgent({ loopGuard })`. Defaults: repeats 3, failAfter 2 × repeats. */
export interface LoopGuardOptions {
  /** Identical failures in a row after which the result tells the model to change approach. */
  repeats: number;
  /** Identical failures in a row at which the turn ends `failed` (`loop_detected`). */
  failAfter: number;
}

export const DEFAULT_LOOP_GUARD: Readonly<LoopGuardOptions> = Object.freeze({
  repeats: 3,
  failAfter: 6,
});

/**
 * Fills defaults and validates; `false` turns the guard off. Throws a TypeError naming the bad
 * option and what is expected (a boundary: `createAgent` calls it once).
 */
export function resolveLoopGuard(
  options: Partial<LoopGuardOptions> | false | undefined,
): LoopGuardOptions | false {
  if (options === false) return false;
  if (options !== undefined && (typeof options !== "object" || options === null)) {
    throw new TypeError(
      `createAgent: \`loopGuard\` must be { repeats?, failAfter? } or false, got ${String(options)}`,
    );
  }
  const repeats = options?.repeats ?? DEFAULT_LOOP_GUARD.repeats;
  const failAfter = options?.failAfter ?? 2 * repeats;
  if (!Number.isInteger(repeats) || repeats < 1) {
    throw new TypeError(
      `createAgent: \`loopGuard.repeats\` must be an integer ≥ 1, got ${String(repeats)}`,
    );
  }
  if (!Number.isInteger(failAfter) || failAfter < repeats) {
    throw new TypeError(
      `createAgent: \`loopGuard.failAfter\` must be an integer ≥ repeats (${repeats}), got ${String(failAfter)}`,
    );
  }
  return { repeats, failAfter };
}

/** The streak so far: the last result's failure signature and how many times in a row. */
export interface LoopState {
  readonly signature: string | undefined;
  readonly count: number;
  readonly tool: string | undefined;
}

export const NO_LOOP: LoopState = Object.freeze({
  signature: undefined,
  count: 0,
  tool: undefined,
});

/** JSON with object keys sorted at every depth, so `{a,b}` and `{b,a}` are one call. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort();
    const o = value as Record<string, unknown>;
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(",")}}`;
  }
  return JSON.stringify(value); // a JSON.parse result: never undefined
}

/**
 * The arguments text as the guard compares it: parsed and re-serialised with sorted keys and no
 * whitespace when it is JSON, else trimmed. This is a pure function.
 */
export function normaliseArguments(argumentsText: string): string {
  const text = argumentsText.trim();
  if (text === "") return "{}";
  try {
    return canonical(JSON.parse(text));
  } catch {
    return text;
  }
}

/**
 * What identifies "the same call failing the same way": tool, normalised arguments, error code
 * and message. Undefined for a success (a success breaks any streak). This is a pure function.
 */
export function failureSignature(
  tool: string,
  argumentsText: string,
  result: ToolResult,
): string | undefined {
  if (result.ok) return undefined;
  return JSON.stringify([tool, normaliseArguments(argumentsText), result.code, result.message]);
}

export type LoopVerdict = "none" | "warn" | "stop";

/**
 * Adds one settled result to the streak: the same signature as the last one extends it, any
 * other result restarts it (a success ends it). The verdict is `warn` from `repeats` in a row,
 * `stop` from `failAfter`. This is a pure function.
 */
export function observeResult(
  state: LoopState,
  tool: string,
  signature: string | undefined,
  options: LoopGuardOptions,
): { state: LoopState; verdict: LoopVerdict } {
  if (signature === undefined) return { state: NO_LOOP, verdict: "none" };
  const count = signature === state.signature ? state.count + 1 : 1;
  const next: LoopState = { signature, count, tool };
  const verdict = count >= options.failAfter ? "stop" : count >= options.repeats ? "warn" : "none";
  return { state: next, verdict };
}

/** The note appended to a looping call's failure, telling the model to change approach. */
export function loopNote(tool: string, count: number, verdict: "warn" | "stop"): string {
  const base = `[loop guard: this exact call (${tool} with the same arguments) has now failed the same way ${count} times in a row. Repeating it will not help: change approach — different arguments, another tool, or ask the user.`;
  return verdict === "stop" ? `${base} The turn is ended (loop_detected).]` : `${base}]`;
}

/** One settled result as the loop guard reads it: its call, tool and failure signature. */
export interface ObservedResult {
  callId: string;
  tool: string;
  /** {@link failureSignature} of the result; undefined for a success. */
  signature?: string;
}

/** A result the model is told about: the streak it made reached `repeats` (warn) or more. */
export interface LoopWarning {
  callId: string;
  tool: string;
  repeats: number;
}

/**
 * Adds results to the streak in the order given (the order they settled), with
 * {@link observeResult}: the streak after them, and a warning for each result whose verdict was
 * `warn` or `stop`. This is a pure function.
 */
export function foldResults(
  state: LoopState,
  results: readonly ObservedResult[],
  options: LoopGuardOptions,
): { state: LoopState; warned: LoopWarning[] } {
  let next = state;
  const warned: LoopWarning[] = [];
  for (const r of results) {
    const observed = observeResult(next, r.tool, r.signature, options);
    next = observed.state;
    if (observed.verdict !== "none") {
      warned.push({ callId: r.callId, tool: r.tool, repeats: next.count });
    }
  }
  return { state: next, warned };
}
