// `--port` puts the inspector on a chosen port for every command that serves it: `keel demo`,
// `keel run` (and `resume`), `keel serve` (with `--inspect`, its URL on stderr since stdout speaks
// the protocol) and `keel inspect`. Each runs as a real child process; the test reads the URL it
// prints and loads the page from that port.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type FakeOpenAIServer,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";

const BIN = join(import.meta.dirname, "..", "cli", "bin.js");
let cwd = "";
let fake: FakeOpenAIServer;

/** A port nothing listens on right now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Starts `keel …` and resolves with the first inspector URL it prints (stdout or stderr). */
function start(args: string[], env: Record<string, string> = {}) {
  const child: ChildProcess = spawn(process.execPath, [BIN, ...args], {
    cwd,
    env: { ...process.env, OPENAI_API_KEY: "", OPENAI_BASE_URL: "", ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let output = "";
  const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
  const url = new Promise<string>((resolve, reject) => {
    const read = (d: Buffer) => {
      output += d;
      const found = /http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]+/.exec(output);
      if (found) resolve(found[0]);
    };
    child.stdout!.on("data", read);
    child.stderr!.on("data", read);
    void exited.then(() => reject(new Error(`keel ${args.join(" ")} exited first:\n${output}`)));
  });
  url.catch(() => {}); // a test that expects an early exit does not read the URL
  /** Resolves once the output holds `text`. */
  const printed = (text: string) =>
    new Promise<void>((resolve) => {
      const poll = () => (output.includes(text) ? resolve() : setTimeout(poll, 20));
      poll();
    });
  return { child, url, exited, printed, output: () => output };
}

/** The page loads from the URL's port. */
async function pageLoads(url: string): Promise<boolean> {
  const res = await fetch(url);
  return res.status === 200 && (await res.text()).includes("keel");
}

beforeAll(async () => {
  cwd = mkdtempSync(join(tmpdir(), "keel-port-"));
  fake = await startFakeOpenAIServer();
});
afterAll(async () => {
  await fake?.close();
  rmSync(cwd, { recursive: true, force: true });
});

describe("--port for every command that serves the inspector", () => {
  it("keel demo --port serves the inspector on that port", async () => {
    const port = await freePort();
    const run = start(["demo", "--port", String(port), "--keep-open", "--store", "memory"]);
    const url = await run.url;
    expect(new URL(url).port).toBe(String(port));
    expect(await pageLoads(url)).toBe(true);
    await run.printed("inspector still open");
    run.child.kill("SIGINT");
    expect(await run.exited).toBe(0);
  }, 60_000);

  it("keel run --port serves the inspector on that port (the port implies --inspect)", async () => {
    fake.enqueue(streamReply({ text: "hello" }));
    const port = await freePort();
    const run = start(["run", "--port", String(port), "--store", "memory", "say hello"], {
      OPENAI_BASE_URL: fake.baseURL,
      KEEL_MODEL: "fake-model",
      KEEL_CONTEXT_WINDOW: "32768",
    });
    const url = await run.url;
    expect(new URL(url).port).toBe(String(port));
    expect(await pageLoads(url)).toBe(true);
    run.child.kill("SIGINT");
    await run.exited;
  }, 60_000);

  it("keel serve --stdio --port prints the inspector's URL on stderr, never on the protocol's stdout", async () => {
    const script = join(cwd, "script.json");
    writeFileSync(script, JSON.stringify([{ text: "hi" }]));
    const port = await freePort();
    const run = start([
      "serve",
      "--stdio",
      "--port",
      String(port),
      "--provider",
      "scripted",
      "--script",
      script,
      "--store",
      "memory",
    ]);
    let stdout = "";
    run.child.stdout!.on("data", (d) => {
      stdout += d;
    });
    const url = await run.url;
    expect(new URL(url).port).toBe(String(port));
    expect(await pageLoads(url)).toBe(true);
    run.child.stdin!.end();
    expect(await run.exited).toBe(0);
    expect(stdout).not.toContain("http://127.0.0.1");
  }, 60_000);

  it("a port in use is one line saying so, exit code 3", async () => {
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
    const address = busy.address();
    const port = typeof address === "object" && address ? address.port : 0;
    try {
      const run = start(["demo", "--port", String(port), "--store", "memory"]);
      expect(await run.exited).toBe(3);
      expect(run.output()).toContain(`port ${port} is in use`);
    } finally {
      busy.close();
    }
  }, 60_000);
});
