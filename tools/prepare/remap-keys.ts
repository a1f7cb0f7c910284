import { z } from "zod";
import { editDistance, normalizeName } from "../edit-distance.ts";

export interface RemapResult {
  value: Record<string, unknown>;
  /** e.g. `"filePath" → "file_path"`. */
  remapped: string[];
  /** Keys the schema does not know and no unambiguous remap exists for. */
  unknown: string[];
}

/**
 * Renames top-level keys the schema does not declare to a declared key the model evidently
 * meant: same name ignoring case, `-` and `_` (`FilePath`, `file-path` → `file_path`); else one
 * name (of 3+ letters) is the start or end of the other (`file_path` → `path`, `pattern` →
 * `search_pattern`, `query` → `query_text`); else within a small edit distance (1 for names up
 * to 4 characters, else 2). At each step a rename happens only when exactly one declared,
 * not-yet-supplied key matches (a tie binds nothing, and no later step is tried) and no other
 * received key claims it. Keys over 128 characters are never renamed. Non-object schemas return
 * the value unchanged. Pure; builds a new object with own properties only (a `__proto__` key
 * stays a plain key).
 */
export function remapKeys(value: Record<string, unknown>, schema: z.ZodType): RemapResult {
  if (!(schema instanceof z.ZodObject)) return { value, remapped: [], unknown: [] };
  const declared = Object.keys(schema.shape);
  const declaredSet = new Set(declared);
  const received = Object.keys(value);
  const free = declared.filter((k) => !Object.hasOwn(value, k));
  const claims = new Map<string, string[]>();
  const unknown: string[] = [];
  for (const key of received) {
    if (declaredSet.has(key)) continue;
    const target = matchKey(key, free);
    if (target === undefined) unknown.push(key);
    else claims.set(target, [...(claims.get(target) ?? []), key]);
  }
  const rename = new Map<string, string>();
  for (const [target, keys] of claims) {
    if (keys.length === 1) rename.set(keys[0], target);
    else unknown.push(...keys);
  }
  return {
    value: Object.fromEntries(received.map((k) => [rename.get(k) ?? k, value[k]])),
    remapped: [...rename].map(([from, to]) => `"${from}" → "${to}"`),
    unknown,
  };
}

function matchKey(key: string, candidates: string[]): string | undefined {
  if (key.length > 128) return undefined;
  const wanted = normalizeName(key);
  const names = candidates.map(normalizeName);
  const same = candidates.filter((_, i) => names[i] === wanted);
  if (same.length > 0) return only(same);
  const affix = candidates.filter((_, i) => isAffix(names[i], wanted) || isAffix(wanted, names[i]));
  if (affix.length > 0) return only(affix);
  const limit = wanted.length <= 4 ? 1 : 2;
  const distances = names.map((n) => editDistance(wanted, n, limit));
  const nearest = Math.min(...distances);
  return nearest <= limit ? only(candidates.filter((_, i) => distances[i] === nearest)) : undefined;
}

/** `part` (3+ letters) starts or ends `whole`; both differ here, as equal names matched before. */
function isAffix(part: string, whole: string): boolean {
  return part.length >= 3 && (whole.startsWith(part) || whole.endsWith(part));
}

/** The one element, or undefined when there are several (a tie binds nothing). */
function only(matches: string[]): string | undefined {
  return matches.length === 1 ? matches[0] : undefined;
}
