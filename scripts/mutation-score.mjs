#!/usr/bin/env node
// Scores a Stryker run per module (`npm run mutate:score`, and scripts/mutate-ci.mjs in CI):
// killed ÷ valid, where killed counts Killed and Timeout, valid adds Survived and NoCoverage,
// and the equivalent mutants listed in test/mutation-equivalents.json (each with a reason) are
// left out. Writes test-output/mutation/summary.md; exits 1 when a module is below the
// threshold (default 85 %) or an equivalents entry matches no mutant of its file (a stale list:
// the code changed). An entry whose mutant was killed this run (a timeout under load, say) is
// only reported: the mutant is still there, and a flaky kill must not fail CI.
//
//   node scripts/mutation-score.mjs [report.json] [--min 85] [--only file,file]
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** A mutant's identity that survives line shifts: file, mutator, trimmed source line, replacement. */
export function mutantKey(file, mutator, lineText, replacement) {
  return JSON.stringify([file, mutator, lineText.trim(), replacement]);
}

/**
 * Per file: counts and score. `equivalents` are `{ file, mutator, line, replacement, reason }`.
 * Returns `{ rows, stale, killed }`: `stale` lists equivalents that match no mutant at all,
 * `killed` those whose mutant exists but did not survive this run.
 * This is a pure function of the report, the sources and the list.
 */
export function scoreReport(report, sources, equivalents) {
  const wanted = new Map(
    equivalents.map((e) => [mutantKey(e.file, e.mutator, e.line, e.replacement), e]),
  );
  const used = new Set();
  const present = new Set();
  const rows = [];
  for (const [file, data] of Object.entries(report.files)) {
    const lines = (sources[file] ?? data.source ?? "").split("\n");
    const c = { killed: 0, survived: 0, noCoverage: 0, equivalent: 0, invalid: 0 };
    const survivors = [];
    for (const m of data.mutants) {
      const text = lines[m.location.start.line - 1] ?? "";
      present.add(mutantKey(file, m.mutatorName, text, m.replacement ?? ""));
      if (m.status === "Killed" || m.status === "Timeout") c.killed++;
      else if (m.status === "Survived" || m.status === "NoCoverage") {
        const line = lines[m.location.start.line - 1] ?? "";
        const key = mutantKey(file, m.mutatorName, line, m.replacement ?? "");
        if (wanted.has(key)) {
          c.equivalent++;
          used.add(key);
        } else {
          if (m.status === "Survived") c.survived++;
          else c.noCoverage++;
          survivors.push({
            status: m.status,
            line: m.location.start.line,
            mutator: m.mutatorName,
            replacement: m.replacement,
            text: line.trim(),
          });
        }
      } else c.invalid++; // CompileError, RuntimeError, Ignored, Pending
    }
    const valid = c.killed + c.survived + c.noCoverage;
    rows.push({
      file,
      ...c,
      valid,
      score: valid === 0 ? 100 : (100 * c.killed) / valid,
      survivors,
    });
  }
  rows.sort((a, b) => a.file.localeCompare(b.file));
  const stale = [...wanted.entries()].filter(([k]) => !present.has(k)).map(([, e]) => e);
  const killed = [...wanted.entries()]
    .filter(([k]) => present.has(k) && !used.has(k))
    .map(([, e]) => e);
  return { rows, stale, killed };
}

function main() {
  const args = process.argv.slice(2);
  const flag = (name) => {
    const i = args.indexOf(name);
    return i < 0 ? undefined : args.splice(i, 2)[1];
  };
  const min = Number(flag("--min") ?? 85);
  const only = flag("--only")?.split(",").filter(Boolean);
  const reportPath = args[0] ?? join(root, "test-output/mutation/mutation.json");
  if (!existsSync(reportPath)) {
    console.error(`no Stryker report at ${reportPath}: run npm run mutate first`);
    process.exit(1);
  }
  const report = JSON.parse(readFileSync(reportPath, "utf8"));
  const sources = {};
  for (const file of Object.keys(report.files)) {
    const path = join(root, file);
    if (existsSync(path)) sources[file] = readFileSync(path, "utf8");
  }
  const list = JSON.parse(readFileSync(join(root, "test/mutation-equivalents.json"), "utf8"));
  const { rows, stale, killed } = scoreReport(report, sources, list.equivalents);
  const shown = only ? rows.filter((r) => only.includes(r.file)) : rows;
  // Equivalents of files this run did not mutate are not stale, only out of scope.
  const staleHere = stale.filter((e) => report.files[e.file]);
  const out = [
    `| module | killed | survived | no coverage | equivalent | score (killed ÷ valid) |`,
    `|---|---:|---:|---:|---:|---:|`,
    ...shown.map(
      (r) =>
        `| \`${r.file}\` | ${r.killed} | ${r.survived} | ${r.noCoverage} | ${r.equivalent} | ${r.score.toFixed(1)} % |`,
    ),
  ];
  const below = shown.filter((r) => r.score < min);
  for (const r of below) {
    out.push("", `${r.file}: ${r.score.toFixed(1)} % < ${min} %; survivors:`);
    for (const s of r.survivors)
      out.push(
        `  ${r.file}:${s.line} ${s.mutator} → ${JSON.stringify(s.replacement)}  (${s.text})`,
      );
  }
  for (const e of staleHere)
    out.push("", `stale equivalent (matches no mutant: the code changed): ${JSON.stringify(e)}`);
  for (const e of killed.filter((k) => report.files[k.file]))
    out.push(
      "",
      `listed as equivalent but killed this run (check it, or a timeout under load): ${JSON.stringify(e)}`,
    );
  const text = out.join("\n");
  mkdirSync(join(root, "test-output/mutation"), { recursive: true });
  writeFileSync(join(root, "test-output/mutation/summary.md"), `${text}\n`);
  console.log(text);
  if (below.length > 0 || staleHere.length > 0) {
    console.log(
      `\nmutation score below ${min} % in ${below.length} module(s), ${staleHere.length} stale equivalent(s): add a test that states the behaviour, or list the mutant in test/mutation-equivalents.json with the reason it cannot change behaviour`,
    );
    process.exit(1);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();
