import { z } from "zod";
import { resolveTraits } from "./traits.ts";
import type { OutputBudget, ResolvedTraits, ToolDefinition } from "./types.ts";

/**
 * @internal Where `jsonSchemaParameters` keeps a JSON Schema `pattern` it does not let zod
 * match (tools/schema-patterns.ts); the JSON Schema offered to the model names it `pattern`
 * again.
 */
export const DEFERRED_PATTERN_KEY = "x-keel-pattern";

/** Tool names the OpenAI and Anthropic APIs accept. */
export const TOOL_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;

/** A validated tool: its definition plus what is derived once (JSON Schema, resolved traits). */
// biome-ignore lint/suspicious/noExplicitAny: tools of every argument type share one registry (as ToolDefinition does)
export type Tool<Args = any> = ToolDefinition<Args> & {
  /** JSON Schema of the parameters (input side), without `$schema`, computed once. */
  readonly jsonSchema: Record<string, unknown>;
  readonly resolvedTraits: ResolvedTraits;
  /** The description the model is sent: `description`, then the examples unless opted out. */
  readonly modelDescription: string;
};

/** Thrown by `defineTool` for a definition that cannot work (a programmer error). */
export class ToolDefinitionError extends Error {
  override readonly name = "ToolDefinitionError";
}

const defined = new WeakSet<object>();

/** True for values produced by `defineTool`. */
export function isDefinedTool(value: unknown): value is Tool {
  return typeof value === "object" && value !== null && defined.has(value);
}

/**
 * Validates a tool definition and derives its JSON Schema (with `z.toJSONSchema`, once) and
 * resolved traits. Throws `ToolDefinitionError` naming the field and the fix when the name does
 * not match `TOOL_NAME_PATTERN`, the description is empty, `parameters` is not a `z.object`,
 * `execute` is not a function, the schema has no JSON Schema form, or an example does not pass
 * the schema. Calling it on an already defined tool returns that tool.
 */
export function defineTool<S extends z.ZodObject>(
  def: Omit<ToolDefinition<z.output<S>>, "parameters"> & { parameters: S },
): Tool<z.output<S>>;
export function defineTool(def: ToolDefinition): Tool;
export function defineTool(def: ToolDefinition): Tool {
  if (isDefinedTool(def)) return def;
  if (typeof def !== "object" || def === null) fail("the definition must be an object");
  const { name, description, parameters, execute, examples, showExamples } = def;
  if (typeof name !== "string" || !TOOL_NAME_PATTERN.test(name)) {
    fail(
      `name ${JSON.stringify(name)} is invalid: use 1–64 characters from a-z, A-Z, 0-9, "_" and "-" (e.g. "read_file")`,
    );
  }
  if (typeof description !== "string" || description.trim() === "") {
    fail(`tool "${name}": description must be a non-empty string saying when to use the tool`);
  }
  if (!(parameters instanceof z.ZodObject)) {
    fail(
      `tool "${name}": parameters must be a zod object schema, e.g. z.object({ path: z.string() }); use z.object({}) for no parameters`,
    );
  }
  if (typeof execute !== "function") fail(`tool "${name}": execute must be a function`);
  let jsonSchema: Record<string, unknown>;
  try {
    const { $schema: _ignored, ...rest } = z.toJSONSchema(parameters, { io: "input" }) as Record<
      string,
      unknown
    >;
    jsonSchema = dropSafeIntegerBounds(rest) as Record<string, unknown>;
  } catch (err) {
    fail(
      `tool "${name}": parameters cannot be expressed as JSON Schema (${(err as Error).message}); use JSON-representable zod types`,
    );
  }
  if (showExamples !== undefined && typeof showExamples !== "boolean") {
    fail(`tool "${name}": showExamples must be true or false, got ${JSON.stringify(showExamples)}`);
  }
  for (const [i, example] of (examples ?? []).entries()) {
    const result = parameters.safeParse(example?.args);
    if (!result.success) {
      fail(
        `tool "${name}": examples[${i}].args do not pass the parameters schema: ${result.error.message}`,
      );
    }
  }
  const tool: Tool = Object.freeze({
    ...def,
    jsonSchema,
    resolvedTraits: resolveTraits(def.traits),
    modelDescription: modelDescription(def),
  });
  defined.add(tool);
  return tool;
}

/**
 * The tool's description as the model reads it: `description`, then, unless `showExamples` is
 * false, one line per example: its arguments as compact JSON, then ` — ` and the example's
 * own description when it has one. Pure.
 */
export function modelDescription(
  def: Pick<ToolDefinition, "description" | "examples" | "showExamples">,
): string {
  const examples = def.showExamples === false ? [] : (def.examples ?? []);
  if (examples.length === 0) return def.description;
  const lines = examples.map(
    (e) => `${JSON.stringify(e.args)}${e.description ? ` — ${e.description}` : ""}`,
  );
  return `${def.description}\nExamples:\n${lines.join("\n")}`;
}

/**
 * `tool` with `budget` as its output budget when it declares none (a declared budget is the
 * tool's own and stays). Used to size the default from the model's window.
 */
export function withDefaultBudget(
  tool: ToolDefinition | Tool,
  budget: OutputBudget,
): ToolDefinition | Tool {
  if (tool.traits?.outputBudget !== undefined) return tool;
  const { jsonSchema: _schema, resolvedTraits: _traits, ...definition } = tool as Tool;
  return defineTool({ ...definition, traits: { ...definition.traits, outputBudget: budget } });
}

function fail(message: string): never {
  throw new ToolDefinitionError(`defineTool: ${message}`);
}

/** Removes the ±2^53−1 bounds zod adds to every `.int()`: noise in the model's tool list. */
function dropSafeIntegerBounds(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(dropSafeIntegerBounds);
  if (typeof node !== "object" || node === null) return node;
  return Object.fromEntries(
    Object.entries(node)
      .filter(
        ([k, v]) =>
          !(k === "minimum" && v === Number.MIN_SAFE_INTEGER) &&
          !(k === "maximum" && v === Number.MAX_SAFE_INTEGER),
      )
      .map(([k, v]) => [
        k === DEFERRED_PATTERN_KEY && typeof v === "string" ? "pattern" : k,
        dropSafeIntegerBounds(v),
      ]),
  );
}
