import { z } from "zod";
import { ToolDefinitionError } from "./define-tool.ts";
import { deferPatterns, schemaPatternProblem } from "./schema-patterns.ts";

/** Options of {@link jsonSchemaParameters}. */
export interface JsonSchemaParametersOptions {
  /**
   * Told (once a schema) which `pattern`s Keel will not check because it cannot place them on
   * a value (under `anyOf`, `oneOf`, `not`, `patternProperties`, …). Default:
   * `process.emitWarning`. Contract: must not throw.
   */
  onWarning?: (message: string) => void;
}

/** The deferred JSON Schema of each converted zod schema, for {@link jsonSchemaPatternProblem}. */
const deferred = new WeakMap<z.ZodObject, unknown>();

/**
 * The zod schema of a tool declared in JSON Schema (a protocol client's tool, an MCP server's
 * tool), with `z.fromJSONSchema`: the model's arguments then go through the same preparation
 * (repairs, remapping) and validation as any tool's. Its `pattern`s are not in the zod schema
 * (zod would match them on the event loop, and a chosen pattern can backtrack for seconds):
 * {@link jsonSchemaPatternProblem} matches them in the pattern worker, under grep's bounds,
 * and the tool's JSON Schema still shows them to the model (tools/schema-patterns.ts). Throws
 * `ToolDefinitionError` whose message names `field` and says what is wrong: not an object, a
 * schema zod cannot convert (an unknown type, a missing `$ref`, a bad pattern), or not an
 * object schema.
 */
export function jsonSchemaParameters(
  schema: unknown,
  field = "parameters",
  options: JsonSchemaParametersOptions = {},
): z.ZodObject {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
    throw new ToolDefinitionError(
      `"${field}" must be a JSON Schema object, e.g. {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`,
    );
  }
  const { schema: safe, dropped } = deferPatterns(schema, field);
  let parameters: z.ZodType;
  try {
    parameters = z.fromJSONSchema(safe as Parameters<typeof z.fromJSONSchema>[0]);
  } catch (err) {
    throw new ToolDefinitionError(
      `"${field}" is not a JSON Schema Keel can use (${(err as Error).message})`,
    );
  }
  if (!(parameters instanceof z.ZodObject)) {
    throw new ToolDefinitionError(
      `"${field}" must describe an object ("type": "object"); tool arguments are always an object`,
    );
  }
  if (dropped.length > 0) {
    const warn = options.onWarning ?? ((m: string) => process.emitWarning(m, "KeelWarning"));
    warn(
      `"${field}": the pattern at ${dropped.slice(0, 5).join(", ")}${dropped.length > 5 ? ` and ${dropped.length - 5} more` : ""} is not checked (Keel checks patterns under properties, items, allOf and $ref only; the tool itself must check the rest)`,
    );
  }
  deferred.set(parameters, safe);
  return parameters;
}

/**
 * Checks `args` against the `pattern`s of the JSON Schema `parameters` was converted from (by
 * {@link jsonSchemaParameters}), in the pattern worker: no pattern runs on the event loop,
 * and one that backtracks is stopped at grep's bounds. Resolves to `undefined` when they hold
 * (or `parameters` has none), or a message naming the field that fails. Rejects only with
 * `signal`'s reason.
 */
export function jsonSchemaPatternProblem(
  parameters: z.ZodObject,
  args: unknown,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const schema = deferred.get(parameters);
  return schema === undefined
    ? Promise.resolve(undefined)
    : schemaPatternProblem(schema, args, signal);
}
