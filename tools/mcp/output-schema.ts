import type {
  JsonSchemaType,
  JsonSchemaValidator,
  jsonSchemaValidator,
} from "@modelcontextprotocol/sdk/validation/types.js";
import type { ToolResult } from "../../contracts/tool-result.ts";
import { deferPatterns, schemaPatternProblem } from "../schema-patterns.ts";

/** The SDK's Ajv validator, as `@modelcontextprotocol/sdk/validation/ajv` exports it. */
export type AjvValidatorClass = new () => jsonSchemaValidator;

/**
 * The JSON Schema validator Keel gives the MCP client, and uses itself on a tool's
 * `structuredContent`. The SDK's default compiles a server's `outputSchema` with Ajv and
 * matches its `pattern`s on the event loop: a server that sends `^(a+)+$` and a 27-character
 * answer froze every session for seconds. This one compiles the schema with its patterns
 * deferred (tools/schema-patterns.ts): the synchronous check covers everything but them, and
 * {@link BoundedSchemaValidator.check} then matches them in the pattern worker, under grep's
 * bounds.
 */
export class BoundedSchemaValidator implements jsonSchemaValidator {
  private readonly ajv: jsonSchemaValidator;

  constructor(Ajv: AjvValidatorClass) {
    this.ajv = new Ajv();
  }

  /** A synchronous validator that checks everything but `pattern`s. Throws when it cannot compile. */
  getValidator<T>(schema: JsonSchemaType): JsonSchemaValidator<T> {
    return this.ajv.getValidator<T>(deferPatterns(schema, "outputSchema").schema as JsonSchemaType);
  }

  /**
   * A compiled output schema: `check(value)` resolves to `undefined` when `value` passes it,
   * patterns included, or to what is wrong. Throws (as `getValidator`) when it cannot compile.
   */
  compile(schema: unknown): {
    check: (value: unknown, signal?: AbortSignal) => Promise<string | undefined>;
  } {
    if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
      throw new TypeError("its outputSchema is not a JSON Schema object");
    }
    const deferred = deferPatterns(schema, "outputSchema").schema;
    const validate = this.ajv.getValidator(deferred as JsonSchemaType);
    return {
      check: async (value, signal) => {
        const sync = validate(value);
        if (!sync.valid) return sync.errorMessage;
        return schemaPatternProblem(deferred, value, signal);
      },
    };
  }
}

/** Checks a tool's `structuredContent` against its `outputSchema` (patterns in the worker). */
export type OutputCheck = ReturnType<BoundedSchemaValidator["compile"]>["check"];

/** Compiles a tool's `outputSchema`; throws saying it cannot be used. */
export function compileOutput(validator: BoundedSchemaValidator, schema: unknown): OutputCheck {
  try {
    return validator.compile(schema).check;
  } catch (err) {
    throw new Error(`its outputSchema cannot be used (${(err as Error).message ?? String(err)})`);
  }
}

/**
 * A successful result of a tool that declares an `outputSchema` must carry `structuredContent`
 * that passes it (MCP's rule, which the SDK enforces): otherwise the call failed, saying why.
 */
export async function checkOutput(
  result: ToolResult,
  answer: unknown,
  check: OutputCheck,
  tool: string,
  signal: AbortSignal,
): Promise<ToolResult> {
  if (!result.ok) return result;
  const structured = (answer as { structuredContent?: unknown }).structuredContent;
  const problem =
    structured === undefined
      ? "it declares an outputSchema but sent no structuredContent"
      : await check(structured, signal);
  if (problem === undefined) return result;
  return {
    ok: false,
    code: "EXECUTION_FAILED",
    message: `the MCP server's result of ${tool} does not match its outputSchema: ${problem}`,
    retryable: false,
  };
}
