import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../tools/define-tool.ts";
import { remapKeys } from "../tools/prepare/remap-keys.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import { createRegistry } from "../tools/registry.ts";

const schema = (...keys: string[]) =>
  z.object(Object.fromEntries(keys.map((k) => [k, z.string()])));

describe("remapKeys binds a misspelled key only when exactly one declared key fits", () => {
  it("a tie at the same edit distance binds nothing: bame against name and game", () => {
    expect(remapKeys({ bame: "x" }, schema("name", "game"))).toEqual({
      value: { bame: "x" },
      remapped: [],
      unknown: ["bame"],
    });
    expect(remapKeys({ bame: "x" }, schema("name")).remapped).toEqual(['"bame" → "name"']);
  });

  it("two declared keys equal after normalising (case, - and _) bind nothing", () => {
    expect(remapKeys({ FILE_PATH: "x" }, schema("file_path", "filePath")).unknown).toEqual([
      "FILE_PATH",
    ]);
    expect(remapKeys({ "File-Path": "x" }, schema("file_path")).value).toEqual({ file_path: "x" });
  });

  it("an affix of 3+ letters binds when it fits one key, and nothing when it fits two", () => {
    expect(remapKeys({ file_path: "x" }, schema("path")).value).toEqual({ path: "x" });
    expect(remapKeys({ pattern: "x" }, schema("search_pattern")).value).toEqual({
      search_pattern: "x",
    });
    expect(remapKeys({ path: "x" }, schema("file_path", "dir_path")).unknown).toEqual(["path"]);
    // Two letters are no affix, and too far by edit distance.
    expect(remapKeys({ id: "x" }, schema("user_id")).unknown).toEqual(["id"]);
  });

  it("short names (≤ 4 characters) allow one edit, longer names two", () => {
    expect(remapKeys({ nme: "x" }, schema("name")).value).toEqual({ name: "x" });
    expect(remapKeys({ nm: "x" }, schema("name")).unknown).toEqual(["nm"]);
    expect(remapKeys({ cntnt: "x" }, schema("content")).value).toEqual({ content: "x" });
    expect(remapKeys({ conetnt: "x" }, schema("content")).value).toEqual({ content: "x" });
    expect(remapKeys({ cxtnxt: "x" }, schema("content")).unknown).toEqual(["cxtnxt"]);
    // Five characters already get two edits.
    expect(remapKeys({ qurey: "x" }, schema("query")).value).toEqual({ query: "x" });
  });

  it("the nearest of several candidates wins when it is strictly nearer", () => {
    expect(remapKeys({ comand: "x" }, schema("command", "comment")).value).toEqual({
      command: "x",
    });
  });

  it("a key already supplied is no target, and two received keys claiming one target both stay unknown", () => {
    expect(remapKeys({ name: "a", nme: "b" }, schema("name"))).toEqual({
      value: { name: "a", nme: "b" },
      remapped: [],
      unknown: ["nme"],
    });
    expect(remapKeys({ nme: "a", nam: "b" }, schema("name")).unknown).toEqual(["nme", "nam"]);
  });

  it("keeps the order and the other keys, reports each rename, and ignores keys over 128 characters", () => {
    const out = remapKeys({ a: "1", nme: "2", z: "3" }, schema("a", "name", "z"));
    expect(Object.keys(out.value)).toEqual(["a", "name", "z"]);
    expect(out.remapped).toEqual(['"nme" → "name"']);
    const long = "n".repeat(129);
    expect(remapKeys({ [long]: "x" }, schema(`${"n".repeat(128)}`)).unknown).toEqual([long]);
  });

  it("a same name ignoring case, - and _ wins over a name that only starts or ends it", () => {
    expect(remapKeys({ FilePath: "x" }, schema("file_path", "path")).value).toEqual({
      file_path: "x",
    });
  });

  it("a received name that is the start of a declared one binds too, from 3 letters", () => {
    expect(remapKeys({ query: "x" }, schema("query_text")).value).toEqual({ query_text: "x" });
    expect(remapKeys({ cmd: "ls" }, schema("cmd_line")).value).toEqual({ cmd_line: "ls" });
  });

  it("two affix matches bind nothing, even where edit distance alone would pick one", () => {
    // "paths" is one edit from "path", but it also ends "all_paths": the model's intent is unclear.
    expect(remapKeys({ paths: "x" }, schema("path", "all_paths"))).toEqual({
      value: { paths: "x" },
      remapped: [],
      unknown: ["paths"],
    });
  });

  it("a 4-character name allows one edit, not two", () => {
    expect(remapKeys({ nmae: "x" }, schema("name")).unknown).toEqual(["nmae"]);
  });

  it("a key of exactly 128 characters is still renamed", () => {
    const declared = "n".repeat(128);
    expect(remapKeys({ [declared.toUpperCase()]: "x" }, schema(declared)).value).toEqual({
      [declared]: "x",
    });
  });

  it("a non-object schema returns the value unchanged", () => {
    const value = { nme: "x" };
    expect(remapKeys(value, z.string())).toEqual({ value, remapped: [], unknown: [] });
  });
});

describe("resourceKey", () => {
  it("a resourceKey that returns a non-string gives no key (the call is not keyed by garbage)", () => {
    const tool = defineTool({
      name: "k",
      description: "d",
      parameters: z.object({}),
      traits: { concurrencySafe: true, resourceKey: () => 42 as unknown as string },
      execute: async () => "ok",
    });
    const out = prepareCall({ id: "1", name: "k", argumentsText: "{}" }, createRegistry([tool]));
    expect(out.ok).toBe(true);
    expect(out.ok && out.call.resourceKey).toBeUndefined();
    expect(out.ok && out.call.traits.concurrencySafe).toBe(true);
  });
});
