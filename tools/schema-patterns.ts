import { CALL_DEADLINE_MS, PatternTimeoutError, patternRunner } from "./builtin/pattern-runner.ts";
import { DEFERRED_PATTERN_KEY, ToolDefinitionError } from "./define-tool.ts";

/**
 * JSON Schema `pattern`s chosen by a server or a client (an MCP tool's schemas, a `keel serve`
 * client tool) are regular expressions Keel did not write: `^(a+)+$` against 30 characters
 * backtracks for seconds, and a `RegExp` cannot be interrupted on its own thread (invariant 16,
 * docs/architecture.md). So they never run inside zod's synchronous validation: each `pattern`
 * is renamed to `DEFERRED_PATTERN_KEY` before the schema becomes zod (the model still
 * sees it as `pattern`: `defineTool` renames it back in the JSON Schema it offers), and
 * {@link schemaPatternProblem} matches them in the grep/glob worker, under grep's bounds,
 * before the tool runs. Patterns the check cannot place on a value (under `anyOf`, `oneOf`,
 * `not`, `if`, `patternProperties`, …) are dropped, and the conversion says which.
 */
const DROPPED_PATTERN_PROPERTIES_KEY = "x-keel-pattern-properties";

/** Keywords whose subschemas apply to a known part of the value: their patterns are checked. */
const PLACED = new Set(["properties", "additionalProperties", "items", "prefixItems", "allOf"]);
/** Where local `$ref`s point: checked where they are used. */
const DEFS = new Set(["$defs", "definitions"]);
/** Keywords that hold schemas but not keywords themselves (`properties`' names, `$defs`' names). */
const NAMED = new Set(["properties", "$defs", "definitions", "dependentSchemas"]);
/** Most patterns one value is checked against (a huge array times a pattern is not unbounded). */
const MAX_CHECKS = 10_000;

/** A schema with its patterns deferred, and the places of those the check cannot reach. */
export interface DeferredPatterns {
  schema: unknown;
  /** `"properties.a.anyOf[0]"`: where a pattern was dropped, for a warning. */
  dropped: string[];
}

/**
 * Copies `schema` with every `pattern` renamed to `DEFERRED_PATTERN_KEY` and every
 * `patternProperties` dropped, listing where a pattern will not be checked. Throws
 * `ToolDefinitionError` for a pattern that is not a valid regular expression (compiling one is
 * linear; only matching backtracks). This is a pure function.
 */
export function deferPatterns(schema: unknown, field: string): DeferredPatterns {
  const dropped: string[] = [];
  const copy = (node: unknown, at: string, placed: boolean, named: boolean): unknown => {
    if (Array.isArray(node)) return node.map((v, i) => copy(v, `${at}[${i}]`, placed, false));
    if (typeof node !== "object" || node === null) return node;
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(node)) {
      const here = at === "" ? key : `${at}.${key}`;
      if (!named && key === "pattern" && typeof value === "string") {
        flagsFor(value, `${field}: ${here}`);
        out[DEFERRED_PATTERN_KEY] = value;
        if (!placed) dropped.push(here);
      } else if (!named && key === "patternProperties") {
        out[DROPPED_PATTERN_PROPERTIES_KEY] = value;
        dropped.push(here);
      } else {
        const childPlaced = named ? placed : placed && (PLACED.has(key) || DEFS.has(key));
        out[key] = copy(value, here, childPlaced, !named && NAMED.has(key));
      }
    }
    return out;
  };
  return { schema: copy(schema, "", true, false), dropped };
}

/** `u` (JSON Schema's regular expressions are ECMA-262 with Unicode) when the pattern takes it. */
function flagsFor(source: string, where: string): string {
  try {
    new RegExp(source, "u");
    return "u";
  } catch {
    try {
      new RegExp(source);
      return "";
    } catch (err) {
      throw new ToolDefinitionError(
        `${where} is not a valid regular expression (${(err as Error).message})`,
      );
    }
  }
}

interface Site {
  source: string;
  value: string;
  path: string;
}

/** The (pattern, string) pairs of `value` under `schema` (deferred), at most `MAX_CHECKS`. */
function sitesOf(root: unknown, value: unknown): Site[] {
  const sites: Site[] = [];
  const visit = (schema: unknown, v: unknown, path: string, depth: number): void => {
    if (typeof schema !== "object" || schema === null || depth > 64 || sites.length >= MAX_CHECKS)
      return;
    const s = schema as Record<string, unknown>;
    if (typeof s.$ref === "string") visit(resolveRef(root, s.$ref), v, path, depth + 1);
    const pattern = s[DEFERRED_PATTERN_KEY];
    if (typeof pattern === "string" && typeof v === "string")
      sites.push({ source: pattern, value: v, path: path || "(root)" });
    if (Array.isArray(s.allOf)) for (const sub of s.allOf) visit(sub, v, path, depth + 1);
    if (Array.isArray(v)) {
      const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : [];
      for (const [i, item] of v.entries()) {
        visit(i < prefix.length ? prefix[i] : s.items, item, `${path}[${i}]`, depth + 1);
      }
    } else if (typeof v === "object" && v !== null) {
      const props = (s.properties ?? {}) as Record<string, unknown>;
      for (const [key, item] of Object.entries(v)) {
        const sub = Object.hasOwn(props, key) ? props[key] : s.additionalProperties;
        visit(sub, item, path === "" ? key : `${path}.${key}`, depth + 1);
      }
    }
  };
  visit(root, value, "", 0);
  return sites;
}

function resolveRef(root: unknown, ref: string): unknown {
  if (!ref.startsWith("#/")) return undefined;
  let node = root;
  for (const part of ref.slice(2).split("/")) {
    if (typeof node !== "object" || node === null) return undefined;
    node = (node as Record<string, unknown>)[part.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  return node;
}

/**
 * Matches the deferred patterns of `schema` against `value` in the pattern worker (grep's
 * bounds: a stall deadline per string, a deadline per call). Resolves to `undefined` when every
 * string matches its pattern, or to a message naming the first field that does not, or the
 * pattern that was stopped for backtracking. Rejects only with `signal`'s reason.
 */
export async function schemaPatternProblem(
  schema: unknown,
  value: unknown,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const sites = sitesOf(schema, value);
  if (sites.length === 0) return undefined;
  const flags = sites.map((s) => flagsFor(s.source, s.path));
  try {
    const failed = await patternRunner.firstMismatch(
      sites.map((s) => s.source),
      sites.map((s) => s.value),
      flags,
      performance.now() + CALL_DEADLINE_MS,
      signal,
    );
    if (failed === -1) return undefined;
    const site = sites[failed];
    return `${site.path}: ${JSON.stringify(clip(site.value))} does not match the pattern ${JSON.stringify(clip(site.source))}`;
  } catch (err) {
    if (signal?.aborted) throw err;
    if (err instanceof PatternTimeoutError || err instanceof SyntaxError) {
      return `the schema's patterns could not be checked: ${err.message}`;
    }
    throw err;
  }
}

const clip = (text: string) => (text.length > 200 ? `${text.slice(0, 200)}…` : text);
