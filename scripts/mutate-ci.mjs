#!/usr/bin/env node
// CI's mutation job (.ci/run): Stryker over the pure modules this change touched, then
// scripts/mutation-score.mjs, which fails below 85 % (killed ÷ valid, listed equivalents left
// out). "Touched": the diff against the merge base with main, or against the last commit when
// on main. KEEL_MUTATE_ALL=1 mutates the whole set; KEEL_MUTATE_BUDGET_S (default 480) bounds
// the run so CI stays under its time: a run cut by the budget says so and does not fail.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const git = (...args) =>
  execFileSync("git", args, {
    cwd: root,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  }).trim();

/** The glob forms of stryker.config.mjs's MUTATED as regular expressions. */
export function moduleMatcher(globs) {
  const res = globs.map(
    (g) => new RegExp(`^${g.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")}$`),
  );
  return (file) => res.some((re) => re.test(file));
}

function changedFiles() {
  let branch = "";
  try {
    branch = git("rev-parse", "--abbrev-ref", "HEAD");
  } catch {
    return { base: "(no git)", files: null };
  }
  const tryGit = (...args) => {
    try {
      return git(...args);
    } catch {
      return undefined;
    }
  };
  let base;
  if (branch !== "main")
    base = tryGit("merge-base", "HEAD", "main") ?? tryGit("merge-base", "HEAD", "origin/main");
  base ??= tryGit("rev-parse", "HEAD~1");
  if (!base) return { base: "(none)", files: null };
  const files = git("diff", "--name-only", base, "--").split("\n").filter(Boolean);
  // Work not committed yet counts too (a local run before committing).
  const dirty = (tryGit("diff", "--name-only", "HEAD") ?? "").split("\n").filter(Boolean);
  return { base, files: [...new Set([...files, ...dirty])] };
}

async function main() {
  const { MUTATED } = await import(join(root, "stryker.config.mjs"));
  const isModule = moduleMatcher(MUTATED);
  const { base, files } = changedFiles();
  let modules;
  if (process.env.KEEL_MUTATE_ALL === "1" || files === null) {
    modules = MUTATED;
    console.log(
      `mutation: the whole set (${files === null ? `no diff base ${base}` : "KEEL_MUTATE_ALL=1"})`,
    );
  } else {
    modules = files.filter((f) => isModule(f) && existsSync(join(root, f)));
    console.log(`mutation: ${modules.length} pure module(s) touched since ${base.slice(0, 12)}`);
  }
  if (modules.length === 0) {
    console.log("mutation: nothing to mutate");
    return 0;
  }
  for (const m of modules) console.log(`  ${m}`);
  const report = join(root, "test-output/mutation/mutation.json");
  rmSync(report, { force: true }); // a crash must not read an earlier run's report
  const budget = Number(process.env.KEEL_MUTATE_BUDGET_S ?? 480);
  const started = Date.now();
  const run = spawnSync(
    "timeout",
    [
      "--signal=TERM",
      "--kill-after=15",
      String(budget),
      join(root, "node_modules/.bin/stryker"),
      "run",
    ],
    {
      cwd: root,
      stdio: "inherit",
      env: {
        ...process.env,
        KEEL_MUTATE: modules.join(","),
        KEEL_MUTATE_INCREMENTAL: "0",
        KEEL_MUTATE_CONCURRENCY: process.env.KEEL_MUTATE_CONCURRENCY ?? "2",
      },
    },
  );
  const seconds = Math.round((Date.now() - started) / 1000);
  if (run.status === 124 || run.status === 137) {
    console.log(
      `mutation: cut by the ${budget} s budget after ${seconds} s (not a failure); run npm run mutate locally for these modules`,
    );
    return 0;
  }
  if (run.status !== 0 || !existsSync(report)) {
    console.log(`mutation: Stryker failed (exit ${run.status}) after ${seconds} s`);
    return 1;
  }
  console.log(`mutation: Stryker took ${seconds} s`);
  const files2 = modules.filter((m) => !m.includes("*"));
  const score = spawnSync(
    process.execPath,
    [
      join(root, "scripts/mutation-score.mjs"),
      report,
      ...(files2.length === modules.length ? ["--only", files2.join(",")] : []),
    ],
    { cwd: root, stdio: "inherit" },
  );
  return score.status ?? 1;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1])
  process.exit(await main());
