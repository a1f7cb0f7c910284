// Running one acceptance check, and the texts a round produces: what the model is told when a
// round fails, and a check's output within its byte budget (docs/acceptance.md).
import { realpathSync } from "node:fs";
import type { CheckEvidence } from "../contracts/acceptance.ts";
import { runCommandInGroup } from "../tools/builtin/shell.ts";
import { type AcceptanceCheck, type CommandCheck, realPathIn } from "./acceptance-spec.ts";

/** How long a command check may run when its spec sets no `timeoutMs`. */
export const DEFAULT_TIMEOUT_MS = 120_000;

/** Runs `check` (a function or a command in the workspace) against `artifactVersion`. */
export async function runCheck(
  check: AcceptanceCheck,
  artifactVersion: string,
  signal: AbortSignal,
  workspace: string,
): Promise<{ passed: boolean; output: string }> {
  if ("run" in check && typeof check.run === "function") {
    try {
      const r = await check.run({ signal, artifactVersion, workspace });
      if (typeof r?.passed !== "boolean")
        return {
          passed: false,
          output: `the check returned ${JSON.stringify(r)}, not { passed: boolean, output? }`,
        };
      return { passed: r.passed, output: String(r.output ?? "") };
    } catch (err) {
      return {
        passed: false,
        output: `the check threw: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
  }
  const c = check as CommandCheck;
  const cwd = realPathIn(realpathSync(workspace), c.cwd ?? ".");
  if (!cwd)
    return { passed: false, output: `cwd ${JSON.stringify(c.cwd)} is outside the workspace` };
  const timeoutMs = c.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const run = await runCommandInGroup(c.command, { cwd, timeoutMs, signal });
  if (run.error)
    return { passed: false, output: `could not start /bin/bash: ${run.error.message}` };
  if (run.stoppedBy === "timeout")
    return {
      passed: false,
      output: `timed out after ${timeoutMs} ms; its process group was killed\n${run.text}`,
    };
  return { passed: run.code === 0 && !run.stoppedBy, output: run.text };
}

/** What the model is told when a round of the loop fails. This is a pure function. */
export function followUpText(round: number, maxRounds: number, failing: CheckEvidence[]): string {
  const lines = [
    `Acceptance checks did not pass (follow-up ${round} of ${maxRounds}). These checks are run by the harness against the current files; fix the code so they pass. The checks and the files they name are frozen: changing them is refused.`,
  ];
  for (const c of failing) {
    lines.push(
      `\n## ${c.name}: ${c.passed ? "stale (the files changed while it ran)" : "failed"}\n${c.output}`,
    );
  }
  return lines.join("\n");
}

/** `text` within `maxBytes`: its head and tail around a note of how much was cut. */
export function bound(text: string, maxBytes: number): string {
  const buf = Buffer.from(text, "utf8");
  if (buf.length <= maxBytes) return text;
  const half = Math.floor((maxBytes - 64) / 2);
  const head = buf
    .subarray(0, half)
    .toString("utf8")
    .replace(/\uFFFD+$/, "");
  const tail = buf
    .subarray(buf.length - half)
    .toString("utf8")
    .replace(/^\uFFFD+/, "");
  return `${head}\n[… ${buf.length - 2 * half} bytes omitted …]\n${tail}`;
}
