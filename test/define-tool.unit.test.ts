import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool, isDefinedTool, ToolDefinitionError } from "../tools/define-tool.ts";
import { applyOutputBudget, errorToResult, toToolResult } from "../tools/tool-output.ts";
import { DEFAULT_OUTPUT_BUDGET, resolveTraits } from "../tools/traits.ts";

const base = {
  name: "t",
  description: "does t",
  parameters: z.object({ a: z.string() }),
  execute: () => "ok",
};

describe("defineTool", () => {
  it("derives the JSON Schema once, without $schema and without the ±2^53 integer bounds", () => {
    const tool = defineTool({
      ...base,
      parameters: z.object({ a: z.string(), n: z.number().int().min(1).optional() }),
    });
    expect(tool.jsonSchema).toEqual({
      type: "object",
      properties: { a: { type: "string" }, n: { type: "integer", minimum: 1 } },
      required: ["a"],
    });
    expect(isDefinedTool(tool)).toBe(true);
    expect(defineTool(tool)).toBe(tool);
  });

  it.each([
    [
      "a name with a space",
      { ...base, name: "read file" },
      /name "read file" is invalid: use 1–64 characters/,
    ],
    ["an empty name", { ...base, name: "" }, /name "" is invalid/],
    ["a 65-character name", { ...base, name: "x".repeat(65) }, /is invalid/],
    [
      "an empty description",
      { ...base, description: "  " },
      /description must be a non-empty string/,
    ],
    [
      "a non-object schema",
      { ...base, parameters: z.string() },
      /parameters must be a zod object schema, e.g. z.object/,
    ],
    [
      "a plain JSON Schema instead of zod",
      { ...base, parameters: { type: "object" } },
      /parameters must be a zod object schema/,
    ],
    ["a missing execute", { ...base, execute: undefined }, /execute must be a function/],
    [
      "a schema without JSON Schema form",
      { ...base, parameters: z.object({ d: z.date() }) },
      /cannot be expressed as JSON Schema/,
    ],
    [
      "an example that fails the schema",
      { ...base, examples: [{ args: { a: 1 } }] },
      /examples\[0\]\.args do not pass/,
    ],
  ])("rejects %s with a clear error", (_what, def, message) => {
    expect(() => defineTool(def as never)).toThrow(ToolDefinitionError);
    expect(() => defineTool(def as never)).toThrow(message);
  });

  it("resolves traits at definition", () => {
    expect(
      defineTool({ ...base, traits: { readOnly: true, risk: "low" } }).resolvedTraits,
    ).toMatchObject({ readOnly: true, risk: "low", idempotent: false });
  });
});

describe("resolveTraits", () => {
  it("defaults to the conservative reading", () => {
    expect(resolveTraits(undefined)).toEqual({
      readOnly: false,
      concurrencySafe: false,
      idempotent: false,
      cancellable: false,
      risk: "high",
      outputBudget: { maxBytes: 32768, overflow: "truncate" },
      executionMode: "parallel",
    });
  });

  it("reads mistyped and unknown values conservatively", () => {
    const traits = resolveTraits({
      readOnly: "yes",
      concurrencySafe: 1,
      idempotent: "true",
      cancellable: null,
      risk: "none",
      outputBudget: { maxBytes: -5, overflow: "drop" },
      executionMode: "random",
    });
    expect(traits).toEqual(resolveTraits(undefined));
    expect(
      resolveTraits({ outputBudget: { maxBytes: 1.5, overflow: "spill" } }).outputBudget,
    ).toEqual({ maxBytes: DEFAULT_OUTPUT_BUDGET.maxBytes, overflow: "spill" });
    expect(resolveTraits("not an object")).toEqual(resolveTraits(undefined));
  });

  it("a read-only tool without a declared risk is low risk; a declared risk wins", () => {
    expect(resolveTraits({ readOnly: true }).risk).toBe("low");
    expect(resolveTraits({ readOnly: true, risk: "high" }).risk).toBe("high");
    expect(resolveTraits({ readOnly: true, risk: "bogus" }).risk).toBe("low");
    expect(resolveTraits({ readOnly: "yes" }).risk).toBe("high");
  });

  it("keeps valid declared values", () => {
    expect(
      resolveTraits({
        readOnly: true,
        concurrencySafe: true,
        idempotent: true,
        cancellable: true,
        risk: "medium",
        outputBudget: { maxBytes: 10, overflow: "spill" },
        executionMode: "sequential",
      }),
    ).toEqual({
      readOnly: true,
      concurrencySafe: true,
      idempotent: true,
      cancellable: true,
      risk: "medium",
      outputBudget: { maxBytes: 10, overflow: "spill" },
      executionMode: "sequential",
    });
  });
});

describe("tool output", () => {
  it("a string becomes a successful result and a valid result is kept", () => {
    expect(toToolResult("hi")).toEqual({ ok: true, content: "hi" });
    const cont = { tool: "read_file", args: { path: "a", offset: 3 } };
    expect(
      toToolResult({ ok: true, content: "x", truncated: true, continuation: cont, extra: 1 }),
    ).toEqual({ ok: true, content: "x", truncated: true, continuation: cont });
    expect(toToolResult({ ok: false, code: "NOT_FOUND", message: "m", retryable: false })).toEqual({
      ok: false,
      code: "NOT_FOUND",
      message: "m",
      retryable: false,
    });
  });

  it.each([
    [undefined, "a undefined"],
    [42, "a number"],
    [{ ok: true, content: 5 }, "content is not a string"],
    [
      { ok: true, content: "x", continuation: { args: {} } },
      "continuation is not { tool: string, args: object }",
    ],
    [
      { ok: false, code: "WHATEVER", message: "m", retryable: false },
      'code "WHATEVER" is not a known ToolErrorCode',
    ],
    [{ ok: false, code: "DENIED", message: "m" }, "retryable is not a boolean"],
    [{ content: "x" }, "ok is neither true nor false"],
  ])("a malformed return value %j becomes EXECUTION_FAILED explaining %s", (value, why) => {
    const r = toToolResult(value, "my_tool");
    expect(r).toMatchObject({ ok: false, code: "EXECUTION_FAILED", retryable: false });
    expect(!r.ok && r.message).toContain(`my_tool returned an invalid result (${why})`);
    expect(!r.ok && r.message).toContain("expected a string");
  });

  it("a thrown error becomes EXECUTION_FAILED with its message and at most 5 stack frames", () => {
    const nest = (n: number): never =>
      n === 0
        ? (() => {
            throw new TypeError("bad input");
          })()
        : nest(n - 1);
    let caught: unknown;
    try {
      nest(12);
    } catch (err) {
      caught = err;
    }
    const r = errorToResult(caught);
    expect(r).toMatchObject({ ok: false, code: "EXECUTION_FAILED", retryable: false });
    expect(r.message).toContain("TypeError: bad input");
    expect(r.message.split("\n").filter((l) => l.trim().startsWith("at ")).length).toBe(5);
    expect(errorToResult("just a string").message).toContain(
      'threw a non-Error value: "just a string"',
    );
    expect(
      errorToResult({
        toString: () => {
          throw new Error("x");
        },
      }).code,
    ).toBe("EXECUTION_FAILED");
  });

  const opts = { toolName: "t", args: {} };

  it("leaves failures and results within budget unchanged", async () => {
    const fail = {
      ok: false as const,
      code: "TIMEOUT" as const,
      message: "x".repeat(100),
      retryable: false,
    };
    expect(await applyOutputBudget(fail, { maxBytes: 100, overflow: "truncate" }, opts)).toBe(fail);
    const small = { ok: true as const, content: "é".repeat(5) };
    expect(await applyOutputBudget(small, { maxBytes: 10, overflow: "truncate" }, opts)).toBe(
      small,
    );
  });

  it("truncates to the byte budget without splitting a character and says how to continue", async () => {
    for (const maxBytes of [300, 301, 302, 303, 1000]) {
      const content = "aé😀".repeat(500);
      const r = await applyOutputBudget(
        { ok: true, content },
        { maxBytes, overflow: "truncate" },
        opts,
      );
      if (!r.ok) throw new Error("failed");
      expect(Buffer.byteLength(r.content)).toBeLessThanOrEqual(maxBytes);
      expect(r.content).not.toContain("\uFFFD");
      expect(r.truncated).toBe(true);
      expect(r.content).toMatch(/output truncated: first \d+ of 3500 bytes shown/);
      expect(r.content).toContain("narrow the request");
      expect(content.startsWith(r.content.slice(0, r.content.indexOf("\n[output truncated")))).toBe(
        true,
      );
    }
  });

  it("uses the tool's continuation when given one", async () => {
    const r = await applyOutputBudget(
      { ok: true, content: "x".repeat(5000) },
      { maxBytes: 1000, overflow: "truncate" },
      {
        ...opts,
        continuation: ({ shownBytes }) => ({ tool: "page", args: { from: shownBytes } }),
      },
    );
    expect(r).toMatchObject({ ok: true, truncated: true, continuation: { tool: "page" } });
    const from = r.ok && (r.continuation?.args.from as number);
    expect(r.ok && r.content).toContain(`Continue with page {"from":${from}}`);
    expect(r.ok && r.content.startsWith("x".repeat(from as number))).toBe(true);
  });

  it("spills the full output and returns a preview, the path and a read_file continuation", async () => {
    const written: string[] = [];
    const content = Array.from({ length: 2000 }, (_, i) => `line ${i + 1}`).join("\n");
    const r = await applyOutputBudget(
      { ok: true, content },
      { maxBytes: 1000, overflow: "spill" },
      {
        ...opts,
        spill: async (c) => {
          written.push(c);
          return { path: ".keel/spill/call_1.txt", sha256: "ab12" };
        },
      },
    );
    expect(written).toEqual([content]);
    if (!r.ok) throw new Error("failed");
    expect(r.truncated).toBe(true);
    expect(Buffer.byteLength(r.content)).toBeLessThanOrEqual(1000);
    expect(r.content).toContain("saved to .keel/spill/call_1.txt (sha256 ab12)");
    const next = r.continuation?.args.offset as number;
    expect(r.continuation).toEqual({
      tool: "read_file",
      args: { path: ".keel/spill/call_1.txt", offset: next },
      path: ".keel/spill/call_1.txt",
      sha256: "ab12",
    });
    expect(r.content).toContain(`line ${next - 1}`);
  });

  it("falls back to truncation when spilling fails", async () => {
    const r = await applyOutputBudget(
      { ok: true, content: "y".repeat(5000) },
      { maxBytes: 500, overflow: "spill" },
      {
        ...opts,
        spill: async () => {
          throw new Error("disk full");
        },
      },
    );
    expect(r).toMatchObject({ ok: true, truncated: true });
    expect(r.ok && r.content).toContain("saving the full output failed: disk full");
    expect(r.ok && Buffer.byteLength(r.content)).toBeLessThanOrEqual(500);
  });
});

describe("createSpill", () => {
  it("writes the full output to <dir>/<callId>-<hash>.txt and returns that path and the content's sha256", async () => {
    const { mkdtempSync, readFileSync, rmSync } = await import("node:fs");
    const { createHash } = await import("node:crypto");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const { createSpill } = await import("../actors/spill-output.ts");
    const root = mkdtempSync(join(tmpdir(), "keel-spill-"));
    try {
      const spill = createSpill(join(root, "spill"));
      const content = "z".repeat(3000);
      const sha256 = createHash("sha256").update(content).digest("hex");
      const r = await applyOutputBudget(
        { ok: true, content },
        { maxBytes: 1000, overflow: "spill" },
        { toolName: "t", args: {}, spill: (c) => spill(c, "call/1") },
      );
      const file = join(root, "spill", `call_1-${sha256.slice(0, 12)}.txt`);
      expect(r).toMatchObject({
        ok: true,
        truncated: true,
        continuation: { tool: "read_file", path: file, sha256 },
      });
      expect(readFileSync(file, "utf8")).toBe(content);
      // The same output again is the same file; another output of the same call id is another.
      expect(await spill(content, "call/1")).toEqual({ path: file, sha256 });
      expect((await spill("other", "call/1")).path).not.toBe(file);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
