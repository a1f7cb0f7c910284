import { execFile } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it, vi } from "vitest";
import { createAgent } from "../actors/agent.ts";
import type { AgentEvent } from "../contracts/events.ts";
import type { ToolResult } from "../contracts/tool-result.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { builtinTools } from "../tools/builtin/index.ts";
import { running } from "../tools/builtin/process-tree.ts";
import { ADD_TEST, addWorkspace, call, FIXED_ADD } from "./support/acceptance-fixture.ts";

/** The model's `shell` calls are what these tests are about: allowed, as an embedder would. */
const ALLOW_HIGH = { defaults: { high: "allow" } } as const;

const run = promisify(execFile);
const TSX = ["--import", "tsx"];
const testsCheck = { name: "tests", command: "node add.test.mjs", files: ["add.test.mjs"] };

describe("done means accepted: run status and acceptance are separate layers", () => {
  it("a session that ends completed in a process that exits 0 still reports acceptance failed, in its result and its log", async () => {
    const ws = addWorkspace();
    const db = path.join(ws, ".keel", "negative.db");
    const child = await run(
      process.execPath,
      [...TSX, "test/support/acceptance-child.ts", ws, db],
      { cwd: path.resolve(import.meta.dirname, "..") },
    );
    // execFile rejects on a non-zero exit: reaching here means the process exited 0.
    const result = JSON.parse(child.stdout.trim().split("\n").at(-1)!);
    expect(result.status).toBe("completed");
    expect(result.text).toContain("all tests pass");
    expect(result.acceptance).toBe("failed");
    expect(result.evidence.checks).toEqual([
      expect.objectContaining({ name: "tests", kind: "check", passed: false }),
    ]);
    expect(result.evidence.checks[0].output).toContain("add(2, 2) returned 0, expected 4");
    expect(result.evidence.checks[0].artifactVersion).toBe(result.evidence.artifactVersion);

    const store = sqliteStore(db);
    const entries = (await store.load("negative")) as LogEntry[];
    await store.close?.();
    const turnEnd = entries.find((e) => e.type === "turn_end");
    const verdict = entries.find((e) => e.type === "acceptance");
    expect(turnEnd).toMatchObject({ status: "completed" });
    expect(verdict).toMatchObject({ acceptance: "failed", reason: "turn" });
    expect(entries.find((e) => e.type === "acceptance_spec")).toMatchObject({
      version: 1,
      files: [expect.objectContaining({ path: "add.test.mjs" })],
    });
  });
});

describe("evidence is bound to the artifact version", () => {
  it("evidence goes stale when a write tool changes a file after the check, and accept() re-runs only what does not count", async () => {
    const ws = addWorkspace();
    writeFileSync(path.join(ws, "add.mjs"), FIXED_ADD);
    const model = scriptedModel([
      { text: "nothing to do" },
      call("w1", "write_file", { path: "notes.md", content: "a note" }),
      { text: "wrote a note" },
    ]);
    const agent = createAgent({
      model,
      tools: builtinTools({ root: ws }),
      permissions: ALLOW_HIGH,
      acceptance: {
        workspace: ws,
        runAfterTurn: false,
        checks: [testsCheck, { name: "lint", command: "test -f add.mjs" }],
      },
    });
    const session = await agent.openSession("stale");
    expect((await session.acceptance())?.acceptance).toBe("pending");
    const first = await session.accept();
    expect(first).toMatchObject({ ok: true, ran: ["tests", "lint"], acceptance: "passed" });
    // Nothing changed: nothing to re-run, and the evidence still counts.
    expect(await session.accept()).toMatchObject({ ok: true, ran: [], acceptance: "passed" });

    const quiet = await session.prompt("anything?");
    expect(quiet.acceptance).toBe("passed"); // the turn wrote nothing

    const wrote = await session.prompt("write a note");
    expect(wrote.status).toBe("completed");
    expect(wrote.acceptance).toBe("stale");
    const report = (await session.acceptance())!;
    expect(report.acceptance).toBe("stale");
    for (const c of report.evidence.checks) {
      expect(c.artifactVersion).not.toBe(report.evidence.artifactVersion);
    }
    const again = await session.accept();
    expect(again).toMatchObject({ ok: true, ran: ["tests", "lint"], acceptance: "passed" });
    await agent.close();
  });

  it("after an interrupted round, accept() runs only the check that left no evidence", async () => {
    const ws = addWorkspace();
    writeFileSync(path.join(ws, "add.mjs"), FIXED_ADD);
    let hold = true;
    const agent = createAgent({
      model: scriptedModel([]),
      acceptance: {
        workspace: ws,
        runAfterTurn: false,
        checks: [
          testsCheck,
          {
            name: "slow",
            run: async ({ signal }) => {
              while (hold && !signal.aborted) await new Promise((r) => setTimeout(r, 5));
              return { passed: true, output: "ok" };
            },
          },
        ],
      },
    });
    const session = await agent.openSession("partial");
    const started: string[] = [];
    session.subscribe((e) => {
      if (e.type === "check.started") started.push(e.name);
    });
    const pending = session.accept();
    while (!started.includes("slow")) await new Promise((r) => setTimeout(r, 5));
    await session.interrupt("stop the checks");
    const cut = await pending;
    expect(cut).toMatchObject({ ok: true, acceptance: "pending" });
    hold = false;
    expect(await session.accept()).toMatchObject({ ok: true, ran: ["slow"], acceptance: "passed" });
    await agent.close();
  });

  it("evidence whose artifact changed while the check ran, or since, is never reported as passed", async () => {
    let version = "v1";
    let changeDuringCheck = true;
    const probe = {
      name: "probe",
      run: async () => {
        if (changeDuringCheck) version = "v2"; // someone edits while it runs
        return { passed: true, output: "looked fine" };
      },
    };
    const acceptance = { artifact: () => version, runAfterTurn: false, checks: [probe] };
    const agent = createAgent({ model: scriptedModel([]), acceptance });
    const session = await agent.openSession("mismatch");
    const during = await session.accept();
    expect(during).toMatchObject({ ok: true, acceptance: "stale" });
    if (!during.ok) throw new Error("refused");
    expect(during.evidence.checks[0].artifactVersion).toBe("v1..v2");
    changeDuringCheck = false;
    expect(await session.accept()).toMatchObject({ acceptance: "passed" });
    version = "v3";
    expect((await session.acceptance())?.acceptance).toBe("stale");
    // Back to the version the evidence was taken against: it counts again.
    version = "v2";
    expect((await session.acceptance())?.acceptance).toBe("passed");
    await agent.close();

    // Reopened from the log, old evidence is checked against the version read now.
    const store = agent.store;
    version = "v9";
    const reopened = createAgent({ model: scriptedModel([]), store, acceptance });
    const s2 = await reopened.openSession("mismatch");
    const report = await s2.acceptance();
    expect(report?.acceptance).toBe("stale");
    expect(report?.evidence.checks[0].artifactVersion).toBe("v2");
    await reopened.close();
  });

  it("an opinion is recorded but never counts as passed evidence", async () => {
    const agent = createAgent({
      model: scriptedModel([]),
      acceptance: {
        artifact: () => "v1",
        runAfterTurn: false,
        checks: [
          { name: "judge", kind: "opinion", run: () => ({ passed: true, output: "looks great" }) },
          { name: "tests", run: () => ({ passed: false, output: "1 failing" }) },
        ],
      },
    });
    const session = await agent.openSession();
    const r = await session.accept();
    expect(r).toMatchObject({ ok: true, acceptance: "failed" });
    if (!r.ok) throw new Error("refused");
    expect(r.evidence.checks.find((c) => c.name === "judge")).toMatchObject({
      kind: "opinion",
      passed: true,
    });
    await agent.close();
    expect(() =>
      createAgent({
        model: scriptedModel([]),
        acceptance: { checks: [{ name: "judge", kind: "opinion", run: () => ({ passed: true }) }] },
      }),
    ).toThrow(/every check is an opinion/);
  });
});

describe("command checks", () => {
  it("a command that outlives its timeoutMs fails the check, says so in its evidence, and its process group is killed", async () => {
    const ws = addWorkspace();
    writeFileSync(path.join(ws, "add.mjs"), FIXED_ADD);
    const pidFile = path.join(tmpdir(), `keel-check-timeout-${process.pid}-${Date.now()}.pid`);
    const agent = createAgent({
      model: scriptedModel([]),
      acceptance: {
        workspace: ws,
        runAfterTurn: false,
        checks: [
          testsCheck,
          {
            name: "hangs",
            command: `sleep 30 & echo $! > ${pidFile}; echo started; wait`,
            timeoutMs: 300,
          },
        ],
      },
    });
    const session = await agent.openSession();
    const r = await session.accept();
    expect(r).toMatchObject({ ok: true, ran: ["tests", "hangs"], acceptance: "failed" });
    if (!r.ok) throw new Error("refused");
    const hangs = r.evidence.checks.find((c) => c.name === "hangs")!;
    expect(hangs.passed).toBe(false);
    expect(hangs.output).toMatch(/^timed out after 300 ms; its process group was killed\n/);
    expect(hangs.output).toContain("started");
    expect(hangs.durationMs).toBeGreaterThanOrEqual(300);
    expect(hangs.durationMs).toBeLessThan(10_000);
    expect(r.evidence.checks.find((c) => c.name === "tests")?.passed).toBe(true);
    expect(running(Number(readFileSync(pidFile, "utf8")))).toBe(false);
    await agent.close();
  });
});

describe("the acceptance spec is frozen", () => {
  it("the model's edits of the frozen test file are refused, and the check still runs the original", async () => {
    const ws = addWorkspace();
    const cheat = 'console.log("add: ok");\n';
    const model = scriptedModel([
      call("w", "write_file", { path: "add.test.mjs", content: cheat }),
      call("e", "edit_file", {
        path: "./add.test.mjs",
        old_string: "process.exit(1);",
        new_string: "",
      }),
      call("s", "shell", { command: `printf '%s' '${cheat}' > add.test.mjs` }),
      { text: "the tests pass now" },
    ]);
    const agent = createAgent({
      model,
      tools: builtinTools({ root: ws }),
      permissions: ALLOW_HIGH,
      acceptance: { workspace: ws, checks: [testsCheck] },
    });
    const session = await agent.openSession("frozen");
    const settled: AgentEvent[] = [];
    const warnings: string[] = [];
    session.subscribe((e) => {
      if (e.type === "call.settled") settled.push(e);
      if (e.type === "log.written" && e.level === "warn") warnings.push(e.message);
    });
    const result = await session.prompt("make the tests pass");
    const byId = new Map(settled.map((e) => [(e as { callId: string }).callId, e]));
    for (const id of ["w", "e"]) {
      const r = byId.get(id) as Extract<AgentEvent, { type: "call.settled" }>;
      expect(r.outcome).toBe("not_executed");
      expect(r.result).toMatchObject({ ok: false, code: "DENIED" });
      expect(r.result.ok === false && r.result.message).toMatch(
        /add\.test\.mjs is part of the frozen acceptance spec \(version 1\)/,
      );
    }
    // The shell is not path-aware: its command ran and changed the file; the change is found
    // when the call ends, undone, and the call's result says so.
    const s = byId.get("s") as Extract<AgentEvent, { type: "call.settled" }>;
    expect(s.outcome).toBe("failed");
    expect(s.result).toMatchObject({ ok: false, code: "DENIED" });
    expect(s.result.ok === false && s.result.message).toMatch(
      /^shell \(s\) changed add\.test\.mjs, part of the frozen acceptance spec \(version 1\): the write is refused and the spec's copy of add\.test\.mjs was restored after it\./,
    );
    expect(s.result.ok === false && s.result.message).toContain("exit code: 0");
    expect(warnings.some((m) => m.startsWith("shell (s) changed add.test.mjs"))).toBe(true);
    const logged = session.entries().find((e) => e.type === "call_result" && e.callId === "s");
    expect(logged).toMatchObject({ outcome: "failed", result: { code: "DENIED" } });
    expect(result.status).toBe("completed");
    expect(result.acceptance).toBe("failed");
    expect(result.evidence?.checks[0].output).toContain("add(2, 2) returned 0");
    // Restored at once: nothing was left for the round of checks to put back.
    expect(result.evidence?.checks[0].output).not.toContain("was restored");
    expect(readFileSync(path.join(ws, "add.test.mjs"), "utf8")).toBe(ADD_TEST);

    // Changing the spec is the embedder's explicit call: a new version in the log.
    const changed = await session.setAcceptanceSpec({
      checks: [
        { name: "tests", command: "node add.test.mjs", files: ["add.test.mjs"] },
        { name: "exists", command: "true" },
      ],
    });
    expect(changed).toEqual({ ok: true, version: 2 });
    expect((await session.acceptance())?.acceptance).toBe("pending");
    const specs = session.entries().filter((e) => e.type === "acceptance_spec");
    expect(specs.map((e) => (e as { version: number }).version)).toEqual([1, 2]);
    await agent.close();
  });
  it("a shell command that swaps the frozen file for a symlink gets the spec's copy back in its place, and the link's target is never written", async () => {
    const ws = addWorkspace();
    const outside = path.join(mkdtempSync(path.join(tmpdir(), "keel-outside-")), "target.txt");
    writeFileSync(outside, "not yours\n");
    const model = scriptedModel([
      call("ln", "shell", { command: `rm add.test.mjs && ln -s ${outside} add.test.mjs` }),
      call("rm", "shell", { command: "rm add.test.mjs" }),
      { text: "done" },
    ]);
    const agent = createAgent({
      model,
      tools: builtinTools({ root: ws }),
      permissions: ALLOW_HIGH,
      acceptance: { workspace: ws, runAfterTurn: false, checks: [testsCheck] },
    });
    const session = await agent.openSession();
    const settled = new Map<string, ToolResult>();
    let afterLink = false;
    session.subscribe((e) => {
      if (e.type === "call.settled") settled.set(e.callId, e.result);
      // Between the two calls the file is back as a regular file.
      if (e.type === "call.settled" && e.callId === "ln")
        afterLink = lstatSync(path.join(ws, "add.test.mjs")).isFile();
    });
    await session.prompt("go");
    for (const id of ["ln", "rm"]) {
      expect(settled.get(id)).toMatchObject({ ok: false, code: "DENIED" });
      expect(JSON.stringify(settled.get(id))).toContain("spec's copy of add.test.mjs was restored");
    }
    expect(afterLink).toBe(true);
    expect(readFileSync(outside, "utf8")).toBe("not yours\n");
    expect(lstatSync(path.join(ws, "add.test.mjs")).isFile()).toBe(true);
    expect(readFileSync(path.join(ws, "add.test.mjs"), "utf8")).toBe(ADD_TEST);
    await agent.close();
  });
});

describe("a frozen file the model's shell command puts out of reach", () => {
  /** A workspace whose frozen test (spec: it fails) sits in a folder; one shell call, then checks. */
  async function tamper(command: string) {
    const ws = addWorkspace();
    mkdirSync(path.join(ws, "t"));
    writeFileSync(path.join(ws, "t", "a.test.mjs"), "process.exit(1)\n");
    const check = { name: "t", command: "node t/a.test.mjs", files: ["t/a.test.mjs"] };
    const model = scriptedModel([call("sh", "shell", { command }), { text: "done" }]);
    const agent = createAgent({
      model,
      tools: builtinTools({ root: ws }),
      permissions: ALLOW_HIGH,
      acceptance: { workspace: ws, checks: [check] },
    });
    const session = await agent.openSession();
    let shell: ToolResult | undefined;
    session.subscribe((e) => {
      if (e.type === "call.settled") shell = e.result;
    });
    const result = await session.prompt("go");
    await agent.close();
    return { ws, result, shell };
  }

  it("a folder that became a symlink out of the workspace: the call is refused and no check runs the changed spec", async () => {
    const { result, shell } = await tamper(
      "E=$(mktemp -d) && echo 'process.exit(0)' > $E/a.test.mjs && mv t t.bak && ln -s $E t",
    );
    expect(shell).toMatchObject({ ok: false, code: "DENIED" });
    expect(JSON.stringify(shell)).toContain("could not be restored");
    expect(result).toMatchObject({ status: "completed", acceptance: "failed" });
    expect(result.evidence?.checks[0]).toMatchObject({ name: "t", passed: false });
    expect(result.evidence?.checks[0].output).toContain(
      "not run: the frozen t/a.test.mjs could not be put back to the spec's copy",
    );
  });

  it("a file put where its folder was: the call still settles (refused), and no check runs", async () => {
    const { result, shell } = await tamper("rm -rf t && echo x > t");
    expect(shell).toMatchObject({ ok: false, code: "DENIED" });
    expect(result).toMatchObject({ status: "completed", acceptance: "failed" });
    expect(result.evidence?.checks[0].output).toContain("not run: the frozen t/a.test.mjs");
  });

  it("a folder put in the file's place is removed and the spec's copy put back", async () => {
    const { ws, result, shell } = await tamper(
      "rm t/a.test.mjs && mkdir t/a.test.mjs && echo 'process.exit(0)' > t/a.test.mjs/index.js",
    );
    expect(JSON.stringify(shell)).toContain("spec's copy of t/a.test.mjs was restored");
    expect(readFileSync(path.join(ws, "t", "a.test.mjs"), "utf8")).toBe("process.exit(1)\n");
    expect(result).toMatchObject({ acceptance: "failed" });
    expect(result.evidence?.checks[0].output).not.toContain("not run");
  });
});

describe("the acceptance loop", () => {
  it("an interrupt sent as the follow-up goes out stops it before its turn starts, and the loop warns about nothing", async () => {
    const ws = addWorkspace();
    const model = scriptedModel(() => ({ text: "it should work now" }));
    const agent = createAgent({
      model,
      tools: builtinTools({ root: ws }),
      permissions: ALLOW_HIGH,
      acceptance: { workspace: ws, checks: [testsCheck], until: "passed", maxRounds: 3 },
    });
    const session = await agent.openSession();
    const events: string[] = [];
    session.subscribe((e) => {
      events.push(e.type);
      if (e.type === "follow-up.sent") void session.interrupt("stop the loop");
    });
    const warnings: string[] = [];
    const warn = vi.spyOn(console, "warn").mockImplementation((...a) => {
      warnings.push(a.map(String).join(" "));
    });
    try {
      const result = await session.prompt("fix add()");
      expect(result).toMatchObject({ status: "cancelled", acceptance: "failed", rounds: 1 });
    } finally {
      warn.mockRestore();
    }
    expect(model.requests).toHaveLength(1); // the follow-up never reached the model
    expect(events.filter((t) => t === "turn.started")).toHaveLength(1);
    expect(session.entries().find((e) => e.type === "acceptance")).toMatchObject({
      interrupted: true,
      rounds: 1,
    });
    expect(warnings).toEqual([]);
    await agent.close();
  });

  it("sends failing evidence back as follow-ups and stops after maxRounds with the last evidence", async () => {
    const ws = addWorkspace();
    let requests = 0;
    const model = scriptedModel(() => {
      requests++;
      return { text: `attempt ${requests}: it should work now` };
    });
    const agent = createAgent({
      model,
      tools: builtinTools({ root: ws }),
      permissions: ALLOW_HIGH,
      acceptance: { workspace: ws, checks: [testsCheck], until: "passed", maxRounds: 2 },
    });
    const session = await agent.openSession("loop");
    const events: AgentEvent[] = [];
    session.subscribe((e) => events.push(e));
    const result = await session.prompt("fix add()");
    expect(result).toMatchObject({
      status: "completed",
      acceptance: "failed",
      rounds: 2,
      steps: 3,
    });
    expect(result.text).toBe("attempt 3: it should work now");
    expect(result.evidence?.checks[0]).toMatchObject({ name: "tests", passed: false });
    expect(
      events.filter((e) => e.type === "follow-up.sent").map((e) => (e as { round: number }).round),
    ).toEqual([1, 2]);
    expect(events.filter((e) => e.type === "turn.started")).toHaveLength(3);
    // The follow-up carried the failing output to the model.
    const followUps = model.requests.map((r) => r.messages.at(-1)?.content);
    expect(String(followUps[1])).toContain("Acceptance checks did not pass (follow-up 1 of 2)");
    expect(String(followUps[1])).toContain("add(2, 2) returned 0, expected 4");
    const verdicts = session.entries().filter((e) => e.type === "acceptance");
    expect(verdicts).toHaveLength(1);
    expect(verdicts[0]).toMatchObject({ acceptance: "failed", rounds: 2 });
    await agent.close();
  });

  it("a follow-up that fixes the code ends the loop passed", async () => {
    const ws = addWorkspace();
    const model = scriptedModel([
      { text: "done, I think" },
      call("fix", "write_file", { path: "add.mjs", content: FIXED_ADD }),
      { text: "fixed the sign" },
    ]);
    const agent = createAgent({
      model,
      tools: builtinTools({ root: ws }),
      permissions: ALLOW_HIGH,
      acceptance: { workspace: ws, checks: [testsCheck], until: "passed" },
    });
    const session = await agent.openSession();
    const result = await session.prompt("fix add()");
    expect(result).toMatchObject({ status: "completed", acceptance: "passed", rounds: 1 });
    await agent.close();
  });

  it("interrupting the loop mid-check kills the check's process group and leaves acceptance pending", async () => {
    const ws = addWorkspace();
    const pidFile = path.join(tmpdir(), `keel-accept-child-${process.pid}-${Date.now()}.pid`);
    const agent = createAgent({
      model: scriptedModel([{ text: "done" }]),
      acceptance: {
        workspace: ws,
        until: "passed",
        checks: [{ name: "slow", command: `sleep 30 & echo $! > ${pidFile}; wait` }],
      },
    });
    const session = await agent.openSession();
    const result = session.prompt("go");
    for (let i = 0; i < 500 && !existsSync(pidFile); i++)
      await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 20));
    const pid = Number(readFileSync(pidFile, "utf8"));
    expect(running(pid)).toBe(true);
    await session.interrupt("stop");
    const r = await result;
    expect(r.status).toBe("completed");
    expect(r.acceptance).toBe("pending");
    expect(r.evidence?.checks).toEqual([]);
    expect(running(pid)).toBe(false);
    const verdict = session.entries().find((e) => e.type === "acceptance");
    expect(verdict).toMatchObject({ acceptance: "pending", interrupted: true });
    await agent.close();
  });
});

describe("a run that runs out of budget", () => {
  const docsCheck = { name: "docs", command: "test -f NOTES.md" };

  it("ends budget_exhausted with its partial work checked: the fix it made passes, what it did not reach fails, and no follow-up is sent", async () => {
    const ws = addWorkspace();
    const model = scriptedModel([
      call("fix", "write_file", { path: "add.mjs", content: FIXED_ADD }),
      call("notes", "write_file", { path: "NOTES.md", content: "add() adds\n" }),
      { text: "fixed and documented" },
    ]);
    const agent = createAgent({
      model,
      tools: builtinTools({ root: ws }),
      permissions: ALLOW_HIGH,
      limits: { maxSteps: 1 },
      acceptance: { workspace: ws, checks: [testsCheck, docsCheck], until: "passed" },
    });
    const session = await agent.openSession("budget");
    const events: AgentEvent[] = [];
    session.subscribe((e) => events.push(e));
    const result = await session.prompt("fix add() and write NOTES.md");
    expect(result).toMatchObject({ status: "budget_exhausted", acceptance: "failed", rounds: 0 });
    expect(readFileSync(path.join(ws, "add.mjs"), "utf8")).toBe(FIXED_ADD); // the partial work
    expect(existsSync(path.join(ws, "NOTES.md"))).toBe(false);
    const checks = result.evidence?.checks ?? [];
    expect(checks.map((c) => [c.name, c.passed])).toEqual([
      ["tests", true],
      ["docs", false],
    ]);
    for (const c of checks) expect(c.artifactVersion).toBe(result.evidence?.artifactVersion);
    expect(events.some((e) => e.type === "follow-up.sent")).toBe(false);
    expect(model.requests).toHaveLength(1);
    const entries = session.entries();
    expect(entries.find((e) => e.type === "turn_end")).toMatchObject({
      status: "budget_exhausted",
    });
    expect(entries.find((e) => e.type === "acceptance")).toMatchObject({
      acceptance: "failed",
      reason: "turn",
      rounds: 0,
    });
    await agent.close();
  });

  it("a follow-up turn of the loop that runs out of budget ends the run budget_exhausted with its partial work checked once, and no second follow-up", async () => {
    const ws = addWorkspace();
    const model = scriptedModel([
      { text: "all done" },
      // Follow-up 1: fixes add(), then its step budget ends the turn before NOTES.md.
      call("fix", "write_file", { path: "add.mjs", content: FIXED_ADD }),
      call("notes", "write_file", { path: "NOTES.md", content: "add() adds\n" }),
    ]);
    const agent = createAgent({
      model,
      tools: builtinTools({ root: ws }),
      permissions: ALLOW_HIGH,
      limits: { maxSteps: 1 },
      acceptance: { workspace: ws, checks: [testsCheck, docsCheck], until: "passed", maxRounds: 3 },
    });
    const session = await agent.openSession();
    const events: AgentEvent[] = [];
    session.subscribe((e) => events.push(e));
    const result = await session.prompt("fix add() and write NOTES.md");
    expect(result).toMatchObject({ status: "budget_exhausted", acceptance: "failed", rounds: 1 });
    // The evidence is of what the follow-up left: its fix passes, what it did not reach fails.
    expect(result.evidence?.checks.map((c) => [c.name, c.passed])).toEqual([
      ["tests", true],
      ["docs", false],
    ]);
    for (const c of result.evidence?.checks ?? [])
      expect(c.artifactVersion).toBe(result.evidence?.artifactVersion);
    expect(events.filter((e) => e.type === "follow-up.sent")).toHaveLength(1);
    expect(model.requests).toHaveLength(2);
    expect(session.entries().find((e) => e.type === "acceptance")).toMatchObject({
      acceptance: "failed",
      rounds: 1,
    });
    // Nothing is stale: accept() has nothing to re-run.
    const again = await session.accept();
    expect(again).toMatchObject({ ok: true, ran: [], acceptance: "failed" });
    const ends = session.entries().filter((e) => e.type === "turn_end");
    expect(ends.map((e) => (e as { status: string }).status)).toEqual([
      "completed",
      "budget_exhausted",
    ]);
    await agent.close();
  });
});

describe("handoff", () => {
  it("writes verified facts with evidence apart from assumptions, and the next session re-checks them before new work", async () => {
    const ws = addWorkspace();
    writeFileSync(path.join(ws, "add.mjs"), FIXED_ADD);
    const options = {
      workspace: ws,
      runAfterTurn: false,
      checks: [testsCheck, { name: "docs", command: "test -f README.md" }],
    };
    const first = createAgent({
      model: scriptedModel([{ text: "add() works" }]),
      acceptance: options,
    });
    const s1 = await first.openSession("one");
    await s1.prompt("make add() work");
    await s1.accept();
    const handed = await s1.handoff({ assumptions: ["callers pass numbers"] });
    if ("ok" in handed) throw new Error(handed.message);
    const { record, markdown } = handed;
    expect(record.goal).toBe("make add() work");
    expect(record.progress).toBe("add() works");
    expect(record.verified.map((v) => v.evidence.name)).toEqual(["tests"]);
    expect(record.verified[0].evidence.artifactVersion).toBe(record.artifactVersion);
    expect(record.unverified).toEqual(['check "docs" failed', "callers pass numbers"]);
    expect(record.nextSteps).toEqual(['make check "docs" pass (failed)']);
    expect(markdown).toContain("## Verified facts");
    expect(markdown).toContain('check "tests" passes');
    expect(s1.entries().some((e) => e.type === "handoff")).toBe(true);
    await first.close();

    // Meanwhile someone breaks add(): the next session finds out before its first request.
    writeFileSync(path.join(ws, "add.mjs"), "export const add = () => 5;\n");
    const model = scriptedModel([{ text: "I see the regression" }]);
    const second = createAgent({ model, acceptance: options });
    const s2 = await second.openSession("two", { handoff: record });
    await s2.prompt("add subtraction");
    const first2 = model.requests[0].messages;
    const note = first2.find((m) => m.role === "user" && String(m.content).includes("Handoff"));
    expect(String(note?.content)).toContain('check "tests" no longer passes');
    expect(String(note?.content)).toContain("add(2, 2) returned 5");
    // Before the prompt itself.
    expect(first2.indexOf(note!)).toBeLessThan(
      first2.findIndex((m) => m.content === "add subtraction"),
    );
    await second.close();
  });
});
