import { describe, expect, it } from "vitest";
// @ts-expect-error: a plain .mjs script without types
import { moduleMatcher } from "../scripts/mutate-ci.mjs";
// @ts-expect-error: a plain .mjs script without types
import { mutantKey, scoreReport } from "../scripts/mutation-score.mjs";

const mutant = (
  status: string,
  line: number,
  mutatorName = "BooleanLiteral",
  replacement = "true",
) => ({
  status,
  mutatorName,
  replacement,
  location: { start: { line, column: 1 }, end: { line, column: 5 } },
});

describe("the mutation score script", () => {
  const source = "const a = false;\nconst b = x > 0;\n";
  const report = {
    files: {
      "m.ts": {
        mutants: [
          mutant("Killed", 1),
          mutant("Timeout", 1),
          mutant("Survived", 1),
          mutant("NoCoverage", 2, "EqualityOperator", "x >= 0"),
          mutant("CompileError", 2),
        ],
      },
    },
  };

  it("scores killed (and timed out) ÷ valid; compile errors are not valid", () => {
    const { rows, stale } = scoreReport(report, { "m.ts": source }, []);
    expect(rows[0]).toMatchObject({
      killed: 2,
      survived: 1,
      noCoverage: 1,
      invalid: 1,
      valid: 4,
      score: 50,
    });
    expect(rows[0].survivors.map((s: { line: number }) => s.line)).toEqual([1, 2]);
    expect(stale).toEqual([]);
  });

  it("an equivalent listed by file, mutator, source line and replacement leaves the valid count", () => {
    const eq = {
      file: "m.ts",
      mutator: "EqualityOperator",
      line: "const b = x > 0;",
      replacement: "x >= 0",
      reason: "x is never 0",
    };
    const { rows, stale } = scoreReport(report, { "m.ts": source }, [eq]);
    expect(rows[0]).toMatchObject({ equivalent: 1, valid: 3 });
    expect(rows[0].score).toBeCloseTo(66.67, 1);
    expect(stale).toEqual([]);
    expect(mutantKey("m.ts", "EqualityOperator", "  const b = x > 0;  ", "x >= 0")).toBe(
      mutantKey(eq.file, eq.mutator, eq.line, eq.replacement),
    );
  });

  it("an equivalent whose mutant was killed this run is reported as killed, not stale", () => {
    const eq = {
      file: "m.ts",
      mutator: "BooleanLiteral",
      line: "const a = false;",
      replacement: "true",
      reason: "r",
    };
    const killedOnly = { files: { "m.ts": { mutants: [mutant("Timeout", 1)] } } };
    const out = scoreReport(killedOnly, { "m.ts": source }, [eq]);
    expect(out.stale).toEqual([]);
    expect(out.killed).toEqual([eq]);
    expect(out.rows[0]).toMatchObject({ killed: 1, equivalent: 0, valid: 1 });
  });

  it("an equivalent that matches no mutant at all is reported stale", () => {
    const eq = {
      file: "m.ts",
      mutator: "EqualityOperator",
      line: "gone",
      replacement: "x",
      reason: "r",
    };
    expect(scoreReport(report, { "m.ts": source }, [eq]).stale).toEqual([eq]);
  });

  it("CI matches the modules of stryker.config.mjs by glob, one folder deep", () => {
    const isModule = moduleMatcher([
      "machines/*.ts",
      "tools/prepare/*.ts",
      "session/projection.ts",
    ]);
    expect(isModule("machines/turn.machine.ts")).toBe(true);
    expect(isModule("machines/policies/inbox.ts")).toBe(false);
    expect(isModule("tools/prepare/json-scan.ts")).toBe(true);
    expect(isModule("session/projection.ts")).toBe(true);
    expect(isModule("session/projection.tsx")).toBe(false);
  });
});
