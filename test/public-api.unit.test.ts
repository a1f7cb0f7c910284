// The public surface is what the docs document: every name `keel` and `keel/testing`
// export (values and types) is listed in the API section of docs/embedding.md, and every name
// listed there is exported. Internals stay importable by path for tests and benchmarks, not by users.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..");

/** Every name an entry exports, with whether it is a value (a class, function or const). */
function exportsOf(entries: string[]): Map<string, Map<string, "value" | "type">> {
  const program = ts.createProgram(
    entries.map((e) => join(ROOT, e)),
    {
      allowImportingTsExtensions: true,
      noEmit: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      skipLibCheck: true,
      types: ["node"],
    },
  );
  const checker = program.getTypeChecker();
  const result = new Map<string, Map<string, "value" | "type">>();
  for (const entry of entries) {
    const file = program.getSourceFile(join(ROOT, entry));
    const symbol = file && checker.getSymbolAtLocation(file);
    if (!symbol) throw new Error(`cannot read the exports of ${entry}`);
    const names = new Map<string, "value" | "type">();
    for (const e of checker.getExportsOfModule(symbol)) {
      const target = e.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(e) : e;
      // `export type { X }` of a class is a type for the user: no value to call or construct.
      const typeOnly = e.declarations?.some((d) => ts.isTypeOnlyExportDeclaration(d)) ?? false;
      names.set(e.name, target.flags & ts.SymbolFlags.Value && !typeOnly ? "value" : "type");
    }
    result.set(entry, names);
  }
  return result;
}

/** The backticked identifiers of a markdown section (up to the next `## ` heading). */
function namesIn(section: string): Set<string> {
  return new Set([...section.matchAll(/`([A-Za-z_$][\w$]*)(?:\([^`]*\))?`/g)].map((m) => m[1]));
}

const readme = readFileSync(join(ROOT, "docs", "embedding.md"), "utf8");
const apiStart = readme.indexOf("\n## API\n");
const apiSection = readme.slice(apiStart, readme.indexOf("\n## ", apiStart + 1));
const [mainPart, rest = ""] = apiSection.split("`keel/testing`:");
const [testingPart, clientPart] = rest.split("`keel/client`:");
const exported = exportsOf(["index.ts", "testing.ts", "client/index.ts"]);

describe("the public API", () => {
  it("has an API section in docs/embedding.md", () => {
    expect(apiStart).toBeGreaterThan(0);
    expect(testingPart).toBeDefined();
    expect(clientPart).toBeDefined();
  });

  it("every name keel exports is listed in docs/embedding.md's API section, and every name listed there is exported", () => {
    const names = [...exported.get("index.ts")!.keys()].sort();
    const listed = namesIn(mainPart);
    expect(names.filter((n) => !listed.has(n))).toEqual([]);
    // Besides the exports, the section names only Model's method and the command.
    const others = ["stream", "keel"];
    expect([...listed].filter((n) => !names.includes(n) && !others.includes(n))).toEqual([]);
  });

  it("every name keel/testing exports is listed in docs/embedding.md, and no more", () => {
    const names = [...exported.get("testing.ts")!.keys()].sort();
    expect([...namesIn(testingPart)].sort()).toEqual(names);
  });

  it("every name keel/client exports by name is listed in docs/embedding.md (its protocol, event and permission types by their module)", () => {
    const program = ts.createSourceFile(
      "client/index.ts",
      readFileSync(join(ROOT, "client", "index.ts"), "utf8"),
      ts.ScriptTarget.ES2022,
    );
    const named: string[] = [];
    for (const statement of program.statements) {
      if (!ts.isExportDeclaration(statement) || !statement.exportClause) continue;
      if (!ts.isNamedExports(statement.exportClause)) continue;
      for (const element of statement.exportClause.elements) named.push(element.name.text);
    }
    expect(named.length).toBeGreaterThan(5);
    const listed = namesIn(clientPart);
    expect(named.filter((n) => !listed.has(n))).toEqual([]);
    expect([...listed].filter((n) => !exported.get("client/index.ts")!.has(n))).toEqual([]);
  });

  it("npm run docs documents the three entries with TypeDoc and fails on an export without TSDoc", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    expect(pkg.scripts.docs).toBe("typedoc");
    const config = JSON.parse(readFileSync(join(ROOT, "typedoc.json"), "utf8"));
    expect(config.entryPoints).toEqual(["index.ts", "testing.ts", "client/index.ts"]);
    expect(config.validation.notDocumented).toBe(true);
    expect(config.treatValidationWarningsAsErrors).toBe(true);
    expect(config.requiredToBeDocumented).toEqual(
      expect.arrayContaining(["Class", "Function", "Interface", "TypeAlias", "Variable"]),
    );
  });

  it("exports Session as a type only: sessions come from agent.session(), not its constructor", () => {
    expect(exported.get("index.ts")!.get("Session")).toBe("type");
  });

  it("keeps internals out: the permission broker, the retry policy's functions, the protocol's vocabulary", () => {
    const names = exported.get("index.ts")!;
    for (const internal of [
      "PermissionBroker",
      "randomIds",
      "LineDecoder",
      "PROTOCOL_VERSION",
      "refuse",
      "notExecuted",
      "decideRetry",
      "classifyModelError",
      "prepareCall",
      "compactSession",
      "DEFAULT_LIMITS",
    ]) {
      expect(names.has(internal), internal).toBe(false);
    }
    // A guard against bloat, raised for acceptance (15 names: its options, checks and evidence)
    // and for MCP and tool sets (18 names: the servers, the set, its sources and snapshot),
    // and for deletion and redaction (4 names: two functions and their results), budgets
    // (Budget, BudgetStop, PriceTable…) and provider concurrency (processSlots,
    // postgresProviderSlots), replay (replaySession, its options, report and divergence), and
    // web apps (8 names: createHttpHandler, its options and type, toNodeListener, the error codes
    // and the UI shapes its chat routes write).
    // and EntryWriter (what wrote a session), and durable answers (answerThroughStore, its
    // options and result, hasLeases, LeaseStore).
    expect(names.size).toBeLessThan(202);
  });
});
