// `keel demo | head`, `keel demo --json | head` and `keel show … | head`: when the reader of
// stdout goes away, keel stops its work, removes its temporary workspace and exits 0 without a
// word on stderr.
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgent } from "../index.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";

const BIN = join(import.meta.dirname, "..", "cli", "bin.js");

/**
 * Runs keel with a private TMPDIR, reads one line of stdout (with `bytes`: its first chunk, like
 * `head -c`), then closes the pipe.
 */
async function readOneLineAndClose(args: string[], until: "line" | "bytes" = "line") {
  const tmp = mkdtempSync(join(tmpdir(), "keel-epipe-"));
  try {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: tmp,
      env: { ...process.env, TMPDIR: tmp, KEEL_LOG: "", OPENAI_API_KEY: "", OPENAI_BASE_URL: "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const first = await new Promise<string>((resolve) => {
      let buffer = "";
      child.stdout.on("data", (d) => {
        buffer += d;
        if (until === "bytes" || buffer.includes("\n")) {
          child.stdout.destroy(); // the reader goes away, like head after one line
          resolve(buffer.split("\n")[0]);
        }
      });
    });
    const [code, signal] = await new Promise<[number | null, string | null]>((resolve) =>
      child.on("exit", (c, s) => resolve([c, s])),
    );
    const left = readdirSync(tmp).filter((name) => name.startsWith("keel-demo-"));
    return { first, code, signal, stderr, left };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

describe("keel commands whose reader closes stdout", () => {
  it("keel demo | head exits 0 quietly and leaves no temporary workspace", async () => {
    const ran = await readOneLineAndClose(["demo", "--store", "memory"]);
    expect(ran.first).toMatch(/inspector|keel demo/);
    expect({ code: ran.code, signal: ran.signal, stderr: ran.stderr, left: ran.left }).toEqual({
      code: 0,
      signal: null,
      stderr: "",
      left: [],
    });
  });

  it("keel demo --json | head exits 0 quietly and leaves no temporary workspace", async () => {
    const ran = await readOneLineAndClose(["demo", "--json", "--no-inspect", "--store", "memory"]);
    expect(() => JSON.parse(ran.first)).not.toThrow();
    expect({ code: ran.code, signal: ran.signal, stderr: ran.stderr, left: ran.left }).toEqual({
      code: 0,
      signal: null,
      stderr: "",
      left: [],
    });
  });
});

describe("keel show whose reader closes stdout", () => {
  // Enough turns that what `show` prints is well over a pipe's buffer (64 KiB): its write is
  // still going on when the reader goes away, so it meets the EPIPE.
  const dir = mkdtempSync(join(tmpdir(), "keel-epipe-store-"));
  const store = join(dir, "keel.db");
  beforeAll(async () => {
    const sessions = sqliteStore(store);
    const agent = createAgent({
      model: scriptedModel(() => ({ text: "an answer" })),
      tools: [],
      store: sessions,
    });
    const session = agent.session("long");
    for (let i = 0; i < 300; i++) await session.prompt(`question ${i}`);
    await agent.close();
    await sessions.close();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("keel show <id> | head exits 0 quietly", async () => {
    const ran = await readOneLineAndClose(["show", "long", "--store", store]);
    expect(ran.first).toMatch(/^session long · \d+ entries/);
    expect({ code: ran.code, signal: ran.signal, stderr: ran.stderr }).toEqual({
      code: 0,
      signal: null,
      stderr: "",
    });
  });

  it("keel show --json <id> | head -c exits 0 quietly", async () => {
    // One line of JSON: the reader leaves after the first bytes, like head -c.
    const ran = await readOneLineAndClose(["show", "--json", "long", "--store", store], "bytes");
    expect(ran.first.startsWith('{"sessionId":"long"')).toBe(true);
    expect({ code: ran.code, signal: ran.signal, stderr: ran.stderr }).toEqual({
      code: 0,
      signal: null,
      stderr: "",
    });
  });
});
