// The built-in `shell` under bubblewrap (tools/builtin/sandbox.ts), with the real `bwrap`: a
// command writes the workspace and nothing else, sees a private /tmp, cannot reach a loopback
// listener of this process (another network namespace) unless `network: true`, cannot touch
// Keel's own `.keel/` even without naming it, and leaves no process behind. Under CI=true a
// machine without a working bwrap fails here instead of skipping (`.ci/run` installs it).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ToolResult } from "../contracts/tool-result.ts";
import { builtinTools } from "../tools/builtin/index.ts";
import type { SandboxOptions } from "../tools/builtin/sandbox.ts";
import { sandboxSupport } from "../tools/builtin/sandbox.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import { createRegistry } from "../tools/registry.ts";
import { toToolResult } from "../tools/tool-output.ts";

const support = sandboxSupport();
const inCi = process.env.CI === "true";

let base: string;
let ws: string;
let outside: string;
/** A file in the host's /tmp: the sandbox's private /tmp must not show it. */
let hostTmp: string;

beforeAll(() => {
  // Not under /tmp: the sandbox's private /tmp would hide it, and a refused write must be one
  // to a place the command can see.
  base = mkdtempSync(path.join(existsSync("/var/tmp") ? "/var/tmp" : tmpdir(), "keel-sandbox-"));
  hostTmp = mkdtempSync(path.join(tmpdir(), "keel-sandbox-host-"));
  ws = path.join(base, "ws");
  outside = path.join(base, "outside");
  mkdirSync(path.join(ws, ".keel"), { recursive: true });
  mkdirSync(outside);
  writeFileSync(path.join(ws, ".keel", "keel.db"), "store");
});
afterAll(() => {
  rmSync(base, { recursive: true, force: true });
  rmSync(hostTmp, { recursive: true, force: true });
});

/** Prepares and executes `shell` as the runtime does, in a workspace sandboxed with `options`. */
async function shell(
  command: string,
  options: SandboxOptions = {},
  signal = new AbortController().signal,
): Promise<ToolResult> {
  const registry = createRegistry(builtinTools({ root: ws, sandbox: options }));
  const prepared = prepareCall(
    { id: "c1", name: "shell", argumentsText: JSON.stringify({ command }) },
    registry,
  );
  if (!prepared.ok) return prepared.error;
  const ctx = {
    callId: "c1",
    signal,
    idempotencyKey: "k",
    sessionId: "s",
    onUpdate: () => {},
    log: pino({ level: "silent" }),
  };
  return toToolResult(await prepared.call.tool.execute(prepared.call.args, ctx), "shell");
}

const text = (r: ToolResult) => (r.ok ? r.content : `${r.code}: ${r.message}`);

/** A loopback listener of this process, counting the connections it accepted. */
async function listener(): Promise<{ port: number; accepted: () => number; server: Server }> {
  let accepted = 0;
  const server = createServer((socket) => {
    accepted++;
    socket.on("error", () => {}); // the command may close first
    socket.end("hello\n");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return { port, accepted: () => accepted, server };
}

describe("the shell's bubblewrap sandbox", () => {
  it("bubblewrap works on this machine (a failure under CI=true, a skip elsewhere)", (ctx) => {
    if (!support.ok && !inCi) ctx.skip();
    expect(support.ok ? "" : support.reason).toBe("");
  });

  describe.skipIf(!support.ok && !inCi)("a sandboxed command", { timeout: 60_000 }, () => {
    it("writes the workspace, but nothing outside it; its /tmp is its own", async () => {
      const target = path.join(outside, "escaped.txt");
      const probe = `/tmp/keel-sandbox-probe-${process.pid}-${Date.now()}`;
      const r = await shell(
        `echo in > inside.txt; echo out > ${target}; echo "outside:$?"; echo t > ${probe}; ls /tmp`,
      );
      expect(text(r)).toContain("exit code: 0");
      expect(text(r)).toMatch(/outside:1/);
      expect(text(r)).toContain("Read-only file system");
      expect(readFileSync(path.join(ws, "inside.txt"), "utf8")).toBe("in\n");
      expect(existsSync(target)).toBe(false);
      expect(existsSync(probe)).toBe(false);
      expect(text(r)).not.toContain(path.basename(hostTmp)); // the host's /tmp is not seen
    });

    it("cannot reach a loopback listener outside its network namespace; network: true can", async () => {
      const l = await listener();
      try {
        const probe = `exec 3<>/dev/tcp/127.0.0.1/${l.port} && head -c 5 <&3; echo "rc:$?"`;
        const closed = await shell(probe);
        expect(text(closed)).not.toContain("hello");
        expect(text(closed)).toMatch(/rc:1/);
        expect(l.accepted()).toBe(0);
        const open = await shell(probe, { network: true });
        expect(text(open)).toContain("hello");
        expect(l.accepted()).toBe(1);
      } finally {
        l.server.close();
      }
    });

    it("cannot change Keel's .keel/ even without naming it", async () => {
      const r = await shell('for d in .k*; do rm -f "$d"/keel.db; echo x > "$d"/new; done; true');
      expect(text(r)).toContain("exit code: 0");
      expect(readFileSync(path.join(ws, ".keel", "keel.db"), "utf8")).toBe("store");
      expect(existsSync(path.join(ws, ".keel", "new"))).toBe(false);
    });

    it("a wider sandbox: writable paths outside the workspace are writable", async () => {
      const r = await shell(`echo w > ${path.join(outside, "allowed.txt")}`, {
        writable: [outside],
      });
      expect(text(r)).toContain("exit code: 0");
      expect(readFileSync(path.join(outside, "allowed.txt"), "utf8")).toBe("w\n");
    });

    it("leaves no background process behind, on exit and on abort", async () => {
      const marker = path.join(ws, "late.txt");
      const r = await shell(`(sleep 1; touch ${marker}) & echo started`);
      expect(text(r)).toContain("started");
      const abort = new AbortController();
      setTimeout(() => abort.abort(), 300);
      const start = performance.now();
      const cancelled = await shell(
        `(sleep 1; touch ${marker}) & sleep 30`,
        {},
        abort.signal,
      ).catch((e: Error) => ({ ok: false as const, code: e.name, message: e.message }));
      expect(cancelled).toMatchObject({ ok: false, code: "AbortError" });
      expect(performance.now() - start).toBeLessThan(5_000);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(existsSync(marker)).toBe(false);
    });

    it("says so in the tool's description", () => {
      const [tool] = builtinTools({ root: ws }).filter((t) => t.name === "shell");
      expect(tool.description).toContain("Commands run in a sandbox");
      expect(tool.description).toContain("no network");
      const [free] = builtinTools({ root: ws, sandbox: false }).filter((t) => t.name === "shell");
      expect(free.description).not.toContain("sandbox");
    });
  });

  it("sandbox: false runs unconfined (the control: the same write outside succeeds)", async () => {
    const target = path.join(outside, "unconfined.txt");
    const registry = createRegistry(builtinTools({ root: ws, sandbox: false }));
    const prepared = prepareCall(
      {
        id: "c1",
        name: "shell",
        argumentsText: JSON.stringify({ command: `echo out > ${target}` }),
      },
      registry,
    );
    if (!prepared.ok) throw new Error(prepared.error.message);
    await prepared.call.tool.execute(prepared.call.args, {
      callId: "c1",
      signal: new AbortController().signal,
      idempotencyKey: "k",
      sessionId: "s",
      onUpdate: () => {},
      log: pino({ level: "silent" }),
    });
    expect(readFileSync(target, "utf8")).toBe("out\n");
  });

  it("a writable path that does not exist is refused when the tools are built", () => {
    expect(() => builtinTools({ root: ws, sandbox: { writable: ["no/such/dir"] } })).toThrow(
      /sandbox.writable path "no\/such\/dir" does not exist/,
    );
  });
});
