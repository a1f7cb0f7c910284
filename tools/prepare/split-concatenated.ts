import { scanJsonValue, skipWs } from "./json-scan.ts";

/** Concatenated objects read from one call's arguments; more are refused, not tried one by one. */
export const MAX_CONCATENATED_OBJECTS = 16;

/**
 * Splits `{..}{..}` (with or without whitespace between) into its objects, when the whole
 * text is two or more COMPLETE JSON objects and nothing else. Anything incomplete or not an
 * object anywhere → `undefined`, so a truncated tail is never accepted. Stops after
 * `MAX_CONCATENATED_OBJECTS + 1` objects: a result that long means "too many" (the rest is
 * neither read nor checked). Linear. Pure.
 */
export function splitConcatenated(text: string): Record<string, unknown>[] | undefined {
  const parts: Record<string, unknown>[] = [];
  let i = skipWs(text, 0);
  while (i < text.length && parts.length <= MAX_CONCATENATED_OBJECTS) {
    if (text.charCodeAt(i) !== 0x7b) return undefined;
    const scan = scanJsonValue(text, i);
    if (!scan.ok) return undefined;
    parts.push(JSON.parse(text.slice(i, scan.end)) as Record<string, unknown>);
    i = skipWs(text, scan.end);
  }
  return parts.length >= 2 ? parts : undefined;
}
