import { z } from "zod";
import { ToolDefinitionError } from "./define-tool.ts";

/**
 * The zod schema of a tool declared in JSON Schema (a protocol client's tool, an MCP server's
 * tool), with `z.fromJSONSchema`: the model's arguments then go through the same preparation
 * (repairs, remapping) and validation as any tool's. Throws `ToolDefinitionError` whose
 * message names `field` and says what is wrong: not an object, a schema zod cannot convert
 * (an unknown type, a missing `$ref`, a bad pattern), or not an object schema.
 */
export function jsonSchemaParameters(schema: unknown, field = "parameters"): z.ZodObject {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
    throw new ToolDefinitionError(
      `"${field}" must be a JSON Schema object, e.g. {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`,
    );
  }
  let parameters: z.ZodType;
  try {
    parameters = z.fromJSONSchema(schema as Parameters<typeof z.fromJSONSchema>[0]);
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
  return parameters;
}
