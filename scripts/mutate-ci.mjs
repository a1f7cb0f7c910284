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

/**
 * Runs Stryker with `env` under the time left of `budget` (seconds since `started`) and scores
 * its report (`report`, `files`) with `minimum`. Returns `{ status, cut }`: status 0 when the
 * run was cut by the budget (said, not a failure) or every module scored at least `minimum`.
 */
function strykerRun({ label, env, report, files, minimum, deadline }) {
  const left = Math.floor((deadline - Date.now()) / 1000);
  if (left < 30) {
    console.log(`mutation: ${label}: no time left in the budget; run it locally`);
    return { status: 0, cut: true };
  }
  rmSync(report, { force: true }); // a crash must not read an earlier run's report
  const started = Date.now();
  const run = spawnSync(
    "timeout",
    [
      "--signal=TERM",
      "--kill-after=15",
      String(left),
      join(root, "node_modules/.bin/stryker"),
      "run",
    ],
    {
      cwd: root,
      stdio: "inherit",
      env: {
        ...process.env,
        ...env,
        KEEL_MUTATE_INCREMENTAL: "0",
        KEEL_MUTATE_CONCURRENCY: process.env.KEEL_MUTATE_CONCURRENCY ?? "2",
      },
    },
  );
  const seconds = Math.round((Date.now() - started) / 1000);
  if (run.status === 124 || run.status === 137) {
    console.log(
      `mutation: ${label}: cut by the budget after ${seconds} s (not a failure); run npm run mutate locally for it`,
    );
    return { status: 0, cut: true };
  }
  if (run.status !== 0 || !existsSync(report)) {
    console.log(`mutation: ${label}: Stryker failed (exit ${run.status}) after ${seconds} s`);
    return { status: 1, cut: false };
  }
  console.log(`mutation: ${label}: Stryker took ${seconds} s`);
  const score = spawnSync(
    process.execPath,
    [
      join(root, "scripts/mutation-score.mjs"),
      report,
      "--min",
      String(minimum),
      ...(files.length > 0 ? ["--only", files.join(",")] : []),
    ],
    { cwd: root, stdio: "inherit" },
  );
  return { status: score.status ?? 1, cut: false };
}

/** The report file of a host module's run (stryker.config.mjs names it the same way). */
export const hostReport = (host) =>
  join(root, `test-output/mutation/host-${host.replace(/[/.]/g, "_")}.json`);

/** A host's floor; a host without one is a configuration error, not a run that cannot fail. */
function floorOf(minimum, host) {
  const floor = minimum[host];
  if (!(typeof floor === "number" && floor > 0 && floor <= 100)) {
    throw new Error(`stryker.config.mjs: HOST_MINIMUM has no floor for ${host}; add one`);
  }
  return floor;
}

async function main() {
  const { MUTATED, HOSTS, HOST_MINIMUM } = await import(join(root, "stryker.config.mjs"));
  const isModule = moduleMatcher(MUTATED);
  const { base, files } = changedFiles();
  const all = process.env.KEEL_MUTATE_ALL === "1" || files === null;
  let modules;
  let hosts;
  if (all) {
    modules = MUTATED;
    hosts = Object.keys(HOSTS);
    console.log(
      `mutation: the whole set (${files === null ? `no diff base ${base}` : "KEEL_MUTATE_ALL=1"})`,
    );
  } else {
    modules = files.filter((f) => isModule(f) && existsSync(join(root, f)));
    hosts = files.filter((f) => f in HOSTS && existsSync(join(root, f)));
    console.log(
      `mutation: ${modules.length} pure module(s) and ${hosts.length} host module(s) touched since ${base.slice(0, 12)}`,
    );
  }
  if (modules.length === 0 && hosts.length === 0) {
    console.log("mutation: nothing to mutate");
    return 0;
  }
  const budget = Number(process.env.KEEL_MUTATE_BUDGET_S ?? 480);
  const deadline = Date.now() + budget * 1000;
  let status = 0;
  if (modules.length > 0) {
    for (const m of modules) console.log(`  ${m}`);
    const plain = modules.filter((m) => !m.includes("*"));
    const r = strykerRun({
      label: "pure modules",
      env: { KEEL_MUTATE: modules.join(",") },
      report: join(root, "test-output/mutation/mutation.json"),
      files: plain.length === modules.length ? plain : [],
      minimum: 85,
      deadline,
    });
    status ||= r.status;
  }
  // Host modules one at a time, each against the in-process tests that cover it, in the
  // budget that is left; each must keep at least its floor (HOST_MINIMUM in stryker.config.mjs).
  for (const host of hosts) {
    const r = strykerRun({
      label: host,
      env: { KEEL_MUTATE_HOST: host },
      report: hostReport(host),
      files: [host],
      minimum: floorOf(HOST_MINIMUM, host),
      deadline,
    });
    status ||= r.status;
  }
  return status;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1])
  process.exit(await main());
