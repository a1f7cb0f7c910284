// What a newcomer types in their first hour, run as they would run it (real `keel` processes, no
// TTY, a loopback server speaking Chat Completions where a model is needed): the README's
// local-server line, `keel run --inspect` in a script, the demo with a key in the environment.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startFakeOpenAIServer, streamReply } from "./support/fake-openai-server.ts";

const ROOT = join(import.meta.dirname, "..");
const BIN = join(ROOT, "cli", "bin.js");
const cwd = mkdtempSync(join(tmpdir(), "keel-cli-newcomer-"));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

const PROVIDER_VARS = [
  "OPENAI_API_KEY",
  "OPENAI_BASE_URL",
  "KEEL_MODEL",
  "KEEL_CONTEXT_WINDOW",
  "KEEL_PROVIDER",
  "KEEL_DEMO_MODEL",
];

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Whether it had to be killed after `limitMs`. */
  hung: boolean;
}

/** Runs `keel` without a TTY and without provider variables but `env`; kills it after `limitMs`. */
function keel(args: string[], env: Record<string, string> = {}, limitMs = 60_000): Promise<Ran> {
  const clean: NodeJS.ProcessEnv = { ...process.env };
  for (const k of PROVIDER_VARS) delete clean[k];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env: { ...clean, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let hung = false;
    const timer = setTimeout(() => {
      hung = true;
      child.kill("SIGKILL");
    }, limitMs);
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, hung });
    });
  });
}

/** Every `VAR=value … npm start` line of the README and the guide pages. */
function localServerLines(): { file: string; line: string }[] {
  const files = ["README.md", "docs/providers.md"];
  return files.flatMap((file) =>
    readFileSync(join(ROOT, file), "utf8")
      .split("\n")
      .filter((l) => /^OPENAI_BASE_URL=\S+ .*npm start/.test(l))
      .map((line) => ({ file, line })),
  );
}

describe("a newcomer's first hour", { timeout: 120_000 }, () => {
  it("the local-server line of the README and docs/providers.md runs as written against a Chat Completions server", async () => {
    const found = localServerLines();
    expect(found.length).toBeGreaterThan(0);
    for (const { file, line } of found) {
      const vars = Object.fromEntries(
        line
          .split(" npm start")[0]
          .split(/\s+/)
          .map((pair) => pair.split("=") as [string, string]),
      );
      const server = await startFakeOpenAIServer();
      server.enqueue(streamReply({ text: "Done: nothing to fix." }));
      // `npm start` is `keel demo`; the server stands where the line's URL points.
      const r = await keel(["demo", "--no-inspect", "--store", "memory"], {
        ...vars,
        OPENAI_BASE_URL: server.baseURL,
      }).finally(() => server.close());
      expect(r.code, `${file}: ${line}\n${r.stderr}`).toBe(0);
      expect(server.requests[0]?.body).toMatchObject({ model: vars.KEEL_MODEL });
    }
  });

  it("run --inspect off a terminal ends with its turn and says the inspector closed; it never waits for Ctrl-C", async () => {
    const server = await startFakeOpenAIServer();
    server.enqueue(streamReply({ text: "Hello." }));
    const r = await keel(
      ["run", "--inspect", "--store", "memory", "say hello"],
      { OPENAI_BASE_URL: server.baseURL, KEEL_MODEL: "m", KEEL_CONTEXT_WINDOW: "32768" },
      45_000,
    ).finally(() => server.close());
    expect(r.hung).toBe(false);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/inspector: http:\/\/127\.0\.0\.1:\d+/);
    expect(r.stderr).toContain(
      "inspector closed: the turn ended (keel run --inspect --keep-open keeps it open until Ctrl-C)",
    );
  });

  it("the demo with a key in the environment says it talks to a real model and how to get the scripted one", async () => {
    const server = await startFakeOpenAIServer();
    server.enqueue(streamReply({ text: "Done." }));
    const r = await keel(["demo", "--no-inspect", "--store", "memory"], {
      OPENAI_BASE_URL: server.baseURL,
      KEEL_MODEL: "m",
      KEEL_CONTEXT_WINDOW: "32768",
    }).finally(() => server.close());
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(
      `a real model, because OPENAI_BASE_URL is set (${server.baseURL}); keel demo --scripted (or KEEL_DEMO_MODEL=scripted) runs the scripted one`,
    );
  });

  it("--scripted and KEEL_DEMO_MODEL=scripted run the scripted demo even with a (stale) key exported: no request leaves", async () => {
    const server = await startFakeOpenAIServer();
    const stale = { OPENAI_API_KEY: "sk-stale", OPENAI_BASE_URL: server.baseURL };
    try {
      for (const [args, env] of [
        [["--scripted"], stale],
        [[], { ...stale, KEEL_DEMO_MODEL: "scripted" }],
      ] as const) {
        const r = await keel(["demo", "--json", "--no-inspect", "--store", "memory", ...args], env);
        expect(r.stderr).toBe("");
        expect(r.code).toBe(0);
        expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!)).toMatchObject({
          status: "completed",
          edited: true,
        });
      }
      expect(server.requests).toHaveLength(0);
      const bad = await keel(["demo", "--no-inspect"], { KEEL_DEMO_MODEL: "real" });
      expect(bad.code).toBe(3);
      expect(bad.stderr).toContain('KEEL_DEMO_MODEL must be "scripted" (or unset)');
    } finally {
      await server.close();
    }
  });

  it("a server that cannot be reached is named in the turn's failure", async () => {
    const r = await keel(["run", "--store", "memory", "hi"], {
      OPENAI_BASE_URL: "http://keel-no-such-host.invalid/v1",
      KEEL_MODEL: "m",
      KEEL_CONTEXT_WINDOW: "32768",
    });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/turn failed: .*keel-no-such-host\.invalid/);
  });
});
