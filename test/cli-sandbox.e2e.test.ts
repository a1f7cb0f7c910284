// `keel run` and the shell's sandbox, with the real `keel` binary, a loopback model and the real
// bwrap: with bubblewrap a `--yes` shell call runs sandboxed (its write outside the workspace
// fails); without it (`KEEL_BWRAP` naming a missing binary) `keel run` says so once and asks
// before every shell call, `--yes` or not: with no terminal to ask, the calls are denied.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sandboxSupport } from "../tools/builtin/sandbox.ts";
import { startFakeOpenAIServer, streamReply } from "./support/fake-openai-server.ts";
import { runKeel } from "./support/run-keel.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const base = () => {
  const d = mkdtempSync(join(existsSync("/var/tmp") ? "/var/tmp" : tmpdir(), "keel-cli-sb-"));
  dirs.push(d);
  return d;
};

/** `keel run --yes --store memory` in `cwd` whose model calls `shell` with each command, then ends. */
async function runShell(cwd: string, commands: string[], env: Record<string, string> = {}) {
  const fake = await startFakeOpenAIServer();
  for (const [i, command] of commands.entries())
    fake.enqueue(
      streamReply({ calls: [{ id: `c${i}`, name: "shell", args: JSON.stringify({ command }) }] }),
    );
  fake.enqueue(streamReply({ text: "done" }));
  try {
    return await runKeel(["run", "--yes", "--json", "--store", "memory", "go"], {
      cwd,
      env: {
        OPENAI_BASE_URL: fake.baseURL,
        KEEL_MODEL: "m",
        KEEL_CONTEXT_WINDOW: "32768",
        ...env,
      },
      unset: ["OPENAI_API_KEY", "KEEL_PROVIDER", "KEEL_BWRAP"],
    });
  } finally {
    await fake.close();
  }
}

describe("keel run and the shell's sandbox", { timeout: 120_000 }, () => {
  it("without bubblewrap: one line says so, and every shell call is asked (denied with no terminal), --yes or not", async () => {
    const cwd = join(base(), "ws");
    mkdirSync(cwd);
    const run = await runShell(cwd, ["touch one", "touch two"], {
      KEEL_BWRAP: "/nonexistent/bwrap",
    });
    expect(run.code, run.stderr).toBe(0);
    const notes = run.stderr.split("\n").filter((l) => l.includes("not sandboxed"));
    expect(notes).toHaveLength(1);
    expect(notes[0]).toContain("bubblewrap is not at /nonexistent/bwrap");
    expect(notes[0]).toContain("each one is asked");
    expect(existsSync(join(cwd, "one"))).toBe(false);
    expect(existsSync(join(cwd, "two"))).toBe(false);
    expect(run.stdout).toContain("shell is not sandboxed here");
  });

  it.skipIf(!sandboxSupport().ok && process.env.CI !== "true")(
    "with bubblewrap: --yes runs shell sandboxed (the workspace is written, nothing outside it)",
    async () => {
      const root = base();
      const cwd = join(root, "ws");
      mkdirSync(cwd);
      const outside = join(root, "outside.txt");
      const run = await runShell(cwd, [`touch inside; touch ${outside}`]);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).not.toContain("not sandboxed");
      expect(existsSync(join(cwd, "inside"))).toBe(true);
      expect(existsSync(outside)).toBe(false);
    },
  );
});
