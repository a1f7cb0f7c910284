/**
 * Levenshtein distance between `a` and `b`, or `limit + 1` as soon as it is known to exceed
 * `limit`. Inputs longer than 256 code units are compared on their first 256, so a huge
 * model-supplied name never costs more than 256² steps. This is a pure function.
 */
export function editDistance(a: string, b: string, limit = 64): number {
  const x = a.length > 256 ? a.slice(0, 256) : a;
  const y = b.length > 256 ? b.slice(0, 256) : b;
  if (Math.abs(x.length - y.length) > limit) return limit + 1;
  let prev = new Array<number>(y.length + 1);
  let cur = new Array<number>(y.length + 1);
  for (let j = 0; j <= y.length; j++) prev[j] = j;
  for (let i = 1; i <= x.length; i++) {
    cur[0] = i;
    let rowMin = i;
    for (let j = 1; j <= y.length; j++) {
      const cost = x.charCodeAt(i - 1) === y.charCodeAt(j - 1) ? 0 : 1;
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
      if (cur[j] < rowMin) rowMin = cur[j];
    }
    if (rowMin > limit) return limit + 1;
    [prev, cur] = [cur, prev];
  }
  return prev[y.length];
}

/** Lower-case and drop `-`, `_` and spaces: `Read-File`, `read_file`, `readFile` → `readfile`. */
export function normalizeName(name: string): string {
  return name.toLowerCase().replace(/[-_\s]/g, "");
}

/**
 * The candidate closest to `name` by edit distance, if within `max(2, ⌊len/3⌋)` edits and not
 * tied with another candidate at the same distance. Pure.
 */
export function closestName(name: string, candidates: Iterable<string>): string | undefined {
  const limit = Math.max(2, Math.floor(Math.min(name.length, 64) / 3));
  let best: string | undefined;
  let bestDistance = limit + 1;
  let tied = false;
  const wanted = normalizeName(name);
  for (const candidate of candidates) {
    const d = Math.min(
      editDistance(name, candidate, limit),
      editDistance(wanted, normalizeName(candidate), limit),
    );
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
      tied = false;
    } else if (d === bestDistance && best !== undefined && best !== candidate) {
      tied = true;
    }
  }
  return bestDistance <= limit && !tied ? best : undefined;
}
