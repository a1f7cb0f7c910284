// What every layer may hand to the log: JSON a store can encode, within a depth bound.

/**
 * How deep a value stored in the log (tool arguments, a result's continuation, settings) may
 * nest. `JSON.stringify` recurses once per level: thousands of levels overflow the stack in
 * the store's encoder, so arguments deeper than this are refused (`INVALID_ARGS`) and any
 * other value is stored bounded.
 */
export const MAX_JSON_DEPTH = 64;

/** Arguments text longer than this (UTF-16 units, ≈ bytes for ASCII) is refused before parsing. */
export const MAX_ARGUMENTS_CHARS = 16 * 1024 * 1024;

/**
 * Why `JSON.stringify(value)` would throw or lose the value's shape in the log — a `BigInt`,
 * nesting deeper than `maxDepth` (a cycle counts as that), a `toJSON` that throws, a getter
 * that throws — with the path of the first problem (`args.a[3].b`); undefined when the value
 * encodes. Recursion is bounded by `maxDepth`, so it never overflows the stack.
 * This is a pure function (apart from calling `toJSON` methods and getters, as JSON would).
 */
export function jsonProblem(
  value: unknown,
  path = "value",
  maxDepth = MAX_JSON_DEPTH,
): string | undefined {
  return check(value, path, 0, maxDepth);
}

function check(value: unknown, path: string, depth: number, max: number): string | undefined {
  if (typeof value === "bigint") return `a BigInt at ${path} (JSON has no BigInt)`;
  if (typeof value !== "object" || value === null) return undefined;
  if (depth >= max) return `${path} nests deeper than ${max} levels (the limit), or is circular`;
  let v: unknown = value;
  try {
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function") {
      v = toJSON.call(value, "");
      if (typeof v !== "object" || v === null) return check(v, path, depth, max);
    }
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const p = check(v[i], `${path}[${i}]`, depth + 1, max);
        if (p) return p;
      }
      return undefined;
    }
    for (const key of Object.keys(v as object)) {
      const p = check((v as Record<string, unknown>)[key], `${path}.${key}`, depth + 1, max);
      if (p) return p;
    }
    return undefined;
  } catch (err) {
    return `${path} cannot be read (${err instanceof Error ? err.message : String(err)})`;
  }
}

/**
 * A copy of `value` that `JSON.stringify` encodes: a `BigInt` becomes its decimal string,
 * anything nested deeper than `maxDepth` (or circular) becomes the string
 * `"[nested deeper than N levels]"`, a throwing `toJSON` or getter `"[unreadable: why]"`.
 * Everything else is kept as JSON would see it. Pure, bounded recursion.
 */
export function toEncodable(value: unknown, maxDepth = MAX_JSON_DEPTH): unknown {
  return copy(value, 0, maxDepth);
}

function copy(value: unknown, depth: number, max: number): unknown {
  if (typeof value === "bigint") return value.toString();
  if (typeof value !== "object" || value === null) return value;
  if (depth >= max) return `[nested deeper than ${max} levels]`;
  try {
    let v: unknown = value;
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === "function") {
      v = toJSON.call(value, "");
      if (typeof v !== "object" || v === null) return copy(v, depth, max);
    }
    if (Array.isArray(v)) return v.map((item) => copy(item, depth + 1, max));
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(v as object)) {
      out[key] = copy((v as Record<string, unknown>)[key], depth + 1, max);
    }
    return out;
  } catch (err) {
    return `[unreadable: ${err instanceof Error ? err.message : String(err)}]`;
  }
}
