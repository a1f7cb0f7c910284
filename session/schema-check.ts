// A fast accept-or-reject check compiled from a zod schema: the same values pass it as pass
// `schema.safeParse`, without building zod's copy of the value or its issues. The decoder
// (session/decode.ts) runs it on every stored entry and falls back to zod only to say what is
// wrong with one that fails. test/schema-check.unit.test.ts checks the two agree on real
// entries, mutations of them and arbitrary JSON.
import type { z } from "zod";

/** Whether a value passes. */
export type Check = (value: unknown) => boolean;

/** Whether a value passes, and so is a `T`. */
export type Guard<T> = (value: unknown) => value is T;

/**
 * The check of `schema` as a type guard: a value it accepts is what `schema.safeParse` would
 * accept (unknown object keys included, which zod would strip from its copy).
 */
export function guardOf<T>(schema: z.ZodType<T>): Guard<T> {
  const check = compileCheck(schema);
  return (value): value is T => check(value);
}

/** The zod definition fields the compiler reads (zod 4's `schema._zod.def`). */
interface Def {
  type: string;
  checks?: unknown[];
  shape?: Record<string, z.ZodType>;
  catchall?: z.ZodType;
  innerType?: z.ZodType;
  element?: z.ZodType;
  items?: z.ZodType[];
  rest?: z.ZodType | null;
  options?: z.ZodType[];
  discriminator?: string;
  entries?: Record<string, string | number>;
  values?: unknown[];
  keyType?: z.ZodType;
  valueType?: z.ZodType;
  getter?: () => z.ZodType;
}

const defOf = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** zod's own mark of a schema whose object key may be missing (`"optional"`). */
const optionality = (schema: z.ZodType): string | undefined =>
  (schema as unknown as { _zod: { optin?: string } })._zod.optin;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The check of `schema`. Supports what the stored shapes use: objects (unknown keys allowed, as
 * zod's default strips them), strings, numbers, booleans, null, undefined, unknown, literals,
 * enums, arrays, tuples, unions (discriminated ones dispatch on the discriminator), optional,
 * nullable, string-keyed records and lazy (recursive) schemas, none with refinements. Throws at
 * compile time on anything else, so a schema the check would misjudge cannot be compiled.
 */
export function compileCheck(schema: z.ZodType): Check {
  const def = defOf(schema);
  if (def.checks && def.checks.length > 0) {
    throw new TypeError(`compileCheck: a ${def.type} schema with refinements is not supported`);
  }
  switch (def.type) {
    case "string":
      return (v) => typeof v === "string";
    case "number":
      return (v) => typeof v === "number" && Number.isFinite(v);
    case "boolean":
      return (v) => typeof v === "boolean";
    case "null":
      return (v) => v === null;
    case "undefined":
      return (v) => v === undefined;
    case "unknown":
      return () => true;
    case "literal": {
      const values = new Set(def.values);
      return (v) => values.has(v);
    }
    case "enum": {
      const values = new Set(Object.values(def.entries ?? {}));
      return (v) => values.has(v as string | number);
    }
    case "optional": {
      const inner = compileCheck(def.innerType!);
      return (v) => v === undefined || inner(v);
    }
    case "nullable": {
      const inner = compileCheck(def.innerType!);
      return (v) => v === null || inner(v);
    }
    case "array": {
      const element = compileCheck(def.element!);
      return (v) => {
        if (!Array.isArray(v)) return false;
        for (let i = 0; i < v.length; i++) if (!element(v[i])) return false;
        return true;
      };
    }
    case "tuple":
      return tupleCheck(def);
    case "record":
      return recordCheck(def);
    case "object":
      return objectCheck(def);
    case "union":
      return unionCheck(def);
    case "lazy": {
      let inner: Check | undefined;
      return (v) => {
        if (inner === undefined) inner = compileCheck(def.getter!());
        return inner(v);
      };
    }
    default:
      throw new TypeError(`compileCheck: zod type "${def.type}" is not supported`);
  }
}

function tupleCheck(def: Def): Check {
  if (def.rest) throw new TypeError("compileCheck: a tuple with a rest element is not supported");
  const items = def.items!.map(compileCheck);
  return (v) => Array.isArray(v) && v.length === items.length && items.every((c, i) => c(v[i]));
}

function recordCheck(def: Def): Check {
  if (defOf(def.keyType!).type !== "string") {
    throw new TypeError("compileCheck: only records with string keys are supported");
  }
  const value = compileCheck(def.valueType!);
  return (v) => {
    if (!isObject(v)) return false;
    for (const k in v) if (Object.hasOwn(v, k) && !value(v[k])) return false;
    return true;
  };
}

function objectCheck(def: Def): Check {
  if (def.catchall) throw new TypeError("compileCheck: an object with a catchall is not supported");
  const keys = Object.keys(def.shape!);
  const checks = keys.map((key) => compileCheck(def.shape![key]));
  // As zod: a key whose schema is not `.optional()` must be present, even if it allows undefined.
  const required = keys.map((key) => optionality(def.shape![key]) !== "optional");
  return (v) => {
    if (!isObject(v)) return false;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      if (!checks[i](v[key]) || (required[i] && !(key in v))) return false;
    }
    return true;
  };
}

function unionCheck(def: Def): Check {
  const options = def.options!.map(compileCheck);
  const key = def.discriminator;
  if (key === undefined) return (v) => options.some((c) => c(v));
  // Each discriminator value → the checks of the options that have it.
  const byValue = new Map<unknown, Check[]>();
  def.options!.forEach((option, i) => {
    const literal = defOf(defOf(option).shape![key]);
    const values = literal.type === "literal" ? literal.values! : Object.values(literal.entries!);
    for (const value of values) byValue.set(value, [...(byValue.get(value) ?? []), options[i]]);
  });
  return (v) => {
    if (!isObject(v)) return false;
    const matching = byValue.get(v[key]);
    return matching?.some((c) => c(v)) === true;
  };
}
