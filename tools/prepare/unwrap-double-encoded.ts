import type { JsonSyntaxError } from "./json-scan.ts";
import { parseJson } from "./parse-json.ts";

export type UnwrapResult =
  | { kind: "unchanged" }
  | { kind: "unwrapped"; value: unknown; warning: string }
  | { kind: "invalid"; inner: string; error: JsonSyntaxError };

/**
 * A JSON string whose content is itself a JSON object or array (`"{\"a\":1}"`) is unwrapped
 * one level. A string that looks like an object (`{` first) but does not parse strictly is
 * reported with the error located in the inner text. Other strings are left alone. Pure.
 */
export function unwrapDoubleEncoded(value: unknown): UnwrapResult {
  if (typeof value !== "string") return { kind: "unchanged" };
  const first = value.trimStart()[0];
  if (first !== "{" && first !== "[") return { kind: "unchanged" };
  const inner = parseJson(value);
  if (!inner.ok) return { kind: "invalid", inner: value, error: inner.error };
  return {
    kind: "unwrapped",
    value: inner.value,
    warning: "arguments were double-encoded (a JSON string holding JSON); unwrapped one level",
  };
}
