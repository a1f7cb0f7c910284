import type { OutputBudget, ResolvedTraits, Risk, ToolTraits } from "./types.ts";

/** Output budget used when a tool declares none (or an invalid one): 32 KiB, truncated. */
export const DEFAULT_OUTPUT_BUDGET: OutputBudget = Object.freeze({
  maxBytes: 32 * 1024,
  overflow: "truncate",
}) as OutputBudget;

/**
 * The default output budget for a model's window: a tool result may take at most a quarter of
 * the usable window (4 bytes a token), between 1 KiB and {@link DEFAULT_OUTPUT_BUDGET}; undefined
 * when the window is unknown or large enough for the default (a 32 KiB result in a 4k window
 * overflowed every request that carried it). This is a pure function.
 */
export function windowOutputBudget(
  window: number | undefined,
  reserve = 0,
): OutputBudget | undefined {
  if (window === undefined || !Number.isFinite(window)) return undefined;
  const bytes = Math.max(1024, Math.floor(window - reserve));
  if (bytes >= DEFAULT_OUTPUT_BUDGET.maxBytes) return undefined;
  return { maxBytes: bytes, overflow: "truncate" };
}

const RISKS: readonly Risk[] = ["low", "medium", "high"];

/**
 * Fills in every trait. Missing, mistyped or unknown values are read conservatively:
 * not read-only, not concurrency-safe, not idempotent, not cancellable, risk `high` (`low` for
 * a tool declared `readOnly: true`, which changes nothing; a declared risk wins), execution mode `parallel` (the batch decides by concurrency safety), the default output
 * budget. Only a literal `true` turns a boolean trait on. Pure; never throws.
 */
export function resolveTraits(traits?: ToolTraits<never> | unknown): ResolvedTraits {
  const t = (typeof traits === "object" && traits !== null ? traits : {}) as Record<
    string,
    unknown
  >;
  const readOnly = t.readOnly === true;
  return {
    readOnly,
    concurrencySafe: t.concurrencySafe === true,
    idempotent: t.idempotent === true,
    cancellable: t.cancellable === true,
    risk: RISKS.includes(t.risk as Risk) ? (t.risk as Risk) : readOnly ? "low" : "high",
    outputBudget: resolveBudget(t.outputBudget),
    executionMode: t.executionMode === "sequential" ? "sequential" : "parallel",
  };
}

function resolveBudget(value: unknown): OutputBudget {
  if (typeof value !== "object" || value === null) return { ...DEFAULT_OUTPUT_BUDGET };
  const { maxBytes, overflow } = value as Record<string, unknown>;
  const validBytes =
    typeof maxBytes === "number" && Number.isInteger(maxBytes) && maxBytes > 0
      ? maxBytes
      : DEFAULT_OUTPUT_BUDGET.maxBytes;
  return { maxBytes: validBytes, overflow: overflow === "spill" ? "spill" : "truncate" };
}
