import type { z } from "zod";
import { isJsonObject } from "./describe-json-type.ts";
import { parseJson } from "./parse-json.ts";
import { formatPath } from "./validate-args.ts";

export interface FieldRepairs {
  /** The arguments with every repaired field replaced (a copy; the input is not changed). */
  value: Record<string, unknown>;
  /** One phrase per repaired field, e.g. `"tags" was a JSON string; read it as an array`. */
  repairs: string[];
}

/** Rounds of repair: a string holding one object where an array is wanted takes two. */
const MAX_ROUNDS = 4;

/** What zod names in `expected` for a value that must be a JSON array or object. */
const WANTS_ARRAY = new Set(["array", "tuple"]);
const WANTS_OBJECT = new Set(["object", "record"]);

/**
 * Repairs the fields the schema says have the wrong shape, when the model evidently meant the
 * right one: a JSON string where an array or object is expected is parsed (only when it parses
 * strictly to that kind); one object where an array is expected becomes an array of that
 * object. Driven by the schema's own `invalid_type` issues, so a field whose schema accepts a
 * string is never touched, and nested fields (`edits[0].lines`) are reached. Returns the
 * repaired copy only if it then passes the schema; otherwise undefined (the caller reports the
 * original problems). Linear in the size of the value per round, at most 4 rounds. Pure apart
 * from running the schema (a schema that throws is treated as no repair); never throws.
 */
export function repairFields(
  schema: z.ZodType,
  value: Record<string, unknown>,
): FieldRepairs | undefined {
  let current = value;
  const repairs: string[] = [];
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const issues = issuesOf(schema, current);
    if (issues === undefined) return undefined;
    if (issues.length === 0) return repairs.length > 0 ? { value: current, repairs } : undefined;
    let changed = false;
    for (const issue of issues) {
      if (issue.code !== "invalid_type" || issue.path.length === 0) continue;
      const expected = String((issue as { expected?: unknown }).expected);
      const found = valueAt(current, issue.path);
      if (!found.ok) continue;
      const fix = repairValue(found.value, expected);
      if (fix === undefined) continue;
      current = withValueAt(current, issue.path, fix.value) as Record<string, unknown>;
      repairs.push(`"${formatPath(issue.path)}" ${fix.what}`);
      changed = true;
    }
    if (!changed) return undefined;
  }
  const issues = issuesOf(schema, current);
  return issues?.length === 0 ? { value: current, repairs } : undefined;
}

type Issue = z.core.$ZodIssue;

/** The schema's issues for `value` ([] when it passes), or undefined when the schema threw. */
function issuesOf(schema: z.ZodType, value: unknown): readonly Issue[] | undefined {
  try {
    const result = schema.safeParse(value);
    return result.success ? [] : result.error.issues;
  } catch {
    return undefined;
  }
}

function repairValue(
  value: unknown,
  expected: string,
): { value: unknown; what: string } | undefined {
  const wantsArray = WANTS_ARRAY.has(expected);
  const wantsObject = WANTS_OBJECT.has(expected);
  if (!wantsArray && !wantsObject) return undefined;
  if (typeof value === "string") {
    const first = value.trimStart()[0];
    if (first !== "[" && first !== "{") return undefined;
    const parsed = parseJson(value);
    if (!parsed.ok) return undefined;
    // A string holding one object where an array is wanted: parsed now, wrapped next round.
    if (Array.isArray(parsed.value) ? wantsArray : isJsonObject(parsed.value)) {
      const kind = Array.isArray(parsed.value) ? "an array" : "an object";
      return { value: parsed.value, what: `was a JSON string; read it as ${kind}` };
    }
    return undefined;
  }
  if (wantsArray && isJsonObject(value)) {
    return { value: [value], what: "was one object where a list is expected; read it as [object]" };
  }
  return undefined;
}

function valueAt(
  root: unknown,
  path: readonly PropertyKey[],
): { ok: true; value: unknown } | { ok: false } {
  let node = root;
  for (const key of path) {
    if (typeof node !== "object" || node === null || typeof key === "symbol") return { ok: false };
    if (!Object.hasOwn(node, key)) return { ok: false };
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return { ok: true, value: node };
}

/** A copy of `root` with `value` at `path`; only the containers on the path are copied. */
function withValueAt(root: unknown, path: readonly PropertyKey[], value: unknown): unknown {
  if (path.length === 0) return value;
  const [key, ...rest] = path;
  const node = root as Record<PropertyKey, unknown>;
  const copy = (Array.isArray(node) ? [...node] : { ...node }) as Record<PropertyKey, unknown>;
  // defineProperty, not assignment: a "__proto__" field stays a plain own property.
  Object.defineProperty(copy, key, {
    value: withValueAt(node[key], rest, value),
    enumerable: true,
    writable: true,
    configurable: true,
  });
  return copy;
}
