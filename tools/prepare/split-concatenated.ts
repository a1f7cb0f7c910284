import { scanJsonValue, skipWs } from "./json-scan.ts";

/**
 * Splits `{..}{..}` (with or without whitespace between) into its objects, when the whole
 * text is two or more COMPLETE JSON objects and nothing else. Anything incomplete or not an
 * object anywhere → `undefined`, so a truncated tail is never accepted. Linear. Pure.
 */
export function splitConcatenated(text: string): Record<string, unknown>[] | undefined {
  const parts: Record<string, unknown>[] = [];
  let i = skipWs(text, 0);
  while (i < text.length) {
    if (text.charCodeAt(i) !== 0x7b) return undefined;
    const scan = scanJsonValue(text, i);
    if (!scan.ok) return undefined;
    parts.push(JSON.parse(text.slice(i, scan.end)) as Record<string, unknown>);
    i = skipWs(text, scan.end);
  }
  return parts.length >= 2 ? parts : undefined;
}
