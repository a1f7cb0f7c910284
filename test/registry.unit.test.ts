import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../tools/define-tool.ts";
import { createRegistry } from "../tools/registry.ts";

const tool = (name: string, parameters: z.ZodObject = z.object({ path: z.string() })) =>
  defineTool({ name, description: `the ${name} tool`, parameters, execute: async () => "ok" });

describe("registry", () => {
  it("gets tools by exact name and lists names in registration order", () => {
    const reg = createRegistry([tool("read_file"), tool("shell")]);
    expect(reg.names()).toEqual(["read_file", "shell"]);
    expect(reg.get("read_file")?.name).toBe("read_file");
    expect(reg.get("Read")).toBeUndefined();
  });

  it("bumps the version on every add and remove, and not on a no-op remove", () => {
    const reg = createRegistry();
    const v0 = reg.version;
    reg.add(tool("a"));
    expect(reg.version).toBe(v0 + 1);
    expect(reg.remove("a")).toBe(true);
    expect(reg.version).toBe(v0 + 2);
    expect(reg.remove("a")).toBe(false);
    expect(reg.version).toBe(v0 + 2);
  });

  it("refuses a second tool with the same name", () => {
    const reg = createRegistry([tool("a")]);
    expect(() => reg.add(tool("a"))).toThrow(/already registered/);
  });

  it("defines plain definitions on add and rejects invalid ones", () => {
    const reg = createRegistry();
    const added = reg.add({
      name: "plain",
      description: "d",
      parameters: z.object({}),
      execute: () => "x",
    });
    expect(added.jsonSchema).toMatchObject({ type: "object" });
    expect(() =>
      reg.add({ name: "bad name", description: "d", parameters: z.object({}), execute: () => "x" }),
    ).toThrow(/name "bad name" is invalid/);
  });

  it("resolves foreign aliases only when their target is registered", () => {
    const reg = createRegistry([tool("read_file"), tool("shell")]);
    for (const alias of ["Read", "read", "READ", "Bash", "bash"])
      expect(reg.resolve(alias)).toMatchObject({ ok: true, via: "alias" });
    expect(reg.resolve("Read")).toMatchObject({ tool: { name: "read_file" } });
    expect(reg.resolve("Bash")).toMatchObject({ tool: { name: "shell" } });
    expect(reg.resolve("LS").ok).toBe(false);
    reg.add(tool("list_dir"));
    expect(reg.resolve("LS")).toMatchObject({ ok: true, tool: { name: "list_dir" } });
    expect(reg.resolve("Write").ok).toBe(false);
  });

  it("resolves case and -/_ variants of registered names", () => {
    const reg = createRegistry([tool("read_file"), tool("my_tool")]);
    for (const variant of ["READ_FILE", "read-file", "ReadFile", "My-Tool", "MYTOOL"]) {
      expect(reg.resolve(variant)).toMatchObject({ ok: true });
    }
    expect(reg.resolve("my_tool")).toMatchObject({ via: "exact" });
    expect(reg.resolve("My-Tool")).toMatchObject({ via: "normalized", tool: { name: "my_tool" } });
  });

  it("does not resolve a variant shared by two registered names", () => {
    const reg = createRegistry([tool("foo_bar"), tool("foo-bar")]);
    expect(reg.resolve("FOOBAR").ok).toBe(false);
    expect(reg.resolve("foo-bar")).toMatchObject({ ok: true, via: "exact" });
  });

  it("suggests the closest registered name, and nothing for a distant or tied one", () => {
    const reg = createRegistry([tool("read_file"), tool("write_file"), tool("grep")]);
    expect(reg.closest("raed_file")).toBe("read_file");
    expect(reg.closest("grp")).toBe("grep");
    expect(reg.closest("completely_different")).toBeUndefined();
    expect(reg.resolve("wrte_file")).toEqual({ ok: false, closest: "write_file" });
    const tied = createRegistry([tool("ab1"), tool("ab2")]);
    expect(tied.closest("ab3")).toBeUndefined();
  });

  it("a 1 MB tool name is handled in bounded time", () => {
    const reg = createRegistry([tool("read_file")]);
    const start = performance.now();
    expect(reg.resolve("x".repeat(1 << 20)).ok).toBe(false);
    expect(performance.now() - start).toBeLessThan(2000);
  });

  it("serves the model tool list from cache until the registry changes", () => {
    const reg = createRegistry([tool("a", z.object({ n: z.number().int().describe("count") }))]);
    const first = reg.modelTools();
    expect(reg.modelTools()).toBe(first);
    expect(first).toEqual([
      {
        type: "function",
        function: {
          name: "a",
          description: "the a tool",
          parameters: {
            type: "object",
            properties: { n: { type: "integer", description: "count" } },
            required: ["n"],
          },
        },
      },
    ]);
    reg.add(tool("b"));
    const second = reg.modelTools();
    expect(second).not.toBe(first);
    expect(second.map((t) => t.function.name)).toEqual(["a", "b"]);
    reg.remove("a");
    expect(reg.modelTools().map((t) => t.function.name)).toEqual(["b"]);
  });

  it("alias and variant resolution follow runtime removal", () => {
    const reg = createRegistry([tool("shell")]);
    expect(reg.resolve("Bash").ok).toBe(true);
    reg.remove("shell");
    expect(reg.resolve("Bash").ok).toBe(false);
    expect(reg.resolve("SHELL").ok).toBe(false);
  });
});
