import { createHash } from "node:crypto";
import { readFileSync, realpathSync } from "node:fs";
import path from "node:path";
import type { CheckKind } from "../contracts/acceptance.ts";
import { MAX_TIMER_MS } from "../contracts/clock.ts";

/** What a check function returns: whether it passed and what it has to say. */
export interface CheckOutcome {
  passed: boolean;
  output?: string;
}

/** What a check function gets. */
export interface CheckContext {
  /** Aborted when the checks are interrupted; a check should stop soon after. */
  signal: AbortSignal;
  /** The artifact version read just before the check started. */
  artifactVersion: string;
  /** The workspace root (absolute). */
  workspace: string;
}

interface CheckBase {
  /** Unique within the spec. */
  name: string;
  /** `opinion`: recorded and shown, never counted as passed evidence (e.g. a model judge). */
  kind?: CheckKind;
  /**
   * Files the check relies on (its tests, fixtures), relative to the workspace: frozen with the
   * spec. Tools cannot write them while acceptance is on, and before every round of checks the
   * spec's copy is put back if something else changed them.
   */
  files?: string[];
}

/** A check the embedder wrote as a function. */
export interface FunctionCheck extends CheckBase {
  /** Contract: may throw or reject (the check then fails with the error); honour `ctx.signal`. */
  run: (ctx: CheckContext) => Promise<CheckOutcome> | CheckOutcome;
}

/** A check that is a command: passes when it exits 0 within its time. */
export interface CommandCheck extends CheckBase {
  /** Run with `/bin/bash -c`, in its own process group, like the `shell` tool. */
  command: string;
  /** Relative to the workspace (default: the workspace root). */
  cwd?: string;
  /** Default 120 000 ms; the group is killed when it passes. */
  timeoutMs?: number;
}

/** One executable check of an acceptance spec: a function of yours, or a command to run. */
export type AcceptanceCheck = FunctionCheck | CommandCheck;

/** The acceptance spec: executable checks, defined by the embedder, frozen with a version. */
export interface AcceptanceSpec {
  checks: AcceptanceCheck[];
  /** More files the spec relies on (relative to the workspace), frozen like each check's `files`. */
  frozen?: string[];
}

/** A frozen file: where it is, and the content the spec froze. */
export interface FrozenFile {
  /** Relative to the workspace, with `/`. */
  path: string;
  /** The real path, as write tools' paths are compared to it. */
  real: string;
  sha256: string;
  content: Buffer;
}

/** The spec as frozen: its checks, its files' contents and a digest that identifies it. */
export interface FrozenSpec {
  spec: AcceptanceSpec;
  files: FrozenFile[];
  /** Identifies the spec: checks (names, kinds, commands) and the frozen files' contents. */
  digest: string;
}

/** Largest frozen file (its content is kept in the log, so the original can be restored). */
export const MAX_FROZEN_FILE_BYTES = 1024 * 1024;

/**
 * Checks a spec's shape; a bad one throws a TypeError saying what is wrong and how to fix it.
 * This is a pure function.
 */
export function checkSpec(spec: AcceptanceSpec, where: string): void {
  if (!spec || !Array.isArray(spec.checks) || spec.checks.length === 0) {
    throw new TypeError(
      `${where}: \`checks\` must be a non-empty array of { name, run } or { name, command }`,
    );
  }
  const names = new Set<string>();
  for (const [i, check] of spec.checks.entries()) {
    const at = `${where}: checks[${i}]`;
    if (typeof check?.name !== "string" || check.name.length === 0)
      throw new TypeError(`${at}: \`name\` must be a non-empty string`);
    if (names.has(check.name))
      throw new TypeError(`${at}: the name ${JSON.stringify(check.name)} is used twice`);
    names.add(check.name);
    const isRun = typeof (check as FunctionCheck).run === "function";
    const isCommand = typeof (check as CommandCheck).command === "string";
    if (isRun === isCommand)
      throw new TypeError(
        `${at} (${check.name}): give exactly one of \`run: async (ctx) => ({ passed, output })\` or \`command: "npm test"\``,
      );
    if (check.kind !== undefined && check.kind !== "check" && check.kind !== "opinion")
      throw new TypeError(
        `${at}: \`kind\` must be "check" or "opinion", got ${String(check.kind)}`,
      );
    const timeout = (check as CommandCheck).timeoutMs;
    if (
      timeout !== undefined &&
      !(Number.isInteger(timeout) && timeout > 0 && timeout <= MAX_TIMER_MS)
    )
      throw new TypeError(
        `${at}: \`timeoutMs\` must be a whole number of milliseconds from 1 to ${MAX_TIMER_MS} (2^31 − 1, the longest timer), got ${String(timeout)}`,
      );
    if (check.files !== undefined && !Array.isArray(check.files))
      throw new TypeError(`${at}: \`files\` must be an array of paths`);
  }
  if (!spec.checks.some((c) => (c.kind ?? "check") === "check"))
    throw new TypeError(
      `${where}: every check is an opinion; at least one executable check (kind "check") must decide acceptance`,
    );
}

/**
 * Freezes `spec`: reads each frozen file's content (it must exist inside `workspace`). Throws
 * an Error naming the file when one is missing, outside the workspace or too large.
 */
export function freezeSpec(spec: AcceptanceSpec, workspace: string): FrozenSpec {
  const root = realpathSync(workspace);
  const paths = [...(spec.frozen ?? []), ...spec.checks.flatMap((c) => c.files ?? [])];
  const files: FrozenFile[] = [];
  for (const p of new Set(paths)) {
    const real = realPathIn(root, p);
    if (!real)
      throw new Error(
        `acceptance spec: frozen file ${JSON.stringify(p)} is not inside the workspace ${root}; list files relative to it`,
      );
    let content: Buffer;
    try {
      content = readFileSync(real);
    } catch (err) {
      throw new Error(
        `acceptance spec: frozen file ${JSON.stringify(p)} cannot be read (${(err as Error).message}); create it before the session starts`,
      );
    }
    if (content.length > MAX_FROZEN_FILE_BYTES)
      throw new Error(
        `acceptance spec: frozen file ${JSON.stringify(p)} is ${content.length} bytes, over the ${MAX_FROZEN_FILE_BYTES}-byte limit`,
      );
    const rel = path.relative(root, real).split(path.sep).join("/");
    files.push({ path: rel, real, sha256: sha256(content), content });
  }
  const digest = sha256(
    JSON.stringify({
      checks: spec.checks.map((c) => ({
        name: c.name,
        kind: c.kind ?? "check",
        command: (c as CommandCheck).command,
        cwd: (c as CommandCheck).cwd,
        timeoutMs: (c as CommandCheck).timeoutMs,
        run:
          typeof (c as FunctionCheck).run === "function"
            ? String((c as FunctionCheck).run)
            : undefined,
      })),
      files: files.map((f) => [f.path, f.sha256]),
    }),
  );
  return { spec, files, digest };
}

/**
 * The real path `p` (relative to `root`, or absolute) names, following symlinks of its
 * existing part; undefined when it lies outside `root`.
 */
export function realPathIn(root: string, p: string): string | undefined {
  const abs = path.resolve(root, p);
  const missing: string[] = [];
  let probe = abs;
  for (;;) {
    try {
      const real = path.join(realpathSync(probe), ...missing);
      const rel = path.relative(root, real);
      if (rel.startsWith("..") || path.isAbsolute(rel)) return undefined;
      return real;
    } catch {
      const parent = path.dirname(probe);
      if (parent === probe) return undefined;
      missing.unshift(path.basename(probe));
      probe = parent;
    }
  }
}

export function sha256(data: string | Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

/** `createAgent({ acceptance })`: the spec and how the runtime uses it (docs/acceptance.md). */
export interface AcceptanceOptions extends AcceptanceSpec {
  /**
   * The artifact's folder: the default artifact version is computed from its files, command
   * checks run in it, frozen files are relative to it. Default: the working directory.
   */
  workspace?: string;
  /**
   * The artifact's current version, when the workspace's files are not the artifact (or a
   * cheaper version is known). A non-string result is hashed.
   * Contract: may reject (the evidence is then bound to no version and never counts).
   */
  artifact?: () => unknown;
  /** Run the checks after every turn that was not cancelled. Default true. */
  runAfterTurn?: boolean;
  /**
   * `"passed"`: the acceptance loop. After a turn completes and its checks did not all pass,
   * the failing evidence goes to the model as a follow-up turn, at most `maxRounds` times.
   */
  until?: "passed";
  /** Follow-up rounds of the loop (default 3). */
  maxRounds?: number;
  /** Bound on each check's recorded output (head and tail kept). Default 8 192 bytes. */
  maxOutputBytes?: number;
}

/** Checks `createAgent({ acceptance })`; a bad option throws a TypeError saying which. */
export function checkAcceptanceOptions(options: AcceptanceOptions | undefined): void {
  if (options === undefined) return;
  checkSpec(options, "createAgent: `acceptance`");
  if (options.until !== undefined && options.until !== "passed")
    throw new TypeError(
      `createAgent: \`acceptance.until\` must be "passed" (or left out), got ${JSON.stringify(options.until)}`,
    );
  for (const name of ["maxRounds", "maxOutputBytes"] as const) {
    const v = options[name];
    if (v !== undefined && !(Number.isInteger(v) && v >= (name === "maxRounds" ? 0 : 256)))
      throw new TypeError(
        `createAgent: \`acceptance.${name}\` must be an integer ≥ ${name === "maxRounds" ? 0 : 256}, got ${String(v)}`,
      );
  }
  if (options.artifact !== undefined && typeof options.artifact !== "function")
    throw new TypeError("createAgent: `acceptance.artifact` must be a function () => version");
}
