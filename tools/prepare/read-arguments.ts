import { describeJsonType, isJsonObject } from "./describe-json-type.ts";
import { type JsonSyntaxError, skipWs } from "./json-scan.ts";
import { parseJson } from "./parse-json.ts";
import { splitConcatenated } from "./split-concatenated.ts";
import { unwrapDoubleEncoded } from "./unwrap-double-encoded.ts";

/** What the arguments text holds, before names are remapped and the schema runs. */
export type ReadArguments =
  /** One or more candidate objects (several when the text was `{..}{..}`), in text order. */
  | { kind: "objects"; candidates: Record<string, unknown>[]; warnings: string[] }
  /** Not JSON: `raw` is the text to wrap as `{ raw }` for the error message. `inner` when the
   * broken JSON was inside a double-encoded string. */
  | { kind: "syntax"; error: JsonSyntaxError; text: string; inner: boolean; warnings: string[] }
  /** Valid JSON but not an object (number, array, string, null, boolean). */
  | { kind: "not-object"; received: string; warnings: string[] };

/** The warning for a dropped byte-order mark: an encoding artifact, not a repair of what the model meant. */
export const BOM_WARNING = "dropped a leading byte-order mark (U+FEFF)";

/**
 * Steps 1–5 of preparation, in order: a leading byte-order mark is dropped; empty or
 * whitespace-only text means `{}`; strict parse; on failure, two or more complete concatenated
 * objects become candidates; a string holding JSON is unwrapped once; a non-object is
 * reported. Nothing here completes truncated text. Linear in the text length. Pure.
 */
export function readArguments(argumentsText: string): ReadArguments {
  const warnings: string[] = [];
  let text = argumentsText;
  if (text.charCodeAt(0) === 0xfeff) {
    text = text.slice(1);
    warnings.push(BOM_WARNING);
  }
  if (skipWs(text, 0) === text.length) return { kind: "objects", candidates: [{}], warnings };
  const parsed = parseJson(text);
  if (!parsed.ok) {
    // Only two or more complete objects split, and JSON.parse rejects exactly those.
    const parts = splitConcatenated(text);
    if (parts) return { kind: "objects", candidates: parts, warnings };
    return { kind: "syntax", error: parsed.error, text, inner: false, warnings };
  }
  let value = parsed.value;
  const unwrapped = unwrapDoubleEncoded(value);
  if (unwrapped.kind === "invalid") {
    return { kind: "syntax", error: unwrapped.error, text: unwrapped.inner, inner: true, warnings };
  }
  if (unwrapped.kind === "unwrapped") {
    value = unwrapped.value;
    warnings.push(unwrapped.warning);
  }
  if (!isJsonObject(value))
    return { kind: "not-object", received: describeJsonType(value), warnings };
  return { kind: "objects", candidates: [value], warnings };
}
