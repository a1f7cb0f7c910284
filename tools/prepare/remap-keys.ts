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
 * name is the other plus a prefix or suffix of 3+ letters (`file_path` → `path`, `pattern` →
 * `search_pattern`); else within a small edit distance (1 for names up to 4 characters, else 2). A rename happens only when
 * exactly one declared, not-yet-supplied key matches and no other received key claims it.
 * Non-object schemas return the value unchanged. Pure; builds a new object with own
 * properties only (a `__proto__` key stays a plain key).
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
  if (rename.size === 0) return { value, remapped: [], unknown };
  const entries = received.map((k) => [rename.get(k) ?? k, value[k]] as const);
  return {
    value: Object.fromEntries(entries),
    remapped: [...rename].map(([from, to]) => `"${from}" → "${to}"`),
    unknown,
  };
}

function matchKey(key: string, candidates: string[]): string | undefined {
  if (key.length > 128) return undefined;
  const wanted = normalizeName(key);
  const same = candidates.filter((c) => normalizeName(c) === wanted);
  if (same.length > 0) return same.length === 1 ? same[0] : undefined;
  const affix = candidates.filter((c) => {
    const n = normalizeName(c);
    const [short, long] = n.length < wanted.length ? [n, wanted] : [wanted, n];
    return short.length >= 3 && short !== long && (long.endsWith(short) || long.startsWith(short));
  });
  if (affix.length === 1) return affix[0];
  if (affix.length > 1) return undefined;
  const limit = wanted.length <= 4 ? 1 : 2;
  let best: string | undefined;
  let bestDistance = limit + 1;
  let tied = false;
  for (const c of candidates) {
    const d = editDistance(wanted, normalizeName(c), limit);
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
      tied = false;
    } else if (d === bestDistance) tied = true;
  }
  return bestDistance <= limit && !tied ? best : undefined;
}
