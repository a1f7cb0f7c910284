import { describeChar, type JsonSyntaxError, scanJsonValue, skipWs } from "./json-scan.ts";

export type ParseResult = { ok: true; value: unknown } | { ok: false; error: JsonSyntaxError };

/**
 * Strict JSON parse. Valid text costs one `JSON.parse`; invalid text is scanned once more to
 * locate the first error (offset and reason) without depending on the engine's message
 * wording. Never completes, trims or guesses. Pure; never throws.
 */
export function parseJson(text: string): ParseResult {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (err) {
    return { ok: false, error: locateError(text, err) };
  }
}

function locateError(text: string, err: unknown): JsonSyntaxError {
  const scan = scanJsonValue(text, 0);
  if (!scan.ok) return scan.error;
  const rest = skipWs(text, scan.end);
  if (rest < text.length) {
    return {
      offset: rest,
      reason: `unexpected ${describeChar(text, rest)} after the end of the JSON value`,
    };
  }
  // The scanner accepts what JSON.parse rejected (should not happen): report the engine's reason.
  return { offset: 0, reason: err instanceof Error ? err.message : String(err) };
}
