// `keel demo | head` and `keel demo --json | head`: when the reader of stdout goes away, keel
// stops its work, removes its temporary workspace and exits 0 without a word on stderr.
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const BIN = join(import.meta.dirname, "..", "cli", "bin.js");

/** Runs keel with a private TMPDIR, reads one line of stdout, then closes the pipe. */
async function readOneLineAndClose(args: string[]) {
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
        if (buffer.includes("\n")) {
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
