import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { ADD_TEST, BUGGY_ADD, FIXED_ADD } from "./support/acceptance-fixture.ts";

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, "..");

/** Each task's chance that a run fixes it (the scripted model's seeded success). */
const P: Record<string, number> = { easy: 0.8, hard: 0.3, flaky: 0.5 };
const TASKS = Object.keys(P);

/** mulberry32, written here again: the oracle does not share code with the model module. */
function uniform(seed: number): number {
  let a = seed | 0;
  a = (a + 0x6d2b79f5) | 0;
  let t = Math.imul(a ^ (a >>> 15), 1 | a);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const fixes = (task: string, runNo: number, seed: number) =>
  uniform(seed * 7919 + TASKS.indexOf(task) * 131 + runNo) < P[task];

/** The model module `keel eval --model` loads: fixes `add` in a run iff its seeded draw says so. */
const MODEL_MODULE = `
const P = ${JSON.stringify(P)};
const TASKS = Object.keys(P);
function mulberry32(a) {
  a |= 0; a = (a + 0x6d2b79f5) | 0;
  let t = Math.imul(a ^ (a >>> 15), 1 | a);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
export default ({ task, run, seed }) => {
  const fix = mulberry32(seed * 7919 + TASKS.indexOf(task) * 131 + run) < P[task];
  let requests = 0;
  return {
    name: "seeded",
    async *stream() {
      requests++;
      if (!fix && task === "flaky") {
        const err = new Error("upstream overloaded");
        err.status = 503;
        throw err;
      }
      yield { type: "usage", usage: { inputTokens: 100, outputTokens: 10 } };
      if (fix && requests === 1) {
        const args = JSON.stringify({ path: "add.mjs", content: ${JSON.stringify(FIXED_ADD)} });
        yield { type: "call.start", index: 0, id: "fix", name: "write_file" };
        yield { type: "call.delta", index: 0, argumentsDelta: args };
        yield { type: "call.end", index: 0 };
        yield { type: "finish", reason: "tool_calls" };
        return;
      }
      yield { type: "text.delta", text: "All tests pass." };
      yield { type: "finish", reason: "stop" };
    },
  };
};
`;

function taskSet(dir: string): string {
  const file = path.join(dir, "tasks.json");
  const task = (id: string) => ({
    id,
    prompt: "Fix add() so that node add.test.mjs passes.",
    files: { "add.mjs": BUGGY_ADD, "add.test.mjs": ADD_TEST },
    checks: [{ name: "tests", command: "node add.test.mjs", files: ["add.test.mjs"] }],
    ...(id === "hard" ? { acceptance: { until: "passed", maxRounds: 1 } } : {}),
  });
  writeFileSync(
    file,
    JSON.stringify({
      budget: { maxSteps: 6, maxSpendTokens: 100_000, timeMs: 60_000 },
      retry: { maxRetries: 2, baseDelayMs: 5, maxDelayMs: 10 },
      tasks: TASKS.map(task),
    }),
  );
  writeFileSync(path.join(dir, "model.mjs"), MODEL_MODULE);
  return file;
}

const keel = (args: string[]) =>
  run(process.execPath, ["--import", "tsx", "cli/main.ts", ...args], {
    cwd: ROOT,
    maxBuffer: 16 * 1024 * 1024,
  });

describe("keel eval", () => {
  it("draws a progress bar on a terminal: one tick per run, full at the end, then cleared", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "keel-eval-tty-"));
    const file = taskSet(dir);
    const cmd = [process.execPath, "--import", "tsx", "cli/main.ts", "eval", file, "--k", "2"]
      .concat(["--seed", "42", "--json", "--model", path.join(dir, "model.mjs")])
      .map((a) => `'${a}'`)
      .join(" ");
    // `script` gives the command a pseudo-terminal (stdout and stderr both go to it).
    const { stdout } = await run("script", ["-qfec", cmd, "/dev/null"], {
      cwd: ROOT,
      maxBuffer: 16 * 1024 * 1024,
    });
    const frames = stdout.split("\r").map((f) => f.trim());
    const ticks = frames.filter((f) => /^\[[#-]{24}\] \d+\/6\b/.test(f));
    expect(ticks.map((f) => f.match(/(\d+)\/6/)![1])).toEqual(["0", "1", "2", "3", "4", "5", "6"]);
    expect(ticks.at(-1)).toMatch(/^\[#{24}\] 6\/6/);
    expect(stdout).toContain(`\r${" ".repeat(72)}\r`); // the bar is cleared before the report
  });

  it("pass@k and pass^k of a seeded scripted model match the values computed by hand from the seed", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "keel-eval-test-"));
    const file = taskSet(dir);
    const k = 5;
    const seed = 42;
    const { stdout, stderr } = await keel([
      "eval",
      file,
      "--k",
      String(k),
      "--seed",
      String(seed),
      "--json",
      "--model",
      path.join(dir, "model.mjs"),
    ]);
    expect(stderr).toBe(""); // no progress bar without a terminal
    const out = JSON.parse(stdout);

    const wins = TASKS.map((t) => Array.from({ length: k }, (_, r) => fixes(t, r, seed)));
    const passAtK = wins.filter((w) => w.some(Boolean)).length / TASKS.length;
    const passHatK = wins.filter((w) => w.every(Boolean)).length / TASKS.length;
    // The seed is chosen so that the two metrics differ (a swap would be caught).
    expect(passAtK).not.toBe(passHatK);
    expect(out.base.summary.passAtK).toBeCloseTo(passAtK, 10);
    expect(out.base.summary.passHatK).toBeCloseTo(passHatK, 10);
    for (const [i, t] of TASKS.entries()) {
      const row = out.base.summary.tasks.find((x: { id: string }) => x.id === t);
      expect(row.accepted, t).toBe(wins[i].filter(Boolean).length);
    }
    // Runs that did not fix: easy and hard end completed but not accepted; flaky's fail after retries.
    const misses = (t: string) => wins[TASKS.indexOf(t)].filter((w) => !w).length;
    expect(out.base.summary.completedNotAccepted).toBe(misses("easy") + misses("hard"));
    expect(out.base.summary.recoveryFailures).toBe(misses("flaky"));
    for (const r of out.base.runs) {
      if (r.task === "flaky" && r.acceptance !== "passed") expect(r.status).toBe("failed");
      if (r.task !== "flaky" && r.acceptance !== "passed") expect(r.status).toBe("completed");
    }
    expect(out.base.summary.meanTokens).toBeGreaterThan(0);
  }, 120_000);

  it("--compare runs the set again with a mechanism off and prints both side by side", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "keel-eval-test-"));
    const file = taskSet(dir);
    const args = [
      "eval",
      file,
      "--k",
      "2",
      "--seed",
      "7",
      "--model",
      path.join(dir, "model.mjs"),
      "--compare",
      "acceptance-loop",
    ];
    const json = JSON.parse((await keel([...args, "--json"])).stdout);
    expect(json.compare.mechanism).toBe("acceptance-loop");
    const hard = (s: { tasks: { id: string; meanSteps: number }[] }) =>
      s.tasks.find((t) => t.id === "hard")!.meanSteps;
    const hardRuns = json.base.runs.filter((r: { task: string }) => r.task === "hard");
    const looped = hardRuns.filter((r: { rounds: number }) => r.rounds > 0).length;
    // Every unfixed run of "hard" pays one follow-up round with the loop on, none without it.
    expect(looped).toBe([0, 1].filter((r) => !fixes("hard", r, 7)).length);
    expect(hard(json.base.summary) - hard(json.compare.summary)).toBeCloseTo(looped / 2, 10);
    const table = (await keel(args)).stdout;
    expect(table).toMatch(/^task\s+accepted\s+accepted \(off\)\s+pass@k/m);
    expect(table).toMatch(/^all\s/m);

    await expect(
      keel(["eval", file, "--compare", "retries", "--model", path.join(dir, "model.mjs")]),
    ).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining(
        "unknown mechanism; choose one of compaction, acceptance-loop, loop-guard",
      ),
    });
  }, 120_000);

  it("every run gets the task set's fixed budget: a model that never stops is cut at maxSteps, one that spends at maxSpendTokens, one that never answers at timeMs", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "keel-eval-test-"));
    const budget = { maxSteps: 3, maxSpendTokens: 150, timeMs: 400 };
    writeFileSync(
      path.join(dir, "model.mjs"),
      `export default ({ task }) => ({
        name: "budget-" + task,
        async *stream(request) {
          if (task === "time") {
            await new Promise((resolve) => request.signal.addEventListener("abort", resolve));
            const err = new Error("aborted");
            err.name = "AbortError";
            throw err;
          }
          if (task === "tokens") yield { type: "usage", usage: { inputTokens: 100, outputTokens: 10 } };
          if (task === "steps") yield { type: "usage", usage: { inputTokens: 1, outputTokens: 1 } };
          yield { type: "call.start", index: 0, id: "c" + Math.random(), name: "list_dir" };
          yield { type: "call.delta", index: 0, argumentsDelta: '{"path":"."}' };
          yield { type: "call.end", index: 0 };
          yield { type: "finish", reason: "tool_calls" };
        },
      });`,
    );
    const file = path.join(dir, "tasks.json");
    const task = (id: string) => ({
      id,
      prompt: "keep going",
      files: { "a.txt": "a" },
      checks: [{ name: "exists", command: "test -f a.txt" }],
    });
    writeFileSync(file, JSON.stringify({ budget, tasks: ["steps", "tokens", "time"].map(task) }));
    const { stdout } = await keel([
      "eval",
      file,
      "--k",
      "1",
      "--json",
      "--model",
      path.join(dir, "model.mjs"),
    ]);
    const runs = JSON.parse(stdout).base.runs as {
      task: string;
      status: string;
      steps: number;
      tokens: number;
      ms: number;
    }[];
    const byTask = Object.fromEntries(runs.map((r) => [r.task, r]));
    // 2 tokens a request (a model that reported none would be charged Keel's estimate, which
    // the token cap would stop first): only the step budget ends it, after maxSteps requests.
    expect(byTask.steps).toMatchObject({ status: "budget_exhausted", steps: 3, tokens: 6 });
    // 110 tokens a request: under 150 after one, over it after two.
    expect(byTask.tokens).toMatchObject({ status: "budget_exhausted", steps: 2, tokens: 220 });
    // No answer at all: the time budget interrupts the run.
    expect(byTask.time.status).toBe("cancelled");
    expect(byTask.time.ms).toBeGreaterThanOrEqual(budget.timeMs);
    expect(byTask.time.ms).toBeLessThan(budget.timeMs + 5_000); // interrupted when it was due
  }, 120_000);
});
