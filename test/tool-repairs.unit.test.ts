import pino from "pino";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { runTool } from "../actors/run-tool.ts";
import type { ToolResult } from "../contracts/tool-result.ts";
import { defineTool } from "../tools/define-tool.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import { createRegistry } from "../tools/registry.ts";
import { MAX_REPAIR_NOTE_BYTES, repairNote } from "../tools/tool-output.ts";
import type { PreparedCall } from "../tools/types.ts";
import { utf8Length } from "../tools/utf8.ts";

// What the model believes ran must be what ran: every repair preparation makes to a call is
// stated in that call's result, in one line (issue 29, the tool interface).

const ran: unknown[] = [];
const registry = createRegistry([
  defineTool({
    name: "say",
    description: "Says a text.",
    parameters: z.object({ text: z.string() }),
    execute: ({ text }) => {
      ran.push(text);
      return `said ${text}`;
    },
  }),
  defineTool({
    name: "tag",
    description: "Tags items.",
    parameters: z.object({
      tags: z.array(z.string()),
      options: z.object({ mode: z.enum(["add", "remove"]) }).optional(),
      items: z.array(z.object({ id: z.number() })).optional(),
      note: z.string().optional(),
    }),
    execute: (args) => {
      ran.push(args);
      return "tagged";
    },
  }),
  defineTool({
    name: "read_file",
    description: "Reads a file.",
    parameters: z.object({ file_path: z.string() }),
    execute: ({ file_path }) => `read ${file_path}`,
  }),
]);

function prepared(name: string, argumentsText: string): PreparedCall {
  const out = prepareCall({ id: "c1", name, argumentsText }, registry);
  if (!out.ok) throw new Error(`expected the call to pass preparation: ${out.error.message}`);
  return out.call;
}

/** Runs a prepared call the way the turn does and returns the result the model is sent. */
async function resultOf(call: PreparedCall): Promise<ToolResult> {
  const report = await runTool(
    call.tool,
    call.args,
    {
      callId: call.id,
      sessionId: "s",
      signal: new AbortController().signal,
      idempotencyKey: "k",
      onUpdate: () => {},
      log: pino({ level: "silent" }),
    },
    { name: call.name, budget: call.traits.outputBudget, repairs: call.repairs },
  );
  if (report.type === "call.aborted") throw new Error("not aborted");
  return report.result;
}

const textOf = (r: ToolResult) => (r.ok ? r.content : r.message);

describe("a second concatenated object", () => {
  it('is not dropped: {"text":"a"}{"text":"b"} runs a once, and the result says b did not run and how to send it', async () => {
    ran.length = 0;
    const call = prepared("say", '{"text":"a"}{"text":"b"}');
    const result = await resultOf(call);
    expect(ran).toEqual(["a"]);
    const text = textOf(result);
    expect(text.startsWith("said a\n")).toBe(true);
    const note = text.split("\n")[1];
    expect(note).toContain("used object 1");
    expect(note).toContain('object 2 {"text":"b"} did NOT run');
    expect(note).toContain("send it as its own tool call");
  });

  it("an identical copy is said to be one that did not run again, not a call to re-send", () => {
    const call = prepared("say", '{"text":"a"} {"text":"a"} {"text":"a"}');
    expect(call.repairs.join()).toContain(
      "objects 2, 3 were identical copies and did not run again",
    );
    expect(call.repairs.join()).not.toContain("did NOT run");
  });

  it("when the first object fails the schema, the result names it as the one that did not run", () => {
    const call = prepared("say", '{"text":1}{"text":"b"}');
    expect(call.args).toEqual({ text: "b" });
    expect(call.repairs.join()).toContain("used object 2");
    expect(call.repairs.join()).toContain('object 1 {"text":1} did NOT run');
  });
});

describe("field-level repairs follow the schema", () => {
  it("a JSON string where an array is expected is read as the array, and named", () => {
    const call = prepared("tag", '{"tags":"[\\"a\\",\\"b\\"]"}');
    expect(call.args).toEqual({ tags: ["a", "b"] });
    expect(call.repairs).toEqual(['"tags" was a JSON string; read it as an array']);
  });

  it("a JSON string where an object is expected is read as the object, and named", () => {
    const call = prepared("tag", '{"tags":[],"options":"{\\"mode\\":\\"add\\"}"}');
    expect(call.args).toEqual({ tags: [], options: { mode: "add" } });
    expect(call.repairs).toEqual(['"options" was a JSON string; read it as an object']);
  });

  it("one object where an array is expected becomes a list of that object, and named", () => {
    const call = prepared("tag", '{"tags":[],"items":{"id":1}}');
    expect(call.args).toEqual({ tags: [], items: [{ id: 1 }] });
    expect(call.repairs).toEqual([
      '"items" was one object where a list is expected; read it as [object]',
    ]);
  });

  it("a JSON string holding one object where a list is expected takes both repairs, each named", () => {
    const call = prepared("tag", '{"tags":[],"items":"{\\"id\\":2}"}');
    expect(call.args).toEqual({ tags: [], items: [{ id: 2 }] });
    expect(call.repairs).toEqual([
      '"items" was a JSON string; read it as an object',
      '"items" was one object where a list is expected; read it as [object]',
    ]);
  });

  it("several fields are repaired at once, and the result names each in its one line", async () => {
    const call = prepared(
      "tag",
      '{"tags":"[\\"x\\"]","options":"{\\"mode\\":\\"remove\\"}","items":{"id":3}}',
    );
    const text = textOf(await resultOf(call));
    const lines = text.split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[1]).toContain('"tags" was a JSON string; read it as an array');
    expect(lines[1]).toContain('"options" was a JSON string; read it as an object');
    expect(lines[1]).toContain('"items" was one object where a list is expected');
  });

  it("a string field is never parsed, even when its text is JSON", () => {
    const call = prepared("tag", '{"tags":[],"note":"[1,2]"}');
    expect(call.args).toEqual({ tags: [], note: "[1,2]" });
    expect(call.repairs).toEqual([]);
  });

  it("a repair that still does not pass is no repair: the original problem is reported", () => {
    const out = prepareCall({ id: "c", name: "tag", argumentsText: '{"tags":"[1,2]"}' }, registry);
    expect(out.ok).toBe(false);
    expect(!out.ok && out.error.message).toContain('at "tags"');
    expect(!out.ok && out.error.message).toContain("expected array, received string");
  });

  it("a string that is not JSON is not turned into a list", () => {
    const out = prepareCall({ id: "c", name: "tag", argumentsText: '{"tags":"a"}' }, registry);
    expect(out.ok).toBe(false);
  });
});

describe("every repair is stated in the call's result", () => {
  it("a renamed parameter and an aliased tool name end the result in one short line", async () => {
    const call = prepared("Read", '{"filePath":"a.ts"}');
    const text = textOf(await resultOf(call));
    expect(text).toBe(
      'read a.ts\n[Keel repaired this call before running it: tool name "Read" resolved to "read_file"; renamed parameters: "filePath" → "file_path". Use the declared tool name, parameter names and types next time.]',
    );
  });

  it("an ignored unknown parameter is stated, so the model does not believe it was used", async () => {
    const text = textOf(await resultOf(prepared("say", '{"text":"a","loudly":true}')));
    expect(text).toContain('ignored unknown parameters: "loudly"');
  });

  it("double-encoded arguments are stated", async () => {
    const text = textOf(await resultOf(prepared("say", '"{\\"text\\":\\"a\\"}"')));
    expect(text.split("\n")[1]).toContain("double-encoded");
  });

  it("a tool that fails still states the repairs, after its message", async () => {
    const failing = createRegistry([
      defineTool({
        name: "boom",
        description: "Fails.",
        parameters: z.object({ path: z.string() }),
        execute: () => {
          throw new Error("disk full");
        },
      }),
    ]);
    const out = prepareCall({ id: "c", name: "boom", argumentsText: '{"Path":"a"}' }, failing);
    if (!out.ok) throw new Error(out.error.message);
    const result = await resultOf(out.call);
    expect(result.ok).toBe(false);
    expect(textOf(result)).toMatch(/disk full[\s\S]*\n\[Keel repaired this call.*"Path" → "path"/);
  });

  it("a call without repairs gets no note", async () => {
    expect(textOf(await resultOf(prepared("say", '{"text":"a"}')))).toBe("said a");
  });

  it("a byte-order mark is not a repair to tell the model (it changes nothing it meant)", () => {
    const call = prepared("say", '\uFEFF{"text":"a"}');
    expect(call.repairs).toEqual([]);
    expect(call.warnings.join()).toContain("byte-order mark");
  });

  it("the note stays one bounded line however many and however long the repairs", () => {
    const note = repairNote(["a\nb", "x".repeat(5000), "é".repeat(900)]);
    expect(note).not.toMatch(/[\r\n]/);
    expect(utf8Length(note)).toBeLessThanOrEqual(MAX_REPAIR_NOTE_BYTES);
    expect(note.endsWith("next time.]")).toBe(true);
  });
});
