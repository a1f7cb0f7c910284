// The shape rules `npm run lint` checks (scripts/check-shape.mjs): file length, public members
// per class, import cycles. Each rule is shown to catch a deliberately broken tree.
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import {
  breaches,
  classesOf,
  cyclesOf,
  functionsOf,
  LONG_FILES,
  LONG_FUNCTIONS,
  lineCount,
  MAX_FUNCTION_LINES,
  MAX_LINES,
  MAX_MEMBERS,
  staleExceptions,
  WIDE_CLASSES,
  // @ts-expect-error: a plain .mjs script without declarations
} from "../scripts/check-shape.mjs";

const root = path.resolve(import.meta.dirname, "..");

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), "keel-shape-"));
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  }
  return dir;
}

const lines = (n: number) => `${Array.from({ length: n }, (_, i) => `// ${i}`).join("\n")}\n`;
const klass = (name: string, n: number) =>
  `export class ${name} {\n${Array.from({ length: n }, (_, i) => `  m${i}(): void {}\n`).join("")}}\n`;

describe("the code's shape, as npm run lint checks it", () => {
  it("Keel's own tree keeps it: no file or class past its limit, no import cycle", () => {
    expect(breaches(root)).toEqual([]);
    expect(staleExceptions(root)).toEqual([]);
  });

  it("every named exception says why it is one concept, and actors/ has none for length", () => {
    for (const [file, e] of Object.entries(LONG_FILES) as [
      string,
      { max: number; why: string },
    ][]) {
      expect(e.why.length, file).toBeGreaterThan(40);
      expect(e.max, file).toBeGreaterThan(MAX_LINES);
      expect(file.startsWith("actors/"), file).toBe(false);
    }
    for (const [name, e] of Object.entries(WIDE_CLASSES) as [string, { why: string }][]) {
      expect(e.why.length, name).toBeGreaterThan(40);
    }
  });

  it("every named long function says why, and its ceiling is above the rule", () => {
    for (const [name, e] of Object.entries(LONG_FUNCTIONS) as [
      string,
      { max: number; why: string },
    ][]) {
      expect(e.why.length, name).toBeGreaterThan(40);
      expect(e.max, name).toBeGreaterThan(MAX_FUNCTION_LINES);
    }
  });

  it(`a function of ${MAX_FUNCTION_LINES + 1} lines is caught, ${MAX_FUNCTION_LINES} pass, and a factory's methods count on their own`, () => {
    const body = (n: number) => Array.from({ length: n - 2 }, (_, i) => `  f(${i});`).join("\n");
    const long = `export function long() {\n${body(MAX_FUNCTION_LINES + 1)}\n}\n`;
    const fine = `export const fine = () => {\n${body(MAX_FUNCTION_LINES)}\n};\n`;
    const factory = `export function make() {\n  return {\n    a() {\n${body(60)}\n    },\n    b: () => {\n${body(60)}\n    },\n  };\n}\n`;
    const found = breaches(
      tree({ "actors/long.ts": long, "actors/fine.ts": fine, "actors/factory.ts": factory }),
    );
    expect(found).toEqual([expect.stringContaining("actors/long.ts: function long has 81 lines")]);
    expect(functionsOf(factory).map((f: { name: string }) => f.name)).toEqual(["make", "a", "b"]);
  });

  it(`a file of ${MAX_LINES + 1} lines is caught; ${MAX_LINES} pass`, () => {
    const dir = tree({ "actors/long.ts": lines(MAX_LINES + 1), "actors/ok.ts": lines(MAX_LINES) });
    const found = breaches(dir);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/^actors\/long\.ts: 501 lines \(the rule is 500\); split it/);
  });

  it("a named long file that grows past its ceiling is caught", () => {
    const [file, e] = Object.entries(LONG_FILES)[0] as [string, { max: number }];
    const found = breaches(tree({ [file]: lines(e.max + 1) }));
    expect(
      found.some((b: string) => b.startsWith(`${file}: ${e.max + 1} lines, past its ceiling`)),
    ).toBe(true);
  });

  it(`a class of ${MAX_MEMBERS + 1} public members is caught; private, protected, #private and the constructor do not count`, () => {
    const hidden =
      "  private a(): void {}\n  protected b = 1;\n  #c = 2;\n  constructor(readonly d: number, private e: number) {}\n  get f() { return 1; }\n  set f(v: number) {}\n";
    const wide = klass("Wide", MAX_MEMBERS + 1);
    const fits = `export class Fits {\n${hidden}${Array.from({ length: MAX_MEMBERS - 2 }, (_, i) => `  m${i}(): void {}\n`).join("")}}\n`;
    const found = breaches(tree({ "session/wide.ts": wide, "session/fits.ts": fits }));
    expect(found).toEqual([
      `session/wide.ts: class Wide has ${MAX_MEMBERS + 1} public members (the rule is ${MAX_MEMBERS}); move a concern out, or name it in WIDE_CLASSES with why`,
    ]);
    expect(classesOf(fits)[0].members).toEqual(expect.arrayContaining(["d", "f", "m0"]));
    expect(classesOf(fits)[0].members).toHaveLength(MAX_MEMBERS);
  });

  it("an import cycle is caught, a type-only one too, and named as the path around it", () => {
    const dir = tree({
      "session/a.ts": 'import type { B } from "./b.ts";\nexport type A = B;\n',
      "session/b.ts": 'import { c } from "../tools/c.ts";\nexport type B = 1;\n',
      "tools/c.ts": 'import type { A } from "../session/a.ts";\nexport const c = 1;\n',
      "tools/d.ts": 'import { c } from "./c.ts";\n',
    });
    expect(breaches(dir)).toEqual([
      "import cycle (type-only imports count): session/a.ts → session/b.ts → tools/c.ts → session/a.ts",
    ]);
  });

  it("cyclesOf finds each strongly connected part once, and a self-import", () => {
    const graph = new Map([
      ["a", ["b"]],
      ["b", ["a", "c"]],
      ["c", ["d"]],
      ["d", ["c"]],
      ["e", ["e"]],
      ["f", ["a"]],
    ]);
    expect(cyclesOf(graph)).toEqual(
      expect.arrayContaining([
        ["a", "b", "a"],
        ["c", "d", "c"],
        ["e", "e"],
      ]),
    );
    expect(cyclesOf(graph)).toHaveLength(3);
  });

  it("counts lines as an editor does", () => {
    expect(lineCount("")).toBe(0);
    expect(lineCount("a\n")).toBe(1);
    expect(lineCount("a\nb")).toBe(2);
  });
});
