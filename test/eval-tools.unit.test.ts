import { describe, expect, it } from "vitest";
import { z } from "zod";
import { compileExpectations, countToolCalls, toolMetrics } from "../cli/eval-tools.ts";
import { createAgent, defineTool, scriptedModel } from "../index.ts";

const write = defineTool({
  name: "write",
  description: "Writes a file.",
  parameters: z.object({ path: z.string() }),
  execute: async ({ path }) => `wrote ${path}`,
});
const look = defineTool({
  name: "look",
  description: "Looks around.",
  parameters: z.object({}),
  execute: async () => "nothing",
});

/** The entries of a session whose model makes `calls` in one response, then answers. */
async function entriesOf(calls: [string, unknown][]) {
  const model = scriptedModel([
    {
      toolCalls: calls.map(([name, args], i) => ({
        id: `c${i}`,
        name,
        arguments: JSON.stringify(args),
      })),
    },
    { text: "done" },
  ]);
  const agent = createAgent({ model, tools: [write, look] });
  const session = agent.session("s");
  await session.prompt("go");
  const entries = session.entries().slice();
  await agent.close();
  return entries;
}

describe("tool-call counts of a run against its expected calls", () => {
  it("a second call to an expected tool is not a match: precision counts it against the model, validity checks both", async () => {
    const entries = await entriesOf([
      ["write", { path: "a.txt" }],
      ["write", { path: "b.txt" }],
    ]);
    const checks = compileExpectations(
      [{ name: "write", arguments: { type: "object", properties: { path: { const: "a.txt" } } } }],
      "expectedCalls",
    );
    const counts = countToolCalls(entries, checks);
    expect(counts).toEqual({ made: 2, chosen: 2, expected: 1, matched: 1, valid: 1 });
    expect(toolMetrics([counts])).toEqual({
      toolPrecision: 1 / 2,
      toolRecall: 1,
      argumentValidity: 1 / 2,
    });
  });

  it("without an argument check, a call is valid unless the tool refused its arguments", async () => {
    const entries = await entriesOf([
      ["write", { path: "a.txt" }],
      ["write", { wrong: 1 }],
      ["look", {}],
    ]);
    const counts = countToolCalls(
      entries,
      compileExpectations([{ name: "write" }, { name: "write" }], "expectedCalls"),
    );
    expect(counts).toEqual({ made: 3, chosen: 2, expected: 2, matched: 2, valid: 1 });
  });

  it("a predicate that throws counts the call as invalid; metrics with nothing to divide by are null", async () => {
    const entries = await entriesOf([["look", {}]]);
    const counts = countToolCalls(
      entries,
      compileExpectations(
        [
          {
            name: "look",
            arguments: () => {
              throw new Error("boom");
            },
          },
        ],
        "expectedCalls",
      ),
    );
    expect(counts).toMatchObject({ chosen: 1, valid: 0 });
    expect(toolMetrics([{ made: 0, chosen: 0, expected: 0, matched: 0, valid: 0 }])).toEqual({
      toolPrecision: null,
      toolRecall: null,
      argumentValidity: null,
    });
  });

  it("refuses an expectation without a name or with an argument schema that is not an object schema, naming the field", () => {
    expect(() => compileExpectations([{}], "tasks[0].expectedCalls")).toThrow(
      "tasks[0].expectedCalls[0].name must be the name of a tool",
    );
    expect(() => compileExpectations({}, "tasks[0].expectedCalls")).toThrow(
      "tasks[0].expectedCalls must be an array",
    );
    expect(() =>
      compileExpectations(
        [{ name: "write", arguments: { type: "string" } }],
        "tasks[0].expectedCalls",
      ),
    ).toThrow(/tasks\[0\]\.expectedCalls\[0\]\.arguments/);
  });
});
