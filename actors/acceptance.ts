import { randomUUID } from "node:crypto";
import {
  lstatSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import type { Logger } from "pino";
import { type AnyActorRef, createActor, type InspectionEvent } from "xstate";
import type { AcceptanceReport, CheckEvidence, CheckKind } from "../contracts/acceptance.ts";
import type { Clock } from "../contracts/clock.ts";
import type { AgentEventBody } from "../contracts/events.ts";
import type { TurnStatus } from "../contracts/status.ts";
import { notExecuted, type ToolFailure } from "../contracts/tool-result.ts";
import {
  type AcceptanceEffects,
  type AcceptanceOutcome,
  type acceptanceMachine,
  acceptanceStatus,
  type CheckReason,
  evidenceOf,
  staleChecks,
} from "../machines/acceptance.machine.ts";
import type { SessionLog } from "../session/log.ts";
import { runCommandInGroup } from "../tools/builtin/shell.ts";
import type { PreparedCall } from "../tools/types.ts";
import {
  type AcceptanceCheck,
  type AcceptanceSpec,
  type CommandCheck,
  checkSpec,
  type FrozenFile,
  type FrozenSpec,
  freezeSpec,
  realPathIn,
  sha256,
} from "./acceptance-spec.ts";
import { digestOf, workspaceVersion } from "./artifact-version.ts";
import { bindEffects, hostedAcceptanceMachine } from "./charts.ts";
import type { ToolReport } from "./run-tool.ts";

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

export interface AcceptanceHostOptions {
  options: AcceptanceOptions;
  log: SessionLog;
  clock: Clock;
  logger: Logger;
  emit: (event: AgentEventBody) => void;
  inspect?: (event: InspectionEvent) => void;
  /**
   * Runs a follow-up turn with `text` as its input, unless `cancelled()` is true when it is
   * about to start (then it resolves `cancelled` without a turn). Called from the chart's
   * action, it must start the turn after that action returns. Contract: never rejects.
   */
  followUp: (text: string, cancelled: () => boolean) => Promise<{ status: TurnStatus }>;
  /** @internal Test seam: a variant of the acceptance chart (mutation tests only). */
  machine?: typeof acceptanceMachine;
}

const DEFAULT_TIMEOUT_MS = 120_000;

/**
 * The acceptance of one session: hosts the acceptance chart and performs its effects — runs
 * the embedder's checks (commands in their own process group, like the `shell` tool), reads
 * the artifact's version around each, restores frozen files, sends follow-up turns, and
 * records every outcome in the log (`acceptance` entries) and as events.
 *
 * Lifecycle: created when the session's log is open; `open()` records the spec (a new
 * `acceptance_spec` entry when it differs from the last one in the log) and restores the
 * evidence of the last `acceptance` entry. `check()` runs one round (or a loop) and resolves
 * with its outcome; `interrupt()` stops it; `report()` reads the version and says what the
 * evidence supports now.
 */
export class AcceptanceHost implements AcceptanceEffects {
  private readonly o: AcceptanceHostOptions;
  private readonly workspace: string;
  private readonly version: () => Promise<string>;
  private frozen!: FrozenSpec;
  private specVersion = 0;
  private actor!: ReturnType<typeof createActor<typeof acceptanceMachine>>;
  private checkCtl: AbortController | undefined;
  private waiting: ((outcome: AcceptanceOutcome) => void) | undefined;
  private unreadable = 0;

  constructor(options: AcceptanceHostOptions) {
    this.o = options;
    this.workspace = path.resolve(options.options.workspace ?? ".");
    const artifact = options.options.artifact;
    this.version = artifact
      ? async () => {
          const v = await artifact();
          return typeof v === "string" ? v : digestOf(v);
        }
      : workspaceVersion(this.workspace);
  }

  /** Records the spec (when new) and restores the last evidence from the log. */
  open(): void {
    const { log } = this.o;
    this.frozen = freezeSpec(this.o.options, this.workspace);
    let lastSpec: { version: number; digest: string } | undefined;
    let lastEvidence: CheckEvidence[] = [];
    for (const e of log.entries()) {
      if (e.type === "acceptance_spec") {
        lastSpec = e;
        lastEvidence = [];
      }
      if (e.type === "acceptance" && e.specVersion === lastSpec?.version)
        lastEvidence = e.evidence.checks;
    }
    if (lastSpec?.digest === this.frozen.digest) {
      this.specVersion = lastSpec.version;
    } else {
      this.specVersion = (lastSpec?.version ?? 0) + 1;
      this.recordSpec();
      lastEvidence = [];
    }
    this.actor = createActor(hostedAcceptanceMachine(this.o.machine), {
      input: {
        specVersion: this.specVersion,
        checks: this.kinds(),
        maxRounds: this.o.options.until === "passed" ? (this.o.options.maxRounds ?? 3) : 0,
      },
      inspect: this.o.inspect,
    });
    bindEffects(this.actor.system, this);
    this.actor.start();
    this.actor.send({ type: "evidence.restored", evidence: lastEvidence });
  }

  /** Whether a round of checks or a follow-up runs now. */
  get busy(): boolean {
    return !this.actor.getSnapshot().matches("idle");
  }

  get spec(): { version: number; digest: string; files: string[] } {
    return {
      version: this.specVersion,
      digest: this.frozen.digest,
      files: this.frozen.files.map((f) => f.path),
    };
  }

  /** The acceptance chart's actor (inspection, tests). */
  get ref(): AnyActorRef {
    return this.actor;
  }

  /** Whether the loop may follow up after a completed turn. */
  get loops(): boolean {
    return this.o.options.until === "passed";
  }

  get runsAfterTurn(): boolean {
    return this.o.options.runAfterTurn !== false;
  }

  /**
   * Reads the artifact's version and says what the evidence supports now (stale evidence
   * shows as `stale`).
   */
  async report(): Promise<AcceptanceReport> {
    await this.readVersion();
    return this.snapshotReport();
  }

  /** What the evidence supports as of the last version read (no read). */
  snapshotReport(): AcceptanceReport {
    const context = this.actor.getSnapshot().context;
    return {
      acceptance: acceptanceStatus(context),
      evidence: evidenceOf(context),
      specVersion: this.specVersion,
    };
  }

  /**
   * Runs the checks whose evidence does not count for the current version (`all`: every
   * check; `names`: those), then, with `loop`, follow-ups while they fail. Resolves with the
   * outcome once the chart is idle again.
   */
  async check(options: {
    reason: CheckReason;
    loop?: boolean;
    all?: boolean;
    names?: string[];
  }): Promise<AcceptanceOutcome> {
    if (this.busy) throw new Error("acceptance checks are already running");
    await this.readVersion();
    const context = this.actor.getSnapshot().context;
    const stale = new Set(staleChecks(context));
    const wanted = options.names ? new Set(options.names) : undefined;
    const names = this.frozen.spec.checks
      .map((c) => c.name)
      .filter((n) => (wanted ? wanted.has(n) : options.all === true || stale.has(n)));
    const done = new Promise<AcceptanceOutcome>((resolve) => {
      this.waiting = resolve;
    });
    this.actor.send({
      type: "checks.requested",
      names,
      loop: options.loop === true,
      reason: options.reason,
    });
    return done;
  }

  /** Stops the running checks (their process groups are killed); a follow-up turn is the session's to stop. */
  interrupt(reason: string): void {
    this.actor?.send({ type: "acceptance.interrupt", reason });
  }

  /**
   * Replaces the spec by an explicit call: a new spec version is recorded and every earlier
   * evidence is dropped (it belonged to the old spec).
   */
  setSpec(spec: AcceptanceSpec): { version: number } {
    checkSpec(spec, "setAcceptanceSpec");
    if (this.busy) throw new Error("cannot change the acceptance spec while checks run");
    Object.assign(this.o.options, { checks: spec.checks, frozen: spec.frozen });
    this.frozen = freezeSpec(this.o.options, this.workspace);
    this.specVersion++;
    this.recordSpec();
    this.actor.send({ type: "spec.changed", specVersion: this.specVersion, checks: this.kinds() });
    return { version: this.specVersion };
  }

  /**
   * The refusal of a call that would write a frozen file, or undefined. A call of a tool that is
   * not read-only is refused when one of its path arguments (`path`, `file`, `file_path`,
   * `filePath`) or its resource key names a frozen file. This is synchronous.
   */
  guardCall(call: PreparedCall): ToolFailure | undefined {
    if (call.traits.readOnly || this.frozen.files.length === 0) return undefined;
    const args = (call.args ?? {}) as Record<string, unknown>;
    const candidates = [args.path, args.file, args.file_path, args.filePath, call.resourceKey];
    let root: string;
    try {
      root = realpathSync(this.workspace);
    } catch {
      return undefined;
    }
    for (const c of candidates) {
      if (typeof c !== "string" || c === "") continue;
      const real = realPathIn(root, c);
      const hit = real && this.frozen.files.find((f) => f.real === real);
      if (hit) {
        return notExecuted(
          "DENIED",
          `${hit.path} is part of the frozen acceptance spec (version ${this.specVersion}): tools cannot change it while acceptance is on, and the checks run the spec's copy of it. Change the code under test instead; only the embedder can change the spec (session.setAcceptanceSpec).`,
        );
      }
    }
    return undefined;
  }

  /**
   * Watches a call of a tool that is not read-only and passed {@link guardCall} (a `shell`
   * command names no path): reads the frozen files just before it runs; the returned function,
   * given the call's report, puts back the spec's copy of every frozen file the call changed
   * (content, or a symlink, folder or nothing in its place) and turns the report into a
   * `DENIED` failure that says so, with the tool's own result after it. A cancelled call stays
   * cancelled; its changes are put back all the same. Undefined when there is nothing to watch.
   * Synchronous (frozen files are at most `MAX_FROZEN_FILE_BYTES` each).
   */
  watchCall(call: PreparedCall): ((report: ToolReport) => ToolReport) | undefined {
    if (call.traits.readOnly || this.frozen.files.length === 0) return undefined;
    const files = this.frozen.files;
    const before = files.map(stateOf);
    return (report) => {
      const changed = files.filter((f, i) => {
        const now = stateOf(f);
        return now !== before[i] && now !== f.sha256;
      });
      if (changed.length === 0) return report;
      const restored = changed.filter((f) => this.restoreFile(f));
      const failed = changed.filter((f) => !restored.includes(f)).map((f) => f.path);
      const names = changed.map((f) => f.path).join(", ");
      const what = [
        restored.length > 0
          ? `the spec's copy of ${restored.map((f) => f.path).join(", ")} was restored after it`
          : "",
        failed.length > 0 ? `${failed.join(", ")} could not be restored (see the log)` : "",
      ]
        .filter(Boolean)
        .join("; ");
      const message = `${call.name} (${call.id}) changed ${names}, part of the frozen acceptance spec (version ${this.specVersion}): the write is refused and ${what}.`;
      this.o.logger.warn(
        { callId: call.id, tool: call.name, files: changed.map((f) => f.path) },
        message,
      );
      this.o.emit({ type: "log.written", level: "warn", message });
      if (report.type === "call.aborted") return report;
      const own = report.result.ok
        ? report.result.content
        : `${report.result.code}: ${report.result.message}`;
      return {
        type: "call.fail",
        result: {
          ok: false,
          code: "DENIED",
          retryable: false,
          message: `${message} Tools cannot change the acceptance spec's files while acceptance is on, and the checks run the spec's copy. Change the code under test instead. The command's other effects stand; its own result:\n${own}`,
        },
      };
    };
  }

  // The effects the acceptance chart names (AcceptanceEffects), bound by actors/charts.ts.

  runChecks(self: AnyActorRef, { names, round }: { names: string[]; round: number }): void {
    const ctl = new AbortController();
    this.checkCtl = ctl;
    void this.runAll(self, names, round, ctl.signal).then(
      () => {
        if (this.checkCtl === ctl) this.checkCtl = undefined;
        self.send({ type: "checks.done" });
      },
      (err) => {
        this.o.logger.error({ err }, "acceptance checks failed to run");
        self.send({ type: "checks.done" });
      },
    );
  }

  abortChecks(_self: AnyActorRef): void {
    this.checkCtl?.abort(new Error("interrupted"));
  }

  followUp(
    self: AnyActorRef,
    { round, failing }: { round: number; failing: CheckEvidence[] },
  ): void {
    this.o.emit({ type: "follow-up.sent", round, failing: failing.map((c) => c.name) });
    // An interrupt received meanwhile (a listener of the event above may send one) is in the
    // chart's context by the time the turn would start: then no turn runs.
    const cancelled = () => self.getSnapshot().context.interrupted;
    void this.o.followUp(followUpText(round, this.maxRounds, failing), cancelled).then(
      async ({ status }) => {
        await this.readVersion(); // what the turn changed decides which checks run next
        self.send({ type: "round.ended", status });
      },
      () => self.send({ type: "round.ended", status: "failed" }),
    );
  }

  reported(_self: AnyActorRef, outcome: AcceptanceOutcome): void {
    this.o.log.append({
      type: "acceptance",
      specVersion: this.specVersion,
      acceptance: outcome.acceptance,
      evidence: outcome.evidence,
      rounds: outcome.rounds,
      reason: outcome.reason,
      ...(outcome.interrupted ? { interrupted: true } : {}),
    });
    this.o.emit({
      type: "acceptance.checked",
      acceptance: outcome.acceptance,
      evidence: outcome.evidence,
      rounds: outcome.rounds,
      reason: outcome.reason,
      specVersion: this.specVersion,
    });
    const resolve = this.waiting;
    this.waiting = undefined;
    resolve?.(outcome);
  }

  private get maxRounds(): number {
    return this.o.options.maxRounds ?? 3;
  }

  private kinds(): { name: string; kind: CheckKind }[] {
    return this.frozen.spec.checks.map((c) => ({ name: c.name, kind: c.kind ?? "check" }));
  }

  private recordSpec(): void {
    this.o.log.append({
      type: "acceptance_spec",
      version: this.specVersion,
      digest: this.frozen.digest,
      checks: this.frozen.spec.checks.map((c) => ({
        name: c.name,
        kind: c.kind ?? "check",
        ...((c as CommandCheck).command !== undefined
          ? { command: (c as CommandCheck).command }
          : {}),
      })),
      files: this.frozen.files.map((f) => ({
        path: f.path,
        sha256: f.sha256,
        content: f.content.toString("base64"),
      })),
    });
  }

  /** Reads the version and tells the chart; an unreadable version is one no evidence has. */
  private async readVersion(): Promise<string> {
    let version: string;
    try {
      version = await this.version();
    } catch (err) {
      const message = `acceptance: the artifact version could not be read: ${(err as Error).message}`;
      this.o.logger.warn({ err }, message);
      this.o.emit({ type: "log.written", level: "warn", message });
      version = `unreadable:${++this.unreadable}`;
    }
    this.actor.send({ type: "artifact.read", version });
    return version;
  }

  private async runAll(self: AnyActorRef, names: string[], round: number, signal: AbortSignal) {
    const { emit, clock } = this.o;
    emit({ type: "acceptance.started", round, checks: names });
    const restored = this.restoreFrozen();
    for (const name of names) {
      if (signal.aborted) return;
      const check = this.frozen.spec.checks.find((c) => c.name === name)!;
      // Put back what changed since the last check (a process left running may rewrite the
      // spec at any time), then note each frozen file's identity: it is read again after the
      // check, and evidence whose spec changed while it ran does not count.
      const putBack = this.restoreFrozen();
      for (const p of putBack) if (!restored.includes(p)) restored.push(p);
      const before = this.frozen.files.map(identityOf);
      // A frozen file still not the spec's copy (e.g. its folder became a symlink out of the
      // workspace): the check would run a changed spec, so it does not run; it fails saying why.
      const changed = this.frozen.files
        .filter((f, i) => before[i].sha256 !== f.sha256)
        .map((f) => f.path);
      const version = await this.readVersion();
      if (signal.aborted) return;
      self.send({ type: "check.started", name, version });
      emit({ type: "check.started", name, round, artifactVersion: version });
      const startedAt = clock.now();
      const run =
        changed.length > 0
          ? {
              passed: false,
              output: `not run: the frozen ${changed.join(", ")} could not be put back to the spec's copy (see the log), so the check would run a changed spec. Restore it in the workspace, then accept() again.`,
            }
          : await this.runOne(check, version, signal);
      const durationMs = Math.max(0, clock.now() - startedAt);
      if (signal.aborted) return; // stopped: not evidence
      await this.readVersion(); // a change while it ran makes its evidence not count
      const rewritten = this.frozen.files
        .filter((f, i) => !sameIdentity(before[i], identityOf(f)))
        .map((f) => f.path);
      const result =
        rewritten.length > 0 && changed.length === 0
          ? {
              passed: false,
              output: `not counted: the frozen ${rewritten.join(", ")} changed while the check ran (something rewrote it: a process left running by a command may still be doing so), so the check may have run a changed spec. The spec's copy is put back before the next check.\n${run.output}`,
            }
          : run;
      if (rewritten.length > 0) {
        const message = `acceptance: frozen ${rewritten.join(", ")} changed while check ${name} ran; its result does not count`;
        this.o.logger.warn({ check: name, files: rewritten }, message);
        emit({ type: "log.written", level: "warn", message });
        this.restoreFrozen();
      }
      let output = result.output;
      if (restored.length > 0)
        output = `[before the checks, the spec's copy of ${restored.join(", ")} was restored: it had been changed in the workspace]\n${output}`;
      output = bound(output, this.o.options.maxOutputBytes ?? 8192);
      self.send({
        type: "check.finished",
        name,
        passed: result.passed,
        output,
        startedAt,
        durationMs,
      });
      emit({
        type: "check.ended",
        name,
        kind: check.kind ?? "check",
        passed: result.passed,
        durationMs,
        round,
      });
    }
  }

  private async runOne(
    check: AcceptanceCheck,
    artifactVersion: string,
    signal: AbortSignal,
  ): Promise<{ passed: boolean; output: string }> {
    if ("run" in check && typeof check.run === "function") {
      try {
        const r = await check.run({ signal, artifactVersion, workspace: this.workspace });
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
    const cwd = realPathIn(realpathSync(this.workspace), c.cwd ?? ".");
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

  /**
   * Puts the spec's copy of `f` in place: written beside it and renamed over whatever is at its
   * path (a symlink is replaced, never written through), in a folder that must still be the
   * workspace's own (not a symlink leading elsewhere). False (and a log line) when it cannot.
   */
  private restoreFile(f: FrozenFile): boolean {
    const dir = path.dirname(f.real);
    const temp = path.join(dir, `.${path.basename(f.real)}.keel-restore-${randomUUID()}`);
    try {
      // A folder put in the file's place (`node x.test.mjs` would run its index.js) goes.
      if (lstatSync(f.real, { throwIfNoEntry: false })?.isDirectory())
        rmSync(f.real, { recursive: true, force: true });
      mkdirSync(dir, { recursive: true });
      if (realpathSync(dir) !== dir) throw new Error(`${dir} is no longer the workspace's folder`);
      writeFileSync(temp, f.content, { flag: "wx" });
      renameSync(temp, f.real);
      return true;
    } catch (err) {
      try {
        rmSync(temp, { force: true });
      } catch {} // e.g. ENOTDIR: the folder is not one; nothing was written
      this.o.logger.warn({ err }, `could not restore frozen file ${f.path}`);
      return false;
    }
  }

  /** Puts back the spec's copy of every frozen file that differs on disk; their paths. */
  private restoreFrozen(): string[] {
    const restored: string[] = [];
    for (const f of this.frozen.files) {
      if (stateOf(f) === f.sha256) continue;
      if (this.restoreFile(f)) restored.push(f.path);
    }
    if (restored.length > 0) {
      const message = `acceptance: frozen ${restored.join(", ")} had changed in the workspace; the spec's copy was restored before the checks`;
      this.o.emit({ type: "log.written", level: "warn", message });
    }
    return restored;
  }
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

/**
 * A frozen file's identity on disk: its content's SHA-256 (or what is there instead), and the
 * inode and change time, which every write moves (even one that puts the same bytes back, or
 * a swap and a swap back), so a change during a check is seen even when undone before the end.
 */
interface Identity {
  sha256: string;
  inode: string;
  ctime: string;
}

function identityOf(f: FrozenFile): Identity {
  let info: ReturnType<typeof lstatSync> | undefined;
  try {
    info = lstatSync(f.real, { bigint: true, throwIfNoEntry: false });
  } catch {
    info = undefined; // e.g. ENOTDIR: a file where its folder was
  }
  return {
    sha256: stateOf(f),
    inode: info ? `${info.dev}:${info.ino}` : "missing",
    ctime: info ? String(info.ctimeNs) : "missing",
  };
}

function sameIdentity(a: Identity, b: Identity): boolean {
  return a.sha256 === b.sha256 && a.inode === b.inode && a.ctime === b.ctime;
}

/** What is at a frozen file's path now: its SHA-256 when it is a regular file, else what it is. */
function stateOf(f: FrozenFile): string {
  try {
    const info = lstatSync(f.real);
    return info.isFile() ? sha256(readFileSync(f.real)) : `not a regular file (mode ${info.mode})`;
  } catch {
    return "missing";
  }
}
