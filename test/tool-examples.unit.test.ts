import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool, ToolDefinitionError } from "../tools/define-tool.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import { createRegistry } from "../tools/registry.ts";

const parameters = z.object({ path: z.string(), limit: z.number().optional() });
const execute = () => "ok";

describe("tool examples reach the model", () => {
  it("each example is one compact JSON line after the description, with its own description", () => {
    const registry = createRegistry([
      defineTool({
        name: "read_file",
        description: "Reads a file.",
        parameters,
        examples: [
          { args: { path: "src/index.ts" } },
          { args: { path: "README.md", limit: 100 }, description: "the first 100 lines" },
        ],
        execute,
      }),
    ]);
    const [spec] = registry.modelTools();
    expect(spec.function.description).toBe(
      'Reads a file.\nExamples:\n{"path":"src/index.ts"}\n{"path":"README.md","limit":100} — the first 100 lines',
    );
  });

  it("a tool that opts out sends only its description, and its errors still quote an example", () => {
    const registry = createRegistry([
      defineTool({
        name: "read_file",
        description: "Reads a file.",
        parameters,
        examples: [{ args: { path: "src/index.ts" } }],
        showExamples: false,
        execute,
      }),
    ]);
    expect(registry.modelTools()[0].function.description).toBe("Reads a file.");
    const out = prepareCall({ id: "c", name: "read_file", argumentsText: "{}" }, registry);
    expect(!out.ok && out.error.message).toContain('Example: {"path":"src/index.ts"}');
  });

  it("a tool without examples sends its description unchanged", () => {
    const registry = createRegistry([
      defineTool({ name: "t", description: "Does t.", parameters, execute }),
    ]);
    expect(registry.modelTools()[0].function.description).toBe("Does t.");
  });

  it("showExamples that is not a boolean is refused naming the option", () => {
    expect(() =>
      defineTool({
        name: "t",
        description: "Does t.",
        parameters,
        showExamples: "no" as unknown as boolean,
        execute,
      }),
    ).toThrow(ToolDefinitionError);
    expect(() =>
      defineTool({
        name: "t",
        description: "Does t.",
        parameters,
        showExamples: "no" as unknown as boolean,
        execute,
      }),
    ).toThrow(/showExamples must be true or false/);
  });
});
