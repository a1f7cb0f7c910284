import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import path from "node:path";

/**
 * How `shell` commands are confined (`builtinTools({ sandbox })`, docs/tools.md "The shell's
 * sandbox"). On Linux with bubblewrap (`bwrap`) installed, every command runs in a sandbox: the
 * workspace writable, the rest of the file system read-only, a private `/tmp`, its own process
 * and network namespaces (no network), Keel's own files (`.keel/`, protected paths) read-only.
 */
export interface SandboxOptions {
  /** Let commands reach the network (the host's network namespace). Default false. */
  network?: boolean;
  /**
   * More paths commands may write, absolute or relative to the workspace (e.g. a package
   * cache such as `~/.npm`); each must exist. Default none.
   */
  writable?: readonly string[];
  /**
   * Fail every `shell` call (a clear `EXECUTION_FAILED`) when bubblewrap cannot be used, instead
   * of running the command unconfined. Default false.
   */
  required?: boolean;
}

/** `builtinTools({ sandbox })`: `false` runs commands unconfined; an object confines them. */
export type ShellSandbox = false | SandboxOptions;

/** Whether bubblewrap can be used here, and why not. */
export type SandboxSupport = { ok: true; bwrap: string } | { ok: false; reason: string };

let probed: SandboxSupport | undefined;

/**
 * Whether `shell` commands can be sandboxed on this machine: Linux, `bwrap` at `KEEL_BWRAP` if
 * that variable is set, else on `PATH` (or at `/usr/bin/bwrap`), and a trial run of it that
 * works (user namespaces may be disabled). Probed once per process and remembered. Never throws.
 */
export function sandboxSupport(): SandboxSupport {
  probed ??= probe();
  return probed;
}

function probe(): SandboxSupport {
  if (process.platform !== "linux")
    return { ok: false, reason: `bubblewrap is Linux only (this is ${process.platform})` };
  const named = process.env.KEEL_BWRAP;
  const bwrap = named ? (existsSync(named) ? named : undefined) : findOnPath("bwrap");
  if (!bwrap)
    return {
      ok: false,
      reason: named
        ? `bubblewrap is not at ${named} (KEEL_BWRAP)`
        : "bubblewrap (bwrap) is not installed",
    };
  const trial = spawnSync(bwrap, [...baseArgs(), "--", "/bin/true"], {
    stdio: ["ignore", "ignore", "pipe"],
    timeout: 10_000,
  });
  if (trial.status === 0) return { ok: true, bwrap };
  const why = trial.error?.message ?? (trial.stderr?.toString().trim() || `exit ${trial.status}`);
  return { ok: false, reason: `bubblewrap (${bwrap}) does not work here: ${why}` };
}

function findOnPath(name: string): string | undefined {
  const dirs = (process.env.PATH ?? "").split(path.delimiter).filter(Boolean);
  for (const dir of [...dirs, "/usr/bin"]) {
    const candidate = path.join(dir, name);
    try {
      if (statSync(candidate).isFile()) return candidate;
    } catch {}
  }
  return undefined;
}

/**
 * The namespaces and mounts every sandbox starts from. `--unshare-user-try` gives an
 * unprivileged user the namespaces it needs and is skipped where it is not needed (root).
 */
function baseArgs(): string[] {
  return [
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
    "--unshare-user-try",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--die-with-parent",
    "--new-session",
  ];
}

/** What one sandboxed command may touch. */
export interface SandboxPlan {
  /** The workspace's real root: writable. */
  root: string;
  /** The command's working directory (inside the root). */
  cwd: string;
  /** Real paths that stay read-only inside the writable root (`.keel/`, protected paths). */
  readOnly: readonly string[];
  options: SandboxOptions;
}

/**
 * The `bwrap` argument list that runs `argv` under `plan`. Binds are applied in order, so the
 * workspace (even one under `/tmp`) is bound after the private `/tmp`, and Keel's own paths
 * after the workspace. Paths that do not exist are skipped (bwrap cannot bind them). Pure but
 * for `existsSync`.
 */
export function bwrapArgs(plan: SandboxPlan, argv: readonly string[]): string[] {
  const args = baseArgs();
  if (!plan.options.network) args.push("--unshare-net");
  args.push("--bind", plan.root, plan.root);
  for (const p of plan.options.writable ?? []) {
    const abs = path.resolve(plan.root, p);
    args.push("--bind", abs, abs);
  }
  for (const p of plan.readOnly) if (existsSync(p)) args.push("--ro-bind", p, p);
  args.push("--chdir", plan.cwd, "--", ...argv);
  return args;
}

/**
 * Checks `options` when the tools are built: each `writable` path must exist (bwrap cannot
 * bind a missing one). Throws an error naming the option otherwise.
 */
export function checkSandboxOptions(root: string, options: ShellSandbox): void {
  if (options === false) return;
  for (const p of options.writable ?? []) {
    if (!existsSync(path.resolve(root, p)))
      throw new Error(
        `builtinTools: sandbox.writable path ${JSON.stringify(p)} does not exist; create it or leave it out`,
      );
  }
}
