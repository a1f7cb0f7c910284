import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
// @ts-expect-error: a plain .mjs script without declarations
import { importsOf, violations } from "../scripts/check-imports.mjs";

const root = path.resolve(import.meta.dirname, "..");

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), "keel-imports-"));
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  }
  return dir;
}

describe("the folders' import rules (docs/architecture.md), as npm run lint checks them", () => {
  it("Keel's own tree has no wrong-way import", () => {
    expect(violations(root)).toEqual([]);
  });

  it("a machine importing the session layer, a timer package or node:fs is refused", () => {
    const dir = tree({
      "machines/a.machine.ts": 'import type { X } from "../session/entries.ts";\nimport "node:fs";',
      "machines/b.machine.ts":
        'import { setup } from "xstate";\nimport type { Y } from "../contracts/status.ts";',
    });
    const found = violations(dir);
    expect(found).toHaveLength(2);
    expect(found[0]).toMatch(/machines\/a\.machine\.ts: imports \.\.\/session\/entries\.ts/);
    expect(found[1]).toMatch(/imports "node:fs"; machines\/ may import xstate/);
  });

  it("contracts import nothing of Keel's and no package; session and tools never import actors", () => {
    const dir = tree({
      "contracts/x.ts": 'import type { Z } from "../tools/types.ts";\nimport { z } from "zod";',
      "session/s.ts": 'import { TurnRun } from "../actors/turn-run.ts";',
      "tools/t.ts": 'import { a } from "../actors/agent.ts";',
      "machines/policies/p.ts": 'import { setup } from "xstate";',
    });
    expect(violations(dir)).toHaveLength(5);
  });

  it("consumers reach Keel only through the public API", () => {
    const dir = tree({
      "cli/c.ts":
        'import { createAgent } from "../index.ts";\nconst m = await import("../session/log.ts");',
    });
    const found = violations(dir);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/cli\/c\.ts: imports \.\.\/session\/log\.ts/);
  });

  it("only index.ts and testing.ts re-export: a convenience barrel or stray re-export is refused", () => {
    const dir = tree({
      "index.ts": 'export { a } from "./tools/a.ts";\nexport type * from "./tools/types.ts";',
      "tools/index.ts": 'export * from "./a.ts";',
      "machines/b.machine.ts": 'export type { X, Y } from "./policies/p.ts";',
      "tools/a.ts": 'import { z } from "zod";\n// export { q } from "./q.ts";\nexport const a = z;',
    });
    const found = violations(dir);
    expect(found).toHaveLength(2);
    expect(found[0]).toMatch(/machines\/b\.machine\.ts: re-exports another module/);
    expect(found[1]).toMatch(/tools\/index\.ts: re-exports another module/);
  });

  it("reads static, type-only, re-export and dynamic imports, and skips those in comments", () => {
    const text = [
      'import a from "./a.ts";',
      'import type { B } from "./b.ts";',
      'export * from "./c.ts";',
      'const d = await import("./d.ts");',
      '// import e from "./e.ts";',
      '/* import f from "./f.ts"; */',
    ].join("\n");
    expect(importsOf(text)).toEqual(["./a.ts", "./b.ts", "./c.ts", "./d.ts"]);
  });

  it("every runtime dependency is imported by code that ships; test-only packages are devDependencies", () => {
    const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
    // The sources the package ships, and cli/, which ships compiled (dist/cli.js): not dist/
    // itself, the docs or the licence.
    const shipped = [
      ...(pkg.files as string[]).filter((f) => /\.(ts|js)$|\/$/.test(f) && f !== "dist/"),
      "cli/",
    ];
    const used = new Set<string>();
    const scan = (rel: string) => {
      const full = path.join(root, rel);
      if (statSync(full).isDirectory()) {
        for (const name of readdirSync(full)) scan(path.join(rel, name));
      } else if (/\.(ts|js|mjs)$/.test(rel)) {
        for (const spec of importsOf(readFileSync(full, "utf8"))) {
          if (spec.startsWith(".") || spec.startsWith("node:")) continue;
          used.add(
            spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0],
          );
        }
      }
    };
    for (const entry of shipped) scan(entry);
    // A types package is used when a used dependency depends on the package it types without
    // installing its types (@ai-sdk/provider's declarations import json-schema's): a user who
    // checks libraries' declarations needs it (test/package.e2e.test.ts, TS7016).
    const typedFor = (d: string) => {
      if (!d.startsWith("@types/")) return false;
      const typed = d.slice("@types/".length);
      return [...used].some((u) => {
        const file = path.join(root, "node_modules", u, "package.json");
        if (!existsSync(file)) return false;
        return typed in (JSON.parse(readFileSync(file, "utf8")).dependencies ?? {});
      });
    };
    expect(Object.keys(pkg.dependencies).filter((d) => !used.has(d) && !typedFor(d))).toEqual([]);
    // An optional peer is never a dependency (it would be installed for everyone).
    const optional = Object.keys(pkg.peerDependenciesMeta ?? {});
    expect(optional.filter((p) => p in pkg.dependencies)).toEqual([]);
    expect(Object.keys(pkg.devDependencies)).toContain("partial-json");
  });
});
