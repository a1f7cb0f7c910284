import { spawn } from "node:child_process";
import { join } from "node:path";
import { parseChildOutput } from "./protocol.ts";
import { benchDir, repoDir } from "./workload.ts";

/** Set (to a directory) by `npm run bench -- --profile`: children write V8 CPU profiles there. */
export const PROFILE_ENV = "KEEL_BENCH_CPU_PROF_DIR";

function profileArgs(): string[] {
  const dir = process.env[PROFILE_ENV];
  return dir ? ["--cpu-prof", `--cpu-prof-dir=${dir}`] : [];
}

/** What a child run came to: its JSON answer, or why there is none. */
export type ChildOutcome<T> =
  | { ok: true; value: T; ms: number }
  | { ok: false; error: string; ms: number };

/**
 * Runs `bench/<script>` in a fresh `node --expose-gc --import tsx` process (so one runtime's
 * process-wide switches, e.g. AsyncLocalStorage, cannot slow another), passing `options` as one
 * JSON argument. Stderr is relayed line by line with `tag`; the child is killed (SIGKILL, by its
 * own pid) after `timeoutMs`.
 */
export function runChild<T>(
  script: string,
  options: unknown,
  tag: string,
  timeoutMs: number,
): Promise<ChildOutcome<T>> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        ...profileArgs(),
        "--expose-gc",
        "--import",
        "tsx",
        join(benchDir, script),
        JSON.stringify(options),
      ],
      { cwd: repoDir, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, KEEL_LOG: "" } },
    );
    let stdout = "";
    let stderrTail = "";
    let pending = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderrTail = (stderrTail + d).slice(-4000);
      pending += d;
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const line of lines) process.stderr.write(`  ${tag} ${line}\n`);
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const ms = performance.now() - started;
      if (timedOut) {
        resolve({
          ok: false,
          error: `killed after the ${(timeoutMs / 1000).toFixed(1)} s time limit`,
          ms,
        });
        return;
      }
      const parsed = parseChildOutput<T>(stdout);
      if (parsed.ok) {
        resolve({ ok: true, value: parsed.value, ms });
        return;
      }
      const how = signal === null ? `exit code ${code}` : `signal ${signal}`;
      resolve({
        ok: false,
        error: `no result (${how}); stderr: ${stderrTail.trim().slice(-1500)}`,
        ms,
      });
    });
  });
}
