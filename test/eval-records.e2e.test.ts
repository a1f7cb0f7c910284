import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { ADD_TEST, BUGGY_ADD, FIXED_ADD } from "./support/acceptance-fixture.ts";

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, "..");

const keel = (args: string[]) =>
  run(process.execPath, ["--import", "tsx", "cli/main.ts", ...args], {
    cwd: ROOT,
    maxBuffer: 16 * 1024 * 1024,
  });

/**
 * A model module for `--model`: run `r` of a task calls, in its first response, the tools
 * `PLAN[r % 3]` lists (`fix`: write_file with the fix to add.mjs, `wrong`: write_file to
 * wrong.mjs, `look`: list_dir), then answers. Its name is `<name>`.
 */
const PLAN = [["look", "fix"], ["wrong"], ["look"]];
const modelModule = (name: string, plan = PLAN) => `
const PLAN = ${JSON.stringify(plan)};
const CALLS = {
  fix: ["write_file", ${JSON.stringify(JSON.stringify({ path: "add.mjs", content: FIXED_ADD }))}],
  wrong: ["write_file", ${JSON.stringify(JSON.stringify({ path: "wrong.mjs", content: FIXED_ADD }))}],
  look: ["list_dir", ${JSON.stringify(JSON.stringify({ path: "." }))}],
};
export default ({ run }) => {
  let requests = 0;
  return {
    name: ${JSON.stringify(name)},
    async *stream(request) {
      requests++;
      yield { type: "usage", usage: { inputTokens: 10, outputTokens: 1 } };
      const offered = new Set(request.tools.map((t) => t.function.name));
      const calls = requests === 1 ? PLAN[run % PLAN.length].map((c) => CALLS[c]).filter(([n]) => offered.has(n)) : [];
      if (calls.length > 0) {
        for (const [i, [name, args]] of calls.entries()) {
          yield { type: "call.start", index: i, id: "c" + i, name };
          yield { type: "call.delta", index: i, argumentsDelta: args };
          yield { type: "call.end", index: i };
        }
        yield { type: "finish", reason: "tool_calls" };
        return;
      }
      yield { type: "text.delta", text: "Done." };
      yield { type: "finish", reason: "stop" };
    },
  };
};
`;

const task = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  prompt: "Fix add() so that node add.test.mjs passes.",
  files: { "add.mjs": BUGGY_ADD, "add.test.mjs": ADD_TEST },
  checks: [{ name: "tests", command: "node add.test.mjs", files: ["add.test.mjs"] }],
  ...extra,
});
const BUDGET = { maxSteps: 4, maxSpendTokens: 10_000, timeMs: 60_000 };
/** Expects one write_file call whose path is add.mjs (a JSON Schema on its arguments). */
const EXPECTED = [
  {
    name: "write_file",
    arguments: {
      type: "object",
      properties: { path: { const: "add.mjs" } },
      required: ["path"],
    },
  },
];

function workspace(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "keel-eval-rec-"));
  writeFileSync(
    path.join(dir, "tasks.json"),
    JSON.stringify({
      budget: BUDGET,
      tasks: [task("measured", { expectedCalls: EXPECTED }), task("plain")],
    }),
  );
  writeFileSync(path.join(dir, "model.mjs"), modelModule("acme:planner-1"));
  return dir;
}

interface Metrics {
  toolPrecision: number | null;
  toolRecall: number | null;
  argumentValidity: number | null;
}
type TaskRow = { id: string; accepted: number; passAtK: boolean } & Partial<Metrics>;

/**
 * The metrics of k = 3 runs of PLAN by hand: calls made 2 + 1 + 1 = 4; matched (a write_file
 * call, at most one a run) 1 + 1 + 0 = 2 of 3 expected; of the 2 write_file calls, 1 has
 * path add.mjs.
 */
const BY_HAND: Metrics = { toolPrecision: 2 / 4, toolRecall: 2 / 3, argumentValidity: 1 / 2 };

describe("keel eval: records and tool metrics", () => {
  it("--json records the model and its provider, Keel's version and git commit, the seed and the budget", async () => {
    const dir = workspace();
    const { stdout } = await keel(
      ["eval", path.join(dir, "tasks.json"), "--k", "1", "--seed", "9", "--json"].concat([
        "--model",
        path.join(dir, "model.mjs"),
      ]),
    );
    const out = JSON.parse(stdout);
    const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8"));
    const head = execFileSync("git", ["-C", ROOT, "rev-parse", "HEAD"], { encoding: "utf8" });
    expect(out.keel).toMatchObject({ version: pkg.version, commit: head.trim() });
    expect(typeof out.keel.dirty).toBe("boolean");
    expect(out.seed).toBe(9);
    expect(out.budget).toEqual(BUDGET);
    expect(out.base.models).toEqual([{ name: "acme:planner-1", provider: "acme" }]);
    expect(out.base.toolSets).toHaveLength(1);
    expect(out.base.toolSets[0].names).toEqual(expect.arrayContaining(["list_dir", "write_file"]));
    expect(out.base.toolSets[0].digest).toMatch(/^[0-9a-f]{64}$/);
    for (const r of out.base.runs) expect(r).toMatchObject({ model: "acme:planner-1" });
  }, 120_000);

  it("reports tool-choice precision, recall and argument validity per task beside pass@k, from a JSON Schema on the arguments", async () => {
    const dir = workspace();
    const file = path.join(dir, "tasks.json");
    const args = ["eval", file, "--k", "3", "--model", path.join(dir, "model.mjs")];
    const out = JSON.parse((await keel([...args, "--json"])).stdout);
    const rows = out.base.summary.tasks as TaskRow[];
    const measured = rows.find((t) => t.id === "measured")!;
    expect(measured).toMatchObject({ accepted: 1, passAtK: true, passHatK: false });
    expect(measured.toolPrecision).toBeCloseTo(BY_HAND.toolPrecision!, 10);
    expect(measured.toolRecall).toBeCloseTo(BY_HAND.toolRecall!, 10);
    expect(measured.argumentValidity).toBeCloseTo(BY_HAND.argumentValidity!, 10);
    // A task that declares no expected calls has nothing measured.
    const plain = rows.find((t) => t.id === "plain")!;
    expect(plain.toolPrecision).toBeUndefined();
    expect(out.base.summary.tools.toolPrecision).toBeCloseTo(BY_HAND.toolPrecision!, 10);
    expect(out.base.runs.filter((r: { task: string }) => r.task === "measured")).toMatchObject([
      { tools: { made: 2, chosen: 1, expected: 1, matched: 1, valid: 1 } },
      { tools: { made: 1, chosen: 1, expected: 1, matched: 1, valid: 0 } },
      { tools: { made: 1, chosen: 0, expected: 1, matched: 0, valid: 0 } },
    ]);

    const table = (await keel(args)).stdout;
    expect(table).toMatch(/^task\s+accepted\s+pass@k.*tool precision\s+tool recall\s+args valid/m);
    expect(table).toMatch(/^measured\s+1\/3\s+yes\s+no\s.*\s50%\s+67%\s+50%$/m);
    expect(table).toMatch(/^plain\s.*\s-\s+-\s+-$/m);
  }, 120_000);

  it("a task set module may check a call's arguments with a predicate", async () => {
    const dir = workspace();
    const file = path.join(dir, "tasks.mjs");
    writeFileSync(
      file,
      `export default {
        budget: ${JSON.stringify(BUDGET)},
        tasks: [${JSON.stringify(task("measured"))}].map((t) => ({
          ...t,
          expectedCalls: [{ name: "write_file", arguments: (a) => a.path.endsWith("add.mjs") }],
        })),
      };`,
    );
    const { stdout } = await keel([
      "eval",
      file,
      "--k",
      "3",
      "--json",
      "--model",
      path.join(dir, "model.mjs"),
    ]);
    const [row] = JSON.parse(stdout).base.summary.tasks as TaskRow[];
    expect(row.argumentValidity).toBeCloseTo(BY_HAND.argumentValidity!, 10);
    expect(row.toolRecall).toBeCloseTo(BY_HAND.toolRecall!, 10);
  }, 120_000);

  it("--compare model:<module> runs the same tasks with another model and reports both, each with its name", async () => {
    const dir = workspace();
    // Model B fixes add.mjs in every run: its precision, recall and validity differ from A's.
    writeFileSync(path.join(dir, "b.mjs"), modelModule("other:fixer-2", [["fix"]]));
    const args = ["eval", path.join(dir, "tasks.json"), "--k", "3"].concat([
      "--model",
      path.join(dir, "model.mjs"),
      "--compare",
      `model:${path.join(dir, "b.mjs")}`,
    ]);
    const out = JSON.parse((await keel([...args, "--json"])).stdout);
    expect(out.compare).toMatchObject({ kind: "model", module: path.join(dir, "b.mjs") });
    expect(out.base.models).toEqual([{ name: "acme:planner-1", provider: "acme" }]);
    expect(out.compare.models).toEqual([{ name: "other:fixer-2", provider: "other" }]);
    const row = (side: { summary: { tasks: TaskRow[] } }) =>
      side.summary.tasks.find((t) => t.id === "measured")!;
    expect(row(out.base)).toMatchObject({ accepted: 1 });
    expect(row(out.compare)).toMatchObject({
      accepted: 3,
      passHatK: true,
      toolPrecision: 1,
      toolRecall: 1,
      argumentValidity: 1,
    });
    const table = (await keel(args)).stdout;
    expect(table).toMatch(/^task\s+accepted\s+accepted \(B\)\s+pass@k/m);
    expect(table).toContain("other:fixer-2");
  }, 120_000);

  it("--compare tools:<module> runs the same model with another tool set: the record names both sets by digest", async () => {
    const dir = workspace();
    // Tool set B: the built-in tools without write_file, so the model cannot fix add.mjs.
    writeFileSync(
      path.join(dir, "tools-b.mjs"),
      `import { builtinTools } from ${JSON.stringify(pathToFileURL(path.join(ROOT, "index.ts")).href)};
       export default ({ workspace }) => builtinTools({ root: workspace }).filter((t) => t.name !== "write_file");`,
    );
    const { stdout } = await keel(
      ["eval", path.join(dir, "tasks.json"), "--k", "3", "--json"].concat([
        "--model",
        path.join(dir, "model.mjs"),
        "--compare",
        `tools:${path.join(dir, "tools-b.mjs")}`,
      ]),
    );
    const out = JSON.parse(stdout);
    expect(out.compare.kind).toBe("tools");
    expect(out.compare.models).toEqual(out.base.models);
    expect(out.base.toolSets[0].names).toContain("write_file");
    expect(out.compare.toolSets[0].names).not.toContain("write_file");
    expect(out.compare.toolSets[0].digest).not.toBe(out.base.toolSets[0].digest);
    const row = (side: { summary: { tasks: TaskRow[] } }) =>
      side.summary.tasks.find((t) => t.id === "measured")!;
    expect(row(out.base).accepted).toBe(1);
    // Without write_file the model only lists the directory (runs 0 and 2): nothing expected is called.
    expect(row(out.compare)).toMatchObject({ accepted: 0, toolPrecision: 0, toolRecall: 0 });
    expect(row(out.compare).argumentValidity).toBeNull();
  }, 120_000);

  it("refuses a bad --compare and a bad expectedCalls with usage errors that say what to write", async () => {
    const dir = workspace();
    await expect(
      keel(["eval", path.join(dir, "tasks.json"), "--compare", "model:"]),
    ).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining('name the module after "model:"'),
    });
    await expect(
      keel(["eval", path.join(dir, "tasks.json"), "--compare", "retries"]),
    ).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining("--compare model:<module>"),
    });
    const bad = path.join(dir, "bad.json");
    writeFileSync(
      bad,
      JSON.stringify({
        budget: BUDGET,
        tasks: [task("t", { expectedCalls: [{ arguments: {} }] })],
      }),
    );
    await expect(keel(["eval", bad, "--model", path.join(dir, "model.mjs")])).rejects.toMatchObject(
      {
        code: 2,
        stderr: expect.stringContaining(
          "tasks[0].expectedCalls[0].name must be the name of a tool",
        ),
      },
    );
  }, 120_000);
});
