import { describe, expect, it } from "vitest";
import { z } from "zod";
import { MAX_ARGUMENTS_CHARS } from "../contracts/json-limits.ts";
import { defineTool } from "../tools/define-tool.ts";
import { truncatedCallResult } from "../tools/prepare/truncated-call.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import { createRegistry, type Registry } from "../tools/registry.ts";

const noop = async () => "ok";
const registry = createRegistry([
  defineTool({
    name: "read_file",
    description: "read",
    parameters: z.object({ path: z.string(), offset: z.number().int().min(1).optional() }),
    execute: noop,
  }),
  defineTool({
    name: "write_file",
    description: "write",
    parameters: z.object({ path: z.string(), content: z.string() }),
    execute: noop,
  }),
  defineTool({
    name: "shell",
    description: "run",
    parameters: z.object({ command: z.string(), timeout_ms: z.number().optional() }),
    execute: noop,
  }),
  defineTool({
    name: "strict_tool",
    description: "strict",
    parameters: z.object({ a: z.number() }).strict(),
    execute: noop,
  }),
  defineTool({ name: "no_args", description: "none", parameters: z.object({}), execute: noop }),
  defineTool({
    name: "search",
    description: "search",
    parameters: z.object({ query: z.string(), tags: z.array(z.string()).optional() }),
    execute: noop,
  }),
  defineTool({
    name: "store",
    description: "store",
    parameters: z.object({ data: z.unknown() }),
    execute: noop,
  }),
]);

type Expect =
  | { ok: true; args: unknown; name?: string; warnings?: string[]; check?: (args: unknown) => void }
  | {
      ok: false;
      code: "INVALID_ARGS" | "UNKNOWN_TOOL";
      where?: string[];
      what?: string[];
      how?: string[];
    };
interface Row {
  title: string;
  tool: string;
  text: string;
  expect: Expect;
}

const deep = (n: number) => `{"data":${"[".repeat(n)}1${"]".repeat(n)}}`;
/** Array nesting depth, measured iteratively (a recursive deep-equal would overflow the stack). */
function depthOf(value: unknown): number {
  let depth = 0;
  for (let v = value; Array.isArray(v); v = v[0]) depth++;
  return depth;
}
const big = "x".repeat(1024 * 1024);
const SCHEMA = "JSON Schema";

const rows: Row[] = [
  {
    title: "empty text means no arguments",
    tool: "no_args",
    text: "",
    expect: { ok: true, args: {} },
  },
  {
    title: "whitespace-only text means no arguments",
    tool: "no_args",
    text: " \n\t ",
    expect: { ok: true, args: {} },
  },
  {
    title: "empty text for a tool with required fields names the missing field",
    tool: "read_file",
    text: "",
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ['at "path"', "expected string"],
      what: ["(empty)"],
      how: [SCHEMA, '"required":["path"]'],
    },
  },
  {
    title: "a valid object passes unchanged",
    tool: "read_file",
    text: '{"path":"a.ts","offset":3}',
    expect: { ok: true, args: { path: "a.ts", offset: 3 }, warnings: [] },
  },
  {
    title: "pretty-printed JSON passes",
    tool: "read_file",
    text: '{\n  "path": "a.ts"\n}\n',
    expect: { ok: true, args: { path: "a.ts" } },
  },
  {
    title: "two concatenated objects without whitespace: the first passing one is used",
    tool: "read_file",
    text: '{"path":"a"}{"path":"b"}',
    expect: {
      ok: true,
      args: { path: "a" },
      warnings: ["2 concatenated JSON objects; used object 1"],
    },
  },
  {
    title: "concatenated objects separated by a newline",
    tool: "read_file",
    text: '{"path":"a"}\n{"path":"b"}',
    expect: { ok: true, args: { path: "a" }, warnings: ["concatenated"] },
  },
  {
    title: "concatenation skips an object that fails the schema",
    tool: "read_file",
    text: '{"path":1}{"path":"b"}',
    expect: { ok: true, args: { path: "b" }, warnings: ["used object 2"] },
  },
  {
    title: "concatenation with a truncated tail is rejected",
    tool: "read_file",
    text: '{"path":"a"}{"path":',
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ["line 1, column 13", "after the end of the JSON value"],
      what: ['{"path":"a"}{"path":'],
    },
  },
  {
    title: "concatenated objects none of which passes",
    tool: "read_file",
    text: '{"x":1}{"y":2}',
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ['at "path"'],
      how: ["2 concatenated JSON objects", "send exactly one"],
    },
  },
  {
    title: "double-encoded JSON is unwrapped",
    tool: "read_file",
    text: JSON.stringify(JSON.stringify({ path: "a" })),
    expect: { ok: true, args: { path: "a" }, warnings: ["double-encoded"] },
  },
  {
    title: "a double-encoded truncated object is rejected with the inner location",
    tool: "read_file",
    text: JSON.stringify('{"path":'),
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ["inside the string", "line 1, column 9"],
      how: ["Re-send the complete call"],
    },
  },
  {
    title: "a prefix of double-encoded JSON is rejected",
    tool: "read_file",
    text: JSON.stringify(JSON.stringify({ path: "a" })).slice(0, -1),
    expect: { ok: false, code: "INVALID_ARGS", where: ["unterminated string"] },
  },
  {
    title: "a number is not an object",
    tool: "read_file",
    text: "42",
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ["(root)"],
      what: ["42"],
      how: ["one JSON object (not a number)", SCHEMA],
    },
  },
  {
    title: "an array is not an object",
    tool: "read_file",
    text: '[{"path":"a"}]',
    expect: { ok: false, code: "INVALID_ARGS", how: ["not an array"] },
  },
  {
    title: "a plain string is not an object",
    tool: "read_file",
    text: '"a.ts"',
    expect: { ok: false, code: "INVALID_ARGS", how: ["not a string"] },
  },
  {
    title: "null is not an object",
    tool: "no_args",
    text: "null",
    expect: { ok: false, code: "INVALID_ARGS", how: ["not null"] },
  },
  {
    title: "a boolean is not an object",
    tool: "no_args",
    text: "true",
    expect: { ok: false, code: "INVALID_ARGS", how: ["not a boolean"] },
  },
  {
    title: "an object cut before its closing brace is rejected",
    tool: "read_file",
    text: '{"path":"a"',
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ["line 1, column 12", "unclosed"],
      what: ['{"path":"a"'],
      how: ["Re-send the complete call", "path (Invalid input"],
    },
  },
  {
    title: "an object cut inside a string is rejected",
    tool: "read_file",
    text: '{"path":"src/ma',
    expect: { ok: false, code: "INVALID_ARGS", where: ["unterminated string"] },
  },
  {
    title: "an object cut after a key is rejected",
    tool: "read_file",
    text: '{"path"',
    expect: { ok: false, code: "INVALID_ARGS", where: ['":" was expected'] },
  },
  {
    title: "an object cut inside a number is rejected",
    tool: "read_file",
    text: '{"path":"a","offset":12',
    expect: { ok: false, code: "INVALID_ARGS", where: ["column 24"] },
  },
  {
    title: "a trailing comma in an object is located and named",
    tool: "read_file",
    text: '{"path":"a",}',
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ["line 1, column 13"],
      how: ["Remove the trailing comma"],
    },
  },
  {
    title: "a trailing comma in an array is located and named",
    tool: "search",
    text: '{"query":"q","tags":["a",]}',
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ["column 26"],
      how: ["Remove the trailing comma"],
    },
  },
  {
    title: "single quotes are rejected with a hint",
    tool: "read_file",
    text: "{'path':'a'}",
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ["column 2", "double quotes"],
      how: ["Use double quotes"],
    },
  },
  {
    title: "a line comment is rejected with its line",
    tool: "read_file",
    text: '{\n  "path": "a" // the file\n}',
    expect: { ok: false, code: "INVALID_ARGS", where: ["line 2, column 15"], how: ["no comments"] },
  },
  {
    title: "a block comment is rejected",
    tool: "read_file",
    text: '/* args */ {"path":"a"}',
    expect: { ok: false, code: "INVALID_ARGS", where: ["line 1, column 1"], how: ["no comments"] },
  },
  {
    title: "NaN is rejected",
    tool: "read_file",
    text: '{"path":"a","offset":NaN}',
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ["column 22"],
      how: ["NaN, Infinity and undefined are not JSON"],
    },
  },
  {
    title: "Infinity is rejected",
    tool: "read_file",
    text: '{"path":"a","offset":-Infinity}',
    expect: { ok: false, code: "INVALID_ARGS", where: ["column 22", "invalid number"] },
  },
  {
    title: "unquoted keys are rejected",
    tool: "read_file",
    text: '{path:"a"}',
    expect: { ok: false, code: "INVALID_ARGS", how: ["double quotes"] },
  },
  {
    title: "a raw newline inside a string is located",
    tool: "write_file",
    text: '{"path":"a","content":"x\ny"}',
    expect: { ok: false, code: "INVALID_ARGS", where: ["line 1, column 25", "U+000A"] },
  },
  {
    title: "a raw tab inside a string is located",
    tool: "write_file",
    text: '{"path":"a\tb","content":""}',
    expect: { ok: false, code: "INVALID_ARGS", where: ["U+0009"] },
  },
  {
    title: "an error on line 3 of pretty-printed JSON reports line 3",
    tool: "read_file",
    text: '{\n  "path": "a",\n  "offset": ,\n}',
    expect: { ok: false, code: "INVALID_ARGS", where: ["line 3, column 13"] },
  },
  {
    title: "a leading byte-order mark is dropped",
    tool: "read_file",
    text: '\uFEFF{"path":"a"}',
    expect: { ok: true, args: { path: "a" }, warnings: ["byte-order mark"] },
  },
  {
    title: "unicode escapes are decoded",
    tool: "read_file",
    text: '{"path":"caf\\u00e9"}',
    expect: { ok: true, args: { path: "café" } },
  },
  {
    title: "an escaped surrogate pair becomes one character",
    tool: "read_file",
    text: '{"path":"\\ud83d\\ude00"}',
    expect: { ok: true, args: { path: "😀" } },
  },
  {
    title: "an escaped lone surrogate is valid JSON and kept as is",
    tool: "read_file",
    text: '{"path":"\\ud800"}',
    expect: { ok: true, args: { path: "\ud800" } },
  },
  {
    title: "an invalid unicode escape is located",
    tool: "read_file",
    text: '{"path":"\\u12G4"}',
    expect: { ok: false, code: "INVALID_ARGS", where: ["column 10", "4 hex digits"] },
  },
  {
    title: "an invalid escape is located",
    tool: "read_file",
    text: '{"path":"\\x41"}',
    expect: { ok: false, code: "INVALID_ARGS", where: ['invalid escape "\\x"'] },
  },
  {
    title: "duplicated keys: the last one wins (JSON.parse semantics)",
    tool: "read_file",
    text: '{"path":"a","path":"b"}',
    expect: { ok: true, args: { path: "b" } },
  },
  {
    title: "the text undefined is rejected",
    tool: "no_args",
    text: "undefined",
    expect: { ok: false, code: "INVALID_ARGS", how: ["undefined are not JSON"] },
  },
  {
    title: "markdown-fenced JSON is rejected with a hint",
    tool: "read_file",
    text: '```json\n{"path":"a"}\n```',
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ["line 1, column 1"],
      what: ["```json"],
      how: ["without a markdown code fence"],
    },
  },
  {
    title: "XML-ish tool-call junk is rejected",
    tool: "read_file",
    text: '<tool_call>{"path":"a"}</tool_call>',
    expect: { ok: false, code: "INVALID_ARGS", how: ["not XML"] },
  },
  {
    title: "XML parameter syntax is rejected",
    tool: "read_file",
    text: '<parameter name="path">a</parameter>',
    expect: { ok: false, code: "INVALID_ARGS", what: ["<parameter"], how: ["not XML", '"path"'] },
  },
  {
    title: "text after a complete object is rejected",
    tool: "read_file",
    text: '{"path":"a"} thanks!',
    expect: { ok: false, code: "INVALID_ARGS", where: ["column 14", "after the end"] },
  },
  {
    title: "a NUL byte after the object is rejected",
    tool: "read_file",
    text: '{"path":"a"}\u0000',
    expect: { ok: false, code: "INVALID_ARGS", where: ["U+0000"] },
  },
  {
    title: "a leading zero is rejected",
    tool: "read_file",
    text: '{"path":"a","offset":01}',
    expect: { ok: false, code: "INVALID_ARGS", where: ["column 23"] },
  },
  {
    title: "Python literals are rejected",
    tool: "store",
    text: '{"data": True}',
    expect: { ok: false, code: "INVALID_ARGS", where: ["column 10"] },
  },
  {
    title: "an upper-cased parameter name is remapped",
    tool: "read_file",
    text: '{"PATH":"a"}',
    expect: { ok: true, args: { path: "a" }, warnings: ['"PATH" → "path"'] },
  },
  {
    title: "camelCase is remapped to snake_case",
    tool: "shell",
    text: '{"command":"ls","timeoutMs":5}',
    expect: {
      ok: true,
      args: { command: "ls", timeout_ms: 5 },
      warnings: ['"timeoutMs" → "timeout_ms"'],
    },
  },
  {
    title: "kebab-case is remapped to snake_case",
    tool: "shell",
    text: '{"command":"ls","timeout-ms":5}',
    expect: { ok: true, args: { command: "ls", timeout_ms: 5 } },
  },
  {
    title: "a one-letter misspelling is remapped",
    tool: "shell",
    text: '{"comand":"ls"}',
    expect: { ok: true, args: { command: "ls" }, warnings: ['"comand" → "command"'] },
  },
  {
    title: "a prefixed name (file_path) is remapped to path",
    tool: "read_file",
    text: '{"file_path":"a"}',
    expect: { ok: true, args: { path: "a" } },
  },
  {
    title: "two keys claiming one parameter are not remapped",
    tool: "read_file",
    text: '{"Path":"a","PATH":"b"}',
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ['at "path"'],
      how: ['Unknown parameters "Path", "PATH"', "declared ones are: path, offset"],
    },
  },
  {
    title: "a variant of a supplied parameter is ignored, not remapped",
    tool: "read_file",
    text: '{"path":"a","Path":"b"}',
    expect: { ok: true, args: { path: "a" }, warnings: ['ignored unknown parameters: "Path"'] },
  },
  {
    title: "a strict schema rejects an unknown key",
    tool: "strict_tool",
    text: '{"a":1,"zzz":2}',
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ["Unrecognized key"],
      how: ['Unknown parameters "zzz"', "declared ones are: a"],
    },
  },
  {
    title: "a wrong type names the field path",
    tool: "read_file",
    text: '{"path":1}',
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ['at "path": Invalid input: expected string, received number'],
      what: ['{"path":1}'],
    },
  },
  {
    title: "a nested issue names the array index",
    tool: "search",
    text: '{"query":"q","tags":["a",2]}',
    expect: { ok: false, code: "INVALID_ARGS", where: ['at "tags[1]"'] },
  },
  {
    title: "a zod refinement failure is reported",
    tool: "read_file",
    text: '{"path":"a","offset":0}',
    expect: { ok: false, code: "INVALID_ARGS", where: ['at "offset"', ">=1"] },
  },
  {
    title: "the Bash alias resolves to shell",
    tool: "Bash",
    text: '{"command":"ls"}',
    expect: {
      ok: true,
      name: "shell",
      args: { command: "ls" },
      warnings: ['"Bash" resolved to "shell"'],
    },
  },
  {
    title: "an upper-case variant of a tool name resolves",
    tool: "READ_FILE",
    text: '{"path":"a"}',
    expect: { ok: true, name: "read_file", args: { path: "a" } },
  },
  {
    title: "a kebab-case variant of a tool name resolves",
    tool: "write-file",
    text: '{"path":"a","content":""}',
    expect: { ok: true, name: "write_file", args: { path: "a", content: "" } },
  },
  {
    title: "an alias whose target is not registered is an unknown tool",
    tool: "LS",
    text: "{}",
    expect: {
      ok: false,
      code: "UNKNOWN_TOOL",
      where: ["the tool name"],
      what: ['name "LS"'],
      how: ["available tools: read_file, write_file, shell"],
    },
  },
  {
    title: "a misspelled tool name suggests the closest",
    tool: "raed_file",
    text: '{"path":"a"}',
    expect: {
      ok: false,
      code: "UNKNOWN_TOOL",
      what: ['{"path":"a"}'],
      how: ['Did you mean "read_file"?'],
    },
  },
  {
    title: "an empty tool name is an unknown tool",
    tool: "",
    text: "{}",
    expect: { ok: false, code: "UNKNOWN_TOOL", how: ["available tools"] },
  },
  {
    title: "1 MB of valid arguments passes",
    tool: "write_file",
    text: JSON.stringify({ path: "a", content: big }),
    expect: { ok: true, args: { path: "a", content: big } },
  },
  {
    title: "1 MB of truncated arguments quotes only the first 2000 bytes",
    tool: "write_file",
    text: JSON.stringify({ path: "a", content: big }).slice(0, -2),
    expect: {
      ok: false,
      code: "INVALID_ARGS",
      where: ["unterminated string"],
      what: ["first 2000 of 1048599 bytes"],
    },
  },
  {
    title: "64 levels of nesting pass (the JSON depth limit)",
    tool: "store",
    text: deep(63),
    expect: {
      ok: true,
      args: undefined,
      check: (args) => expect(depthOf((args as { data: unknown }).data)).toBe(63),
    },
  },
  {
    title:
      "10 000 levels of nesting are refused as INVALID_ARGS naming the limit, without stack overflow (the store could not encode them)",
    tool: "store",
    text: deep(10_000),
    expect: { ok: false, code: "INVALID_ARGS", where: ["nests deeper than 64 levels (the limit)"] },
  },
  {
    title: "10 000 levels of nesting, truncated, are rejected",
    tool: "store",
    text: deep(10_000).slice(0, -50),
    expect: { ok: false, code: "INVALID_ARGS", where: ["unclosed"] },
  },
  {
    title: "100 000 levels with a mismatched bracket are rejected",
    tool: "store",
    text: `{"data":${"[".repeat(100_000)}1}`,
    expect: { ok: false, code: "INVALID_ARGS", where: ["column 100010", 'expected "," or "]"'] },
  },
  {
    title: "a __proto__ key stays a plain key",
    tool: "store",
    text: '{"data":{"__proto__":{"polluted":1}}}',
    expect: { ok: true, args: { data: JSON.parse('{"__proto__":{"polluted":1}}') } },
  },
];

function sections(message: string) {
  const m = /^(.*)\nWhere: ([\s\S]*)\nReceived: ([\s\S]*)\nHow to fix: ([\s\S]*)$/.exec(message);
  if (!m) throw new Error(`message lacks the Where/Received/How to fix layout:\n${message}`);
  return { headline: m[1], where: m[2], what: m[3], how: m[4] };
}

describe("prepareCall on real-world malformed calls", () => {
  it("has at least 45 rows", () => expect(rows.length).toBeGreaterThanOrEqual(45));
  it.each(rows.map((r) => [r.title, r] as const))("%s", (_title, row) => {
    const outcome = prepareCall(
      { id: "call_1", name: row.tool, argumentsText: row.text },
      registry,
    );
    if (row.expect.ok) {
      if (!outcome.ok) throw new Error(outcome.error.message);
      if (row.expect.check) row.expect.check(outcome.call.args);
      else expect(outcome.call.args).toEqual(row.expect.args);
      expect(outcome.call.id).toBe("call_1");
      expect(outcome.call.requestedName).toBe(row.tool);
      if (row.expect.name) expect(outcome.call.name).toBe(row.expect.name);
      if (row.expect.warnings?.length === 0) expect(outcome.call.warnings).toEqual([]);
      for (const w of row.expect.warnings ?? [])
        expect(outcome.call.warnings.join("\n")).toContain(w);
      return;
    }
    expect(outcome.ok).toBe(false);
    if (outcome.ok) return;
    expect(outcome.error).toMatchObject({ ok: false, code: row.expect.code, retryable: false });
    expect(outcome).toMatchObject({ id: "call_1", name: row.tool, argumentsText: row.text });
    const s = sections(outcome.error.message);
    for (const w of row.expect.where ?? []) expect(s.where).toContain(w);
    for (const w of row.expect.what ?? []) expect(s.what).toContain(w);
    for (const w of row.expect.how ?? []) expect(s.how).toContain(w);
    expect(Buffer.byteLength(s.what)).toBeLessThanOrEqual(2000 + 120);
  });
});

describe("prepareCall details", () => {
  it("quotes multi-byte input without cutting a character", () => {
    const text = `{"path":"${"é".repeat(5000)}`;
    const outcome = prepareCall({ id: "c", name: "read_file", argumentsText: text }, registry);
    if (outcome.ok) throw new Error("accepted");
    const { what } = sections(outcome.error.message);
    expect(what).not.toContain("\uFFFD");
    expect(what).toContain("first 1999 of 10009 bytes");
  });

  it("an unparseable text is never accepted even when { raw } would pass the schema", () => {
    const reg = createRegistry([
      defineTool({
        name: "t",
        description: "d",
        parameters: z.object({ raw: z.string().optional() }),
        execute: noop,
      }),
    ]);
    const outcome = prepareCall({ id: "c", name: "t", argumentsText: "not json" }, reg);
    expect(outcome.ok).toBe(false);
  });

  it("computes the resource key once, and a throwing resourceKey makes the call run alone", () => {
    const keyed = defineTool({
      name: "k",
      description: "d",
      parameters: z.object({ p: z.string() }),
      traits: { concurrencySafe: true, resourceKey: (a: { p: string }) => `file:${a.p}` },
      execute: noop,
    });
    const broken = defineTool({
      name: "b",
      description: "d",
      parameters: z.object({}),
      traits: {
        concurrencySafe: true,
        resourceKey: () => {
          throw new Error("boom");
        },
      },
      execute: noop,
    });
    const reg = createRegistry([keyed, broken]);
    const a = prepareCall({ id: "1", name: "k", argumentsText: '{"p":"x"}' }, reg);
    const b = prepareCall({ id: "2", name: "b", argumentsText: "{}" }, reg);
    expect(a.ok && a.call.resourceKey).toBe("file:x");
    expect(a.ok && a.call.traits.concurrencySafe).toBe(true);
    expect(b.ok && b.call.traits.concurrencySafe).toBe(false);
    expect(b.ok && b.call.warnings.join()).toContain("resourceKey threw (boom)");
  });

  it("a schema that throws during validation becomes INVALID_ARGS, not an exception", () => {
    const reg = createRegistry([
      defineTool({
        name: "t",
        description: "d",
        parameters: z.object({
          a: z.string().refine(() => {
            throw new Error("bad refine");
          }),
        }),
        execute: noop,
      }),
    ]);
    const outcome = prepareCall({ id: "c", name: "t", argumentsText: '{"a":"x"}' }, reg);
    expect(!outcome.ok && outcome.error.message).toContain("validation threw: bad refine");
  });

  it("non-string fields of a raw call are tolerated", () => {
    const outcome = prepareCall(
      { id: undefined, name: null, argumentsText: undefined } as never,
      registry,
    );
    expect(!outcome.ok && outcome.error.code).toBe("UNKNOWN_TOOL");
    const noArgs = prepareCall(
      { id: "c", name: "no_args", argumentsText: undefined } as never,
      registry,
    );
    expect(noArgs.ok && noArgs.call.args).toEqual({});
  });

  it("the result of a length-truncated call asks for a complete, smaller re-issue and quotes the text", () => {
    const r = truncatedCallResult({
      id: "c",
      name: "write_file",
      argumentsText: '{"path":"a","content":"abc',
    });
    expect(r).toMatchObject({ ok: false, code: "TRUNCATED_CALL", retryable: false });
    const s = sections(r.message);
    expect(s.headline).toContain("cut off at the length limit");
    expect(s.where).toContain('finish_reason "length"');
    expect(s.what).toContain('{"path":"a","content":"abc');
    expect(s.how).toContain("re-issue the complete call");
    expect(s.how).toContain("smaller");
    const chat = truncatedCallResult({ id: "c", function: { name: "shell", arguments: '{"comm' } });
    expect(chat.message).toContain('"shell"');
    expect(chat.message).toContain('{"comm');
  });
});

describe("prepareCall: what each part of a message and of a prepared call says", () => {
  const fail = (name: string, argumentsText: string, reg: Registry = registry) => {
    const outcome = prepareCall({ id: "c", name, argumentsText }, reg);
    if (outcome.ok) throw new Error(`accepted: ${JSON.stringify(outcome.call.args)}`);
    return { code: outcome.error.code, ...sections(outcome.error.message) };
  };
  const schemaOf = (name: string) => JSON.stringify(registry.get(name)?.jsonSchema);

  it("arguments over the size limit are refused before parsing, naming both sizes; at the limit they are read", () => {
    const at = `{"data":"${"x".repeat(MAX_ARGUMENTS_CHARS - 11)}"}`;
    expect(at.length).toBe(MAX_ARGUMENTS_CHARS);
    const ok = prepareCall({ id: "c", name: "store", argumentsText: at }, registry);
    expect(ok.ok).toBe(true);
    const over = fail("store", `${at} `);
    expect(over.code).toBe("INVALID_ARGS");
    expect(over.headline).toContain(
      `the arguments are ${MAX_ARGUMENTS_CHARS + 1} characters long, over the limit of ${MAX_ARGUMENTS_CHARS}.`,
    );
    expect(over.where).toBe("the whole arguments text");
    expect(over.what).toContain(`first 2000 of ${MAX_ARGUMENTS_CHARS + 1} bytes`);
    expect(over.how).toBe(
      "Send less per call: split the work into several calls, or write large content in parts.",
    );
  });

  it("a registry that throws is reported as an internal error of preparation, not thrown", () => {
    const broken = (thrown: unknown): Registry => ({
      ...createRegistry([]),
      resolve: () => {
        throw thrown;
      },
    });
    const out = fail("read_file", '{"path":"a"}', broken(new Error("index corrupted")));
    expect(out.code).toBe("INVALID_ARGS");
    expect(out.headline).toContain('tool call "read_file" could not be prepared: index corrupted');
    expect(out.where).toBe("argument preparation (an internal error, not your input)");
    expect(out.what).toBe('{"path":"a"}');
    expect(out.how).toBe("Re-send the call; if it fails again, try different arguments.");
    expect(fail("read_file", "{}", broken("a plain string")).headline).toContain(
      "could not be prepared: a plain string",
    );
  });

  it("a tool name is quoted up to 200 characters, then cut with an ellipsis", () => {
    const exact = "q".repeat(200);
    expect(fail(exact, "{}").headline).toBe(`not executed: unknown tool "${exact}".`);
    const long = "q".repeat(201);
    expect(fail(long, "{}").headline).toBe(`not executed: unknown tool "${exact}…".`);
  });

  it("with nothing more to say, the fix is the schema alone (no unknown parameters, no concatenation, no example)", () => {
    expect(fail("read_file", '{"path":1}').how).toBe(
      `Send one JSON object matching this JSON Schema: ${schemaOf("read_file")}`,
    );
    expect(fail("read_file", '{"path":"a" "x"}').how).toBe(
      `Send one complete JSON object matching this JSON Schema: ${schemaOf("read_file")} Fields missing or wrong once read as { raw }: path (Invalid input: expected string, received undefined).`,
    );
  });

  it("unparseable text is rejected even when { raw } passes, and then lists no missing fields", () => {
    const reg = createRegistry([
      defineTool({
        name: "t",
        description: "d",
        parameters: z.object({ raw: z.string() }),
        execute: noop,
      }),
    ]);
    const out = fail("t", "not json", reg);
    expect(out.code).toBe("INVALID_ARGS");
    expect(out.how).not.toContain("Fields missing");
    expect(out.how).toMatch(/\}$/);
  });

  it("of concatenated objects none of which passes, the first one's problems are reported", () => {
    const out = fail("read_file", '{"path":1,"zzzzzzzz":1}{"offset":2}');
    expect(out.where).toBe('at "path": Invalid input: expected string, received number');
    expect(out.how).toContain(
      'Unknown parameters "zzzzzzzz"; the declared ones are: path, offset.',
    );
    expect(out.how).toContain("You sent 2 concatenated JSON objects and none passes");
  });

  it("an object followed by another kind of value is no concatenation: rejected where the value starts", () => {
    const out = fail("read_file", '{"path":"a"}[1]');
    expect(out.where).toContain("column 13");
    expect(out.where).toContain("after the end of the JSON value");
  });

  it("several renamed and several ignored parameters are each listed, comma-separated", () => {
    const out = prepareCall(
      {
        id: "c",
        name: "shell",
        argumentsText: '{"COMMAND":"ls","timeoutMs":5,"xxxxxxxx":1,"yyyyyyyy":2}',
      },
      registry,
    );
    if (!out.ok) throw new Error(out.error.message);
    expect(out.call.args).toEqual({ command: "ls", timeout_ms: 5 });
    expect(out.call.warnings).toEqual([
      'renamed parameters: "COMMAND" → "command", "timeoutMs" → "timeout_ms"',
      'ignored unknown parameters: "xxxxxxxx", "yyyyyyyy"',
    ]);
  });

  it("zod issues are placed: a dotted path into nested objects, (root) for the object itself", () => {
    const reg = createRegistry([
      defineTool({
        name: "n",
        description: "d",
        parameters: z.object({ options: z.object({ mode: z.enum(["a", "b"]) }) }),
        execute: noop,
      }),
      defineTool({
        name: "thrower",
        description: "d",
        parameters: z.object({
          a: z.string().refine(() => {
            throw new Error("bad refine");
          }),
        }),
        execute: noop,
      }),
    ]);
    expect(fail("n", '{"options":{"mode":"c"}}', reg).where).toContain('at "options.mode": ');
    expect(fail("strict_tool", '{"a":1,"zzz":2}').where).toBe(
      'at "(root)": Unrecognized key: "zzz"',
    );
    expect(fail("thrower", '{"a":"x"}', reg).where).toBe(
      'at "(root)": validation threw: bad refine',
    );
  });

  it("the depth limit names the path inside the arguments", () => {
    const text = `{"data":{"x":${"[".repeat(70)}${"]".repeat(70)}}}`;
    expect(fail("store", text).where).toMatch(/^arguments\.data\.x\[0\]/);
  });

  it("a string holding an array is unwrapped and reported as an array; leading whitespace inside is fine", () => {
    expect(fail("read_file", JSON.stringify("[1,2]")).headline).toContain(
      "expected a JSON object but received an array.",
    );
    const spaced = prepareCall(
      { id: "c", name: "read_file", argumentsText: JSON.stringify(' {"path":"a"}') },
      registry,
    );
    expect(spaced.ok && spaced.call.args).toEqual({ path: "a" });
  });

  it("ids, names and texts that are not strings become text; what cannot be text becomes empty", () => {
    const numeric = prepareCall({ id: 7, name: "no_args", argumentsText: "{}" } as never, registry);
    expect(numeric.ok && numeric.call.id).toBe("7");
    const unprintable = Object.create(null);
    const odd = prepareCall(
      { id: unprintable, name: "no_args", argumentsText: unprintable } as never,
      registry,
    );
    expect(odd.ok && odd.call.id).toBe("");
    expect(odd.ok && odd.call.argumentsText).toBe("");
    const missing = prepareCall({ id: null, name: undefined } as never, registry);
    expect(missing).toMatchObject({ ok: false, id: "", name: "", argumentsText: "" });
    for (const call of [null, undefined]) {
      expect(prepareCall(call as never, registry)).toMatchObject({
        ok: false,
        id: "",
        name: "",
        error: { code: "UNKNOWN_TOOL" },
      });
    }
  });
});
