// Acceptance against processes that outlive their command (issue 27, findings 2 and 13): a
// process left running that keeps rewriting the frozen spec, and background processes that
// leave their group and clear their environment (`env -i setsid`).
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { builtinTools } from "../tools/builtin/index.ts";
import { running } from "../tools/builtin/process-tree.ts";
import type { ToolContext } from "../tools/types.ts";
import { addWorkspace } from "./support/acceptance-fixture.ts";

const testsCheck = { name: "tests", command: "node add.test.mjs", files: ["add.test.mjs"] };
const PASSING_TEST = 'console.log("add: ok");\n';

const daemons: ChildProcess[] = [];
afterEach(() => {
  for (const d of daemons.splice(0)) d.kill("SIGKILL");
});

const until = async (ok: () => boolean, ms = 5000) => {
  for (const end = Date.now() + ms; !ok() && Date.now() < end; )
    await new Promise((r) => setTimeout(r, 20));
};

describe("evidence whose frozen spec changed while its check ran does not count (invariant 14 of docs/architecture.md)", () => {
  it("a process left running that keeps rewriting the frozen test to pass (5 of 9 runs were accepted before) never gets add.mjs accepted: each such check fails as not counted", async () => {
    const ws = addWorkspace(); // add.mjs stays buggy throughout
    // The daemon a model's command left behind: it rewrites the frozen test every few ms.
    const daemon = spawn(
      process.execPath,
      [
        "-e",
        `const fs=require("fs");setInterval(()=>{try{fs.writeFileSync(${JSON.stringify(path.join(ws, "add.test.mjs"))},${JSON.stringify(PASSING_TEST)})}catch{}},2)`,
      ],
      { detached: true, stdio: "ignore" },
    );
    daemons.push(daemon);
    await until(() => readFileSync(path.join(ws, "add.test.mjs"), "utf8") === PASSING_TEST);
    const agent = createAgent({
      model: scriptedModel([]),
      acceptance: { workspace: ws, runAfterTurn: false, checks: [testsCheck] },
    });
    const session = await agent.openSession("daemon");
    const outcomes: string[] = [];
    const outputs: string[] = [];
    for (let i = 0; i < 9; i++) {
      const r = await session.accept({ all: true });
      if (!r.ok) throw new Error(`refused: ${r.message}`);
      outcomes.push(r.acceptance);
      outputs.push(r.evidence.checks[0].output);
    }
    expect(outcomes.filter((a) => a === "passed")).toEqual([]);
    expect(
      outputs.some((o) =>
        /not counted: the frozen add\.test\.mjs changed while the check ran/.test(o),
      ),
    ).toBe(true);
    await agent.close();
  }, 60_000);
});

describe("background processes that leave their group and clear their environment are killed", () => {
  it("a check command's `env -i setsid sleep 30 &` does not outlive the check", async () => {
    const ws = addWorkspace();
    const pidFile = path.join(tmpdir(), `keel-check-setsid-${process.pid}-${Date.now()}.pid`);
    const agent = createAgent({
      model: scriptedModel([]),
      acceptance: {
        workspace: ws,
        runAfterTurn: false,
        // The pause lets the job finish `setsid` before the shell exits (else the group kill
        // catches it by chance).
        checks: [
          {
            name: "starts a daemon",
            command: `env -i setsid sleep 30 & echo $! > ${pidFile}; sleep 0.3`,
          },
        ],
      },
    });
    const session = await agent.openSession("check-daemon");
    const r = await session.accept();
    expect(r).toMatchObject({ ok: true });
    const pid = Number(readFileSync(pidFile, "utf8"));
    await until(() => !running(pid), 3000);
    expect(running(pid), `check leftover ${pid} survived`).toBe(false);
    await agent.close();
  }, 30_000);

  it("the shell tool's `env -i setsid sleep 30 &` does not outlive the call, also when the command runs on for a while", async () => {
    const ws = addWorkspace();
    const shell = builtinTools({ root: ws, sandbox: false }).find((t) => t.name === "shell")!;
    const ctx = {
      callId: "c",
      signal: new AbortController().signal,
      onUpdate: () => {},
      log: { debug() {}, info() {}, warn() {}, error() {} },
    } as unknown as ToolContext;
    for (const command of [
      'env -i setsid sleep 30 & echo "pid:$!"; sleep 0.3',
      '(env -i setsid sleep 30 & echo "pid:$!"; sleep 1); sleep 0.5',
    ]) {
      const result = await shell.execute({ command }, ctx);
      const text = typeof result === "string" ? result : JSON.stringify(result);
      const pid = Number(/pid:(\d+)/.exec(text)?.[1]);
      expect(pid).toBeGreaterThan(1);
      await until(() => !running(pid), 3000);
      expect(running(pid), `${command}: ${pid} survived`).toBe(false);
    }
  }, 30_000);
});
