import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../tools/define-tool.ts";
import {
  compactJson,
  composeMessage,
  describeSyntaxError,
  lineColumn,
  receivedSnippet,
  syntaxHint,
} from "../tools/prepare/messages.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import { createRegistry } from "../tools/registry.ts";

const write = defineTool({
  name: "write_file",
  description: "write",
  parameters: z.object({ path: z.string(), content: z.string() }),
  examples: [{ args: { path: "a.txt", content: "hi" } }],
  execute: async () => "ok",
});
const registry = createRegistry([write]);
const failMessage = (name: string, argumentsText: string, reg = registry) => {
  const out = prepareCall({ id: "c", name, argumentsText }, reg);
  if (out.ok) throw new Error("expected a failure");
  return { code: out.error.code, message: out.error.message };
};

describe("preparation error messages say what, where, what was received and how to fix", () => {
  it("an unknown tool lists the available tools and the closest name; with no tools it says to answer without one", () => {
    const { code, message } = failMessage("write_fil", '{"a":1}');
    expect(code).toBe("UNKNOWN_TOOL");
    expect(message).toContain('unknown tool "write_fil".');
    expect(message).toContain("\nWhere: the tool name\n");
    expect(message).toContain('Received: name "write_fil" with arguments {"a":1}');
    expect(message).toContain(
      'How to fix: Call one of the available tools: write_file. Did you mean "write_file"?',
    );
    const none = failMessage("x", "{}", createRegistry([]));
    expect(none.message).toContain(
      "How to fix: No tools are available; answer without calling a tool.",
    );
    expect(none.message).not.toContain("Did you mean");
  });

  it("a value that is not an object names its type and the expected shape with the tool's example", () => {
    const { code, message } = failMessage("write_file", "[1,2]");
    expect(code).toBe("INVALID_ARGS");
    expect(message).toContain(
      'invalid arguments for tool "write_file": expected a JSON object but received an array',
    );
    expect(message).toContain("Where: (root) of the arguments");
    expect(message).toContain("Send one JSON object (not an array) matching this JSON Schema: {");
    expect(message).toContain(' Example: {"path":"a.txt","content":"hi"}');
  });

  it("text that is not JSON names line and column, a hint, and the fields missing once read as { raw }", () => {
    const { message } = failMessage("write_file", "{'path': 1}");
    expect(message).toContain(
      'invalid arguments for tool "write_file": the arguments are not valid JSON.',
    );
    expect(message).toMatch(/Where: line 1, column 2 \(offset 1\): /);
    expect(message).toContain("Use double quotes for strings and property names.");
    expect(message).toContain("Send one complete JSON object matching this JSON Schema");
    expect(message).toContain("Fields missing or wrong once read as { raw }: path (");
    expect(message).toContain("; content (");
  });

  it("a JSON string holding broken JSON says the error is inside the string", () => {
    const { message } = failMessage("write_file", JSON.stringify('{"path": "a", '));
    expect(message).toContain("the arguments are a JSON string whose content is not valid JSON.");
    expect(message).toContain("Where: inside the string, line 1, column");
  });

  it("schema problems are counted and each named by path; unknown parameters list the declared ones", () => {
    const one = failMessage("write_file", '{"path":"a"}');
    expect(one.message).toContain('invalid arguments for tool "write_file": 1 problem.');
    expect(one.message).toContain('Where: at "content": ');
    const two = failMessage("write_file", '{"zzzzzzzz":1}');
    expect(two.message).toContain(": 2 problems.");
    expect(two.message).toContain('at "path": ');
    expect(two.message).toContain('; at "content": ');
    expect(two.message).toContain(
      'Unknown parameters "zzzzzzzz"; the declared ones are: path, content.',
    );
    const noParams = createRegistry([
      defineTool({
        name: "t",
        description: "d",
        parameters: z.object({}).strict(),
        execute: async () => "",
      }),
    ]);
    expect(failMessage("t", '{"qqqqqqqq":1}', noParams).message).toContain(
      "the declared ones are: (none).",
    );
  });

  it("concatenated objects none of which passes say how many were sent", () => {
    const { message } = failMessage("write_file", '{"path":"a"}{"content":"b"}');
    expect(message).toContain(
      "You sent 2 concatenated JSON objects and none passes; send exactly one.",
    );
  });

  it("a resolved alias or variant name is a warning naming both names", () => {
    const out = prepareCall(
      { id: "c", name: "Write-File", argumentsText: '{"path":"a","content":"b"}' },
      registry,
    );
    expect(out.ok && out.call.warnings).toContain(
      'tool name "Write-File" resolved to "write_file"',
    );
    expect(out.ok && out.call.name).toBe("write_file");
    expect(out.ok && out.call.requestedName).toBe("Write-File");
  });

  it("arguments nested past the depth limit are refused naming the limit and where", () => {
    const deep = `{"path":"a","content":"b","x":${"[".repeat(70)}${"]".repeat(70)}}`;
    const { code, message } = failMessage("write_file", deep);
    expect(code).toBe("INVALID_ARGS");
    expect(message).toContain(
      "the arguments nest too deeply to be accepted (the limit is 64 levels",
    );
    expect(message).toContain("How to fix: Flatten the arguments to at most 64 levels");
  });

  it("a call whose fields are not strings is prepared from safe strings and never throws", () => {
    const out = prepareCall({ id: 7, name: null, argumentsText: 5 } as never, registry);
    expect(out.ok).toBe(false);
    expect(!out.ok && out.error.code).toBe("UNKNOWN_TOOL");
  });
});

describe("message helpers", () => {
  it("receivedSnippet: (empty), the text itself, or the first 2000 bytes with the total", () => {
    expect(receivedSnippet("")).toBe("(empty)");
    expect(receivedSnippet("abc")).toBe("abc");
    const long = "é".repeat(1500);
    expect(receivedSnippet(long)).toBe(`${"é".repeat(1000)}… [first 2000 of 3000 bytes]`);
    expect(receivedSnippet("x".repeat(2000))).toBe("x".repeat(2000));
    expect(receivedSnippet("x".repeat(2001))).toBe(
      `${"x".repeat(2000)}… [first 2000 of 2001 bytes]`,
    );
  });

  it("lineColumn counts lines and columns from 1", () => {
    expect(lineColumn("ab\ncd\nef", 0)).toEqual({ line: 1, column: 1 });
    expect(lineColumn("ab\ncd\nef", 2)).toEqual({ line: 1, column: 3 });
    expect(lineColumn("ab\ncd\nef", 3)).toEqual({ line: 2, column: 1 });
    expect(lineColumn("ab\ncd\nef", 7)).toEqual({ line: 3, column: 2 });
  });

  it("describeSyntaxError and composeMessage lay the parts out in one form", () => {
    expect(describeSyntaxError("a\nbc", { offset: 3, reason: "r" })).toBe(
      "line 2, column 2 (offset 3): r",
    );
    expect(composeMessage({ headline: "H", where: "W", received: "R", fix: "F" })).toBe(
      "H\nWhere: W\nReceived: R\nHow to fix: F",
    );
  });

  it("compactJson never throws: a cycle or a BigInt falls back to String", () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(compactJson(cyclic)).toBe("[object Object]");
    expect(compactJson(10n)).toBe("10");
    expect(compactJson(undefined)).toBe("undefined");
    expect(compactJson({ a: 1 })).toBe('{"a":1}');
  });

  it.each([
    ["```json\n{}\n```", 0, "without a markdown code fence"],
    ["  <args/>", 2, "not XML or other markup"],
    ['{"a":', 5, "The text ends before the JSON is complete"],
    ["{'a':1}", 1, "Use double quotes"],
    ['{"a":1 // c\n}', 7, "JSON has no comments"],
    ['{"a":NaN}', 5, "NaN, Infinity and undefined are not JSON values"],
    ['{"a":-Infinity}', 5, "NaN, Infinity and undefined"],
    ['{"a":undefined}', 5, "NaN, Infinity and undefined"],
    ['{"a":1,}', 7, "Remove the trailing comma."],
    ["[1, ]", 4, "Remove the trailing comma."],
    ["{a:1}", 1, "Put property names and strings in double quotes."],
    ['```json\n{"a":1}', 0, "without a markdown code fence"],
    ['{"a":Infinity}', 5, "NaN, Infinity and undefined"],
    [`{"a":[1,],"b":"${"x".repeat(100)}"}`, 8, "Remove the trailing comma."],
    [`[1,${" ".repeat(100)}]`, 103, "Remove the trailing comma."],
  ])("syntaxHint(%j at %i) says %j", (text, offset, hint) => {
    expect(syntaxHint(text, { offset, reason: "" })).toContain(hint);
  });

  it("syntaxHint is empty when no common mistake applies", () => {
    expect(syntaxHint('{"a":1 2}', { offset: 7, reason: "" })).toBe("");
    expect(syntaxHint('{"a":}', { offset: 5, reason: "" })).toBe("");
    // A fence after the JSON is no fenced JSON.
    expect(syntaxHint('{"a":1}\n```', { offset: 8, reason: "" })).toBe("");
    // A comma that is not followed by a closing bracket, or one earlier in the text.
    expect(syntaxHint("[1,,2]", { offset: 3, reason: "" })).toBe("");
    expect(syntaxHint('{"a":1,"b":}', { offset: 11, reason: "" })).toBe("");
  });

  it("syntaxHint describes the character where the parser stopped, not what follows it", () => {
    expect(syntaxHint('{"a":x,"b":NaN}', { offset: 5, reason: "" })).toBe(
      "Put property names and strings in double quotes.",
    );
  });
});
