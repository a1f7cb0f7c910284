import { execFileSync } from "node:child_process";
import {
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ToolResult } from "../contracts/tool-result.ts";
import { openWorkspaceFile } from "../tools/builtin/common.ts";
import { builtinTools } from "../tools/builtin/index.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import { createRegistry } from "../tools/registry.ts";
import { toToolResult } from "../tools/tool-output.ts";

const base = realpathSync(mkdtempSync(path.join(tmpdir(), "keel-hostile-tools-")));
const ws = path.join(base, "ws");
const outside = path.join(base, "outside");
let registry: ReturnType<typeof createRegistry>;
const started: number[] = [];

beforeAll(() => {
  mkdirSync(ws, { recursive: true });
  mkdirSync(outside);
  writeFileSync(path.join(outside, "secret.txt"), "TOP SECRET\n");
  linkSync(path.join(outside, "secret.txt"), path.join(ws, "linked.txt"));
  execFileSync("mkfifo", [path.join(ws, "pipe")]);
  // Unconfined: these tests are about the process-tree kill without a pid namespace.
  registry = createRegistry(builtinTools({ root: ws, sandbox: false }));
});

afterAll(() => {
  for (const pid of started) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
  rmSync(base, { recursive: true, force: true });
});

async function run(
  name: string,
  args: unknown,
  extra: { signal?: AbortSignal; onUpdate?: (p: unknown) => void } = {},
  tools = registry,
): Promise<ToolResult | Error> {
  const prepared = prepareCall({ id: "call_1", name, argumentsText: JSON.stringify(args) }, tools);
  if (!prepared.ok) return prepared.error;
  const ctx = {
    callId: "call_1",
    sessionId: "s",
    signal: extra.signal ?? new AbortController().signal,
    idempotencyKey: "k",
    onUpdate: extra.onUpdate ?? (() => {}),
    log: pino({ level: "silent" }),
  };
  try {
    return toToolResult(await prepared.call.tool.execute(prepared.call.args, ctx), name);
  } catch (err) {
    return err as Error;
  }
}

function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z") ?? true;
  } catch {
    return true;
  }
}

/** Runs `command`, collecting the `pid:N` lines it prints; `after(pids)` runs once `count` are seen. */
function withPids(count: number, after: (pids: number[]) => void) {
  const pids: number[] = [];
  let seen = "";
  return {
    pids,
    onUpdate: (p: unknown) => {
      seen += (p as { text: string }).text;
      const found = [...seen.matchAll(/pid:(\d+)/g)].map((m) => Number(m[1]));
      if (found.length === count && pids.length === 0) {
        pids.push(...found);
        started.push(...found);
        after(pids);
      }
    },
  };
}

describe("files that are not what they seem", () => {
  it("read_file refuses a FIFO without blocking in open(), with or without a writer", async () => {
    const r = await run("read_file", { path: "pipe" });
    expect(r).toMatchObject({ ok: false, code: "INVALID_ARGS" });
    expect((r as { message: string }).message).toContain(
      "is a FIFO (named pipe), not a regular file",
    );
  });

  it("grep over a directory holding a FIFO skips it instead of hanging", async () => {
    writeFileSync(path.join(ws, "notes.txt"), "needle here\n");
    const r = await run("grep", { pattern: "needle", path: "." });
    expect((r as { content: string }).content).toContain("notes.txt:1: needle here");
  });

  it("write_file and edit_file refuse a hard link to a file outside the workspace, leaving it untouched", async () => {
    const w = await run("write_file", { path: "linked.txt", content: "overwritten" });
    expect(w).toMatchObject({ ok: false, code: "PATH_OUTSIDE_WORKSPACE" });
    expect((w as { message: string }).message).toContain("has 2 hard links");
    const e = await run("edit_file", {
      path: "linked.txt",
      old_string: "TOP",
      new_string: "NOT",
    });
    expect(e).toMatchObject({ ok: false, code: "PATH_OUTSIDE_WORKSPACE" });
    expect(readFileSync(path.join(outside, "secret.txt"), "utf8")).toBe("TOP SECRET\n");
  });

  it("a file swapped for a symlink after its path was checked is not followed (O_NOFOLLOW on the checked path)", async () => {
    const checked = path.join(ws, "swapped.txt");
    symlinkSync(path.join(outside, "secret.txt"), checked); // what a racing process leaves
    for (const mode of ["read", "write"] as const) {
      const opened = await openWorkspaceFile(checked, "swapped.txt", mode);
      expect(opened).toMatchObject({ ok: false, error: { code: "PATH_OUTSIDE_WORKSPACE" } });
    }
    expect(readFileSync(path.join(outside, "secret.txt"), "utf8")).toBe("TOP SECRET\n");
  });

  it("a socket and a character device are refused by name, for reading and for writing", async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(path.join(ws, "sock"), resolve));
    try {
      for (const tool of ["read_file", "write_file"] as const) {
        const r = await run(tool, { path: "sock", content: "x" });
        expect(r).toMatchObject({ ok: false, code: "INVALID_ARGS" });
        expect((r as { message: string }).message).toMatch(/socket/);
      }
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    // A workspace that holds devices (here /dev itself): /dev/zero would never end a read.
    const r = await run(
      "read_file",
      { path: "zero" },
      {},
      createRegistry(builtinTools({ root: "/dev" })),
    );
    expect(r).toMatchObject({ ok: false, code: "INVALID_ARGS" });
    expect((r as { message: string }).message).toContain(
      "is a character device, not a regular file",
    );
  });

  it("write_file to a FIFO is refused, not blocked on a missing reader", async () => {
    const r = await run("write_file", { path: "pipe", content: "x" });
    expect(r).toMatchObject({ ok: false, code: "INVALID_ARGS" });
  });
});

describe("shell processes that leave the group", () => {
  it("abort kills `setsid cmd &` and `setsid -f` children, not only the process group", async () => {
    const ac = new AbortController();
    const { pids, onUpdate } = withPids(2, () => ac.abort());
    const r = await run(
      "shell",
      {
        command:
          "setsid sleep 30 & echo \"pid:$!\"; setsid -f sh -c 'echo pid:$$; exec sleep 30'; wait",
      },
      { signal: ac.signal, onUpdate },
    );
    expect(r).toBeInstanceOf(Error);
    expect(pids).toHaveLength(2);
    for (const pid of pids) expect(isGone(pid), `pid ${pid} survived`).toBe(true);
  });

  it("a timeout kills a `setsid -f` child too", async () => {
    const { pids, onUpdate } = withPids(1, () => {});
    const r = await run(
      "shell",
      { command: "setsid -f sh -c 'echo pid:$$; exec sleep 30'; sleep 30", timeout_ms: 500 },
      { onUpdate },
    );
    expect(r).toMatchObject({ ok: false, code: "TIMEOUT" });
    expect(pids).toHaveLength(1);
    expect(isGone(pids[0])).toBe(true);
  });

  it("a command that exited keeps its real result when a cancel arrives while its leftovers are killed", async () => {
    const ac = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const { pids, onUpdate } = withPids(1, () => {
      timer = setTimeout(() => ac.abort(), 300);
    });
    const r = await run(
      "shell",
      { command: "(trap '' TERM; sleep 30) & echo \"pid:$!\"; echo done > finished.txt" },
      { signal: ac.signal, onUpdate },
    );
    clearTimeout(timer);
    expect(ac.signal.aborted).toBe(true);
    expect(r).toMatchObject({ ok: true });
    expect((r as { content: string }).content).toMatch(/^exit code: 0\n/);
    expect(readFileSync(path.join(ws, "finished.txt"), "utf8")).toBe("done\n");
    expect(isGone(pids[0])).toBe(true);
  });
});
