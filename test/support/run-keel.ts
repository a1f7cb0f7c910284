import { spawn } from "node:child_process";
import { join } from "node:path";

/** The `keel` command as the package ships it: run with `node`, no build step. */
export const KEEL_BIN = join(import.meta.dirname, "..", "..", "cli", "bin.js");

/** What a finished `keel` process left: its exit code and everything it wrote. */
export interface KeelRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface KeelRunOptions {
  cwd: string;
  /** Variables of this process's environment the run does not inherit (`env` may set them again). */
  unset?: readonly string[];
  /** Variables set for the run, over the inherited ones. */
  env?: Record<string, string>;
  /** Another user to run as; spawning as one needs root. */
  user?: { uid: number; gid: number };
  /**
   * A command the run is started under (`[command, ...args]`, then `node …`), e.g. `setpriv`
   * dropping root's capabilities.
   */
  wrapper?: readonly string[];
}

/**
 * Runs the real `keel` binary (node cli/bin.js …) as a child process with no TTY and no stdin.
 * Resolves once its output streams have closed, so `stdout` and `stderr` are whole.
 */
export function runKeel(args: string[], options: KeelRunOptions): Promise<KeelRun> {
  return runNode([KEEL_BIN, ...args], options);
}

/**
 * Runs `node <args>` as `runKeel` runs `keel`; `killAfterMs` kills it (SIGKILL) if it has not
 * exited by then (its run then ends with code null).
 */
export function runNode(
  args: string[],
  options: KeelRunOptions & { killAfterMs?: number },
): Promise<KeelRun> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of options.unset ?? []) delete env[name];
  Object.assign(env, options.env);
  return new Promise((resolve, reject) => {
    const [command, ...prefix] = [...(options.wrapper ?? []), process.execPath];
    const child = spawn(command, [...prefix, ...args], {
      cwd: options.cwd,
      env,
      stdio: ["ignore", "pipe", "pipe"],
      ...options.user,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const timer =
      options.killAfterMs === undefined
        ? undefined
        : setTimeout(() => child.kill("SIGKILL"), options.killAfterMs);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
