import { type ChildProcessByStdio, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import type { Readable } from "node:stream";
import { z } from "zod";
import { defineTool, type Tool } from "../define-tool.ts";
import { BUILTIN_MAX_BYTES, statOrUndefined } from "./common.ts";
import { OutputCapture } from "./output-capture.ts";
import {
  descendants,
  type ProcessRef,
  refsAlive,
  running,
  SHELL_TAG_VAR,
  signalAll,
  signalRefs,
  startTime,
  taggedProcesses,
} from "./process-tree.ts";

import {
  bwrapArgs,
  type SandboxOptions,
  type SandboxPlan,
  type ShellSandbox,
  sandboxSupport,
} from "./sandbox.ts";
import { namesKeelOwn, replacedSince, storeIdentity } from "./store-guard.ts";
import { isKeelOwn, KEEL_DIR, resolveInWorkspace, toolError, type Workspace } from "./workspace.ts";

const DEFAULT_TIMEOUT_MS = 120_000;
/** How often the processes below a running command are recorded (see `runCommandInGroup`). */
const TRACK_EVERY_MS = 100;

/**
 * Run first by every command's shell: on exit it writes the pids of its background jobs to fd 3,
 * so jobs that left the group and cleared their environment (`env -i setsid cmd &`) are known
 * before the shell is gone and they are re-parented.
 */
const REPORT_JOBS = "trap 'jobs -p >&3 2>/dev/null' EXIT\n";
/** How long a process group gets between SIGTERM and SIGKILL. */
export const KILL_GRACE_MS = 2_000;

const parameters = z.object({
  command: z.string().min(1).describe("A bash command line, run with /bin/bash -c."),
  cwd: z
    .string()
    .optional()
    .describe('Working directory relative to the workspace root (default ".").'),
  timeout_ms: z
    .number()
    .int()
    .min(1)
    .max(600_000)
    .optional()
    .describe(`Kill the command after this many milliseconds (default ${DEFAULT_TIMEOUT_MS}).`),
});

/**
 * `shell`: runs a command in its own session and process group (`detached: true`). Abort,
 * timeout and the command's own exit all end with every process the call started being
 * signalled, SIGTERM then SIGKILL after `KILL_GRACE_MS`: the group (`process.kill(-pid)`) and,
 * on Linux, the processes that left it (`setsid cmd &`, `setsid -f`), found by their session
 * or by the tag in their environment (see `taggedProcesses`). Background children do not
 * outlive the call. A command that has exited keeps its real result: a cancel that arrives
 * while its leftovers are being killed does not turn it into `CANCELLED`.
 */
export function shellTool(
  ws: Workspace,
  sandbox: ShellSandbox = {},
): Tool<z.output<typeof parameters>> {
  const confined = sandbox !== false && sandboxSupport().ok;
  return defineTool({
    name: "shell",
    description: [
      "Run a bash command in the workspace (cwd: the workspace root unless cwd is given, relative to it). Use it to build, run tests, use git, or run programs.",
      "Prefer read_file, write_file, edit_file, list_dir, glob and grep for files: they are safer and page their output. Do not start interactive programs or servers that never exit; background processes are killed when the command ends.",
      `Returns "exit code: N" (a non-zero code is a normal result, not a failure), then stdout and stderr. Output over ${BUILTIN_MAX_BYTES / 1024} KiB keeps its beginning and end with the omitted byte count; to see more, re-run with a narrower command (grep, head, tail, sed -n).`,
      `Fails with TIMEOUT after timeout_ms (default ${DEFAULT_TIMEOUT_MS / 1000} s); cancelling kills the whole process group.`,
      `${KEEL_DIR}/ holds Keel's session store: a command that names it is refused, and one that removes or replaces it fails saying so.`,
      ...(confined ? [sandboxNote(sandbox as SandboxOptions)] : []),
    ].join(" "),
    parameters,
    examples: [{ args: { command: "npm test -- --reporter=dot", timeout_ms: 300000 } }],
    traits: {
      readOnly: false,
      concurrencySafe: false,
      idempotent: false,
      cancellable: true,
      risk: "high",
      outputBudget: { maxBytes: BUILTIN_MAX_BYTES + 1024, overflow: "truncate" },
    },
    async execute({ command, cwd = ".", timeout_ms = DEFAULT_TIMEOUT_MS }, ctx) {
      const resolved = await resolveInWorkspace(ws, cwd);
      if (!resolved.ok) return resolved.error;
      if (!(await statOrUndefined(resolved.real))?.isDirectory())
        return toolError(
          "NOT_FOUND",
          `cwd ${JSON.stringify(resolved.rel)} is not an existing directory of the workspace.`,
        );
      if (isKeelOwn(ws, resolved.real))
        return toolError(
          "PATH_OUTSIDE_WORKSPACE",
          `cwd ${JSON.stringify(resolved.rel)} is where Keel keeps its session store: commands do not run there. Where: the "cwd" argument. How to fix: run the command from a folder outside ${KEEL_DIR}/.`,
        );
      const named = namesKeelOwn(ws, command);
      if (named) return named;
      ctx?.signal?.throwIfAborted();
      const jail = sandboxFor(ws, sandbox, resolved.real);
      if (jail && "error" in jail) return jail.error;
      // Unconfined, what the command did to the store's files is found out afterwards.
      const before = storeIdentity(ws);
      let gone: string[] = [];
      let result: Awaited<ReturnType<typeof runInGroup>>;
      try {
        result = await runInGroup(command, {
          cwd: resolved.real,
          timeoutMs: timeout_ms,
          signal: ctx?.signal,
          onUpdate: ctx?.onUpdate,
          sandbox: jail,
        });
      } finally {
        gone = replacedSince(ws, before);
        if (gone.length > 0)
          ctx?.log.error({ paths: gone }, "a shell command removed or replaced the session store");
      }
      if (gone.length === 0) return result;
      const own =
        typeof result === "string"
          ? result
          : result.ok
            ? result.content
            : `${result.code}: ${result.message}`;
      return toolError(
        "PATH_OUTSIDE_WORKSPACE",
        `The command removed or replaced ${gone.join(", ")}, where Keel keeps its session store. Keel cannot put it back: sessions stored there may be lost. Never remove, move or overwrite ${KEEL_DIR}/ or the store's files (git clean -x, rm -rf .* and the like reach them too). The command's own result:\n${own}`,
      );
    },
  });
}

/** The sentence of the tool's description that tells the model what the sandbox allows. */
function sandboxNote(options: SandboxOptions): string {
  return `Commands run in a sandbox: only the workspace${options.writable?.length ? " (and the paths the user allowed)" : ""} can be written, /tmp is private to the call${options.network ? "" : ", and there is no network"}.`;
}

/**
 * The sandbox one call runs in: undefined to run unconfined (`sandbox: false`, or bubblewrap
 * unusable and not `required`), or the refusal when it is required and unusable.
 */
function sandboxFor(
  ws: Workspace,
  sandbox: ShellSandbox,
  cwd: string,
): Sandboxed | { error: ReturnType<typeof toolError> } | undefined {
  if (sandbox === false) return undefined;
  const support = sandboxSupport();
  if (!support.ok) {
    if (!sandbox.required) return undefined;
    return {
      error: toolError(
        "EXECUTION_FAILED",
        `shell commands must run in a sandbox here and ${support.reason}. Tell the user: install bubblewrap (Debian: apt-get install bubblewrap).`,
      ),
    };
  }
  const readOnly = [path.join(ws.realRoot, KEEL_DIR), ...ws.protected];
  return { bwrap: support.bwrap, plan: { root: ws.realRoot, cwd, readOnly, options: sandbox } };
}

/** A command run under bubblewrap: the binary and what the command may touch. */
export interface Sandboxed {
  bwrap: string;
  plan: SandboxPlan;
}

async function runInGroup(
  command: string,
  options: {
    cwd: string;
    timeoutMs: number;
    signal?: AbortSignal;
    onUpdate?: (p: unknown) => void;
    sandbox?: Sandboxed;
  },
) {
  const { timeoutMs } = options;
  const run = await runCommandInGroup(command, options);
  if (run.error)
    return toolError(
      "EXECUTION_FAILED",
      `could not start ${options.sandbox ? options.sandbox.bwrap : "/bin/bash"}: ${run.error.message}`,
    );
  if (run.stoppedBy === "cancel") {
    const err = new Error(`shell command cancelled; its process group was killed.\n${run.text}`);
    err.name = "AbortError";
    throw err;
  }
  if (run.stoppedBy === "timeout") {
    return toolError(
      "TIMEOUT",
      `Command timed out after ${timeoutMs} ms; its process group was killed. Raise timeout_ms (max 600000) or make the command finish sooner. Output so far:\n${run.text}`,
    );
  }
  return run.truncated ? { ok: true as const, content: run.text, truncated: true } : run.text;
}

/** How a command run by {@link runCommandInGroup} ended. */
export interface GroupRun {
  /** Set when /bin/bash could not be started. */
  error?: Error;
  /** The exit code; null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the timeout or the abort signal stopped it before it exited. */
  stoppedBy?: "timeout" | "cancel";
  /** `exit code: N`, then stdout and stderr, each bounded to its head and tail. */
  text: string;
  truncated: boolean;
}

/**
 * Runs `command` with `/bin/bash -c` in its own session and process group, the way the `shell`
 * tool does: the timeout, the abort signal and the command's own exit all end with the group
 * and the processes that left it being killed (SIGTERM, then SIGKILL after `KILL_GRACE_MS`).
 * Processes that left the group are found by their session, by the tag in their environment,
 * and (on Linux) by their parent chain: the processes below the shell are recorded every
 * `TRACK_EVERY_MS` while it runs, and the shell reports its background jobs as it exits, so
 * `env -i setsid daemon &` (a new session and an empty environment) is killed too. Recorded
 * processes are signalled only while pid and start time still match. A process whose parent
 * exits between two records (a double fork) is not found.
 * Resolves once they are gone (or the grace wait ran out). Contract: never rejects.
 */
export async function runCommandInGroup(
  command: string,
  options: {
    cwd: string;
    timeoutMs: number;
    signal?: AbortSignal;
    onUpdate?: (p: unknown) => void;
    env?: Record<string, string>;
    /** Run under bubblewrap (see `tools/builtin/sandbox.ts`); its pid namespace ends every process. */
    sandbox?: Sandboxed;
  },
): Promise<GroupRun> {
  const { cwd, timeoutMs, signal, onUpdate, sandbox } = options;
  const stdout = new OutputCapture(BUILTIN_MAX_BYTES);
  const stderr = new OutputCapture(BUILTIN_MAX_BYTES);
  const tag = randomUUID();
  // In a sandbox the jobs' pids are those of its own pid namespace, not ours: not reported.
  const [file, args] = sandbox
    ? [sandbox.bwrap, bwrapArgs(sandbox.plan, ["/bin/bash", "-c", command])]
    : ["/bin/bash", ["-c", `${REPORT_JOBS}${command}`]];
  const child = spawn(file, args, {
    cwd,
    detached: true,
    stdio: ["ignore", "pipe", "pipe", "pipe"],
    env: { ...process.env, ...options.env, [SHELL_TAG_VAR]: tag },
  }) as ChildProcessByStdio<null, Readable, Readable>;
  /** Processes below the shell, recorded while it ran (see the comment above). */
  const tracked = new Map<number, ProcessRef>();
  const track = () => {
    if (!child.pid) return;
    for (const ref of descendants(child.pid)) tracked.set(ref.pid, ref);
  };
  const jobs = child.stdio[3] as NodeJS.ReadableStream | null;
  jobs?.on("data", (b: Buffer) => {
    for (const word of b.toString("latin1").split(/\s+/)) {
      const pid = Number(word);
      const start = Number.isInteger(pid) && pid > 1 ? startTime(pid) : undefined;
      if (start !== undefined) tracked.set(pid, { pid, start });
    }
  });
  jobs?.on("error", () => {});
  const tracker = setInterval(track, TRACK_EVERY_MS);
  tracker.unref();
  let stoppedBy: "timeout" | "cancel" | undefined;
  let exited = false;
  const timers: NodeJS.Timeout[] = [];
  const killTimers: NodeJS.Timeout[] = [];
  /** Processes that left the group (setsid), found by session and tag when it was killed. */
  let leftovers: number[] = [];
  const killGroup = () => {
    for (const sig of ["SIGTERM", "SIGKILL"] as const) {
      const send = () => {
        try {
          if (child.pid) process.kill(-child.pid, sig);
        } catch {}
        if (!child.pid) return;
        leftovers = [...new Set([...leftovers, ...taggedProcesses(child.pid, tag)])];
        signalAll(leftovers, sig);
        signalRefs(tracked.values(), sig);
      };
      if (sig === "SIGTERM") send();
      else killTimers.push(setTimeout(send, KILL_GRACE_MS).unref());
    }
  };
  const stop = (why: "timeout" | "cancel") => {
    // After the command exited its result is known: a cancel only hurries the cleanup.
    if (!exited) stoppedBy ??= why;
    killGroup();
  };
  const onAbort = () => stop("cancel");
  signal?.addEventListener("abort", onAbort, { once: true });
  timers.push(setTimeout(() => stop("timeout"), timeoutMs));
  child.stdout.on("data", (b: Buffer) => {
    stdout.write(b);
    onUpdate?.({ stream: "stdout", text: b.toString("utf8") });
  });
  child.stderr.on("data", (b: Buffer) => {
    stderr.write(b);
    onUpdate?.({ stream: "stderr", text: b.toString("utf8") });
  });
  const outcome = await new Promise<{ code: number | null; sig: NodeJS.Signals | null } | Error>(
    (resolve) => {
      let exit: { code: number | null; sig: NodeJS.Signals | null } | undefined;
      child.once("error", (err) => resolve(err));
      child.once("exit", (code, sig) => {
        exit = { code, sig };
        exited = true;
        clearInterval(tracker);
        killGroup(); // leftovers in the group (e.g. `cmd &`) must not outlive the call
        // A process that left the group may hold the pipes open: do not wait for it forever.
        timers.push(
          setTimeout(() => {
            child.stdout.destroy();
            child.stderr.destroy();
            (jobs as { destroy?: () => void } | null)?.destroy?.();
            resolve(exit!);
          }, KILL_GRACE_MS + 500).unref(),
        );
      });
      child.once("close", (code, sig) => resolve(exit ?? { code, sig }));
    },
  );
  for (const t of timers) clearTimeout(t);
  clearInterval(tracker);
  // Signals are delivered asynchronously: give the group a moment to die before reporting.
  const alive = () =>
    groupAlive(child.pid) || leftovers.some(running) || refsAlive(tracked.values());
  for (let waited = 0; alive() && waited < 1000; waited += 10) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  // Keep the pending SIGKILL only while something the call started survives SIGTERM.
  if (!alive()) for (const t of killTimers) clearTimeout(t);
  signal?.removeEventListener("abort", onAbort);
  if (outcome instanceof Error)
    return { error: outcome, code: null, signal: null, text: "", truncated: false };
  const output = render(stdout, stderr, outcome.code, outcome.sig);
  return {
    code: outcome.code,
    signal: outcome.sig,
    stoppedBy,
    text: output.text,
    truncated: output.truncated,
  };
}

function render(
  stdout: OutputCapture,
  stderr: OutputCapture,
  code: number | null,
  sig: NodeJS.Signals | null,
) {
  const status = code !== null ? `exit code: ${code}` : `killed by signal ${sig ?? "unknown"}`;
  const outShare =
    stderr.total === 0
      ? BUILTIN_MAX_BYTES
      : stdout.total === 0
        ? 0
        : Math.floor((BUILTIN_MAX_BYTES * 2) / 3);
  const out = stdout.render(outShare);
  const err = stderr.render(BUILTIN_MAX_BYTES - Math.min(outShare, stdout.total));
  const parts = [status];
  parts.push(stdout.total > 0 ? `stdout:\n${out.text}` : "stdout: (empty)");
  if (stderr.total > 0) parts.push(`stderr:\n${err.text}`);
  return { text: parts.join("\n"), truncated: out.omitted > 0 || err.omitted > 0 };
}

function groupAlive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}
