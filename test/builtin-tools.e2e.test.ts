import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ToolResult } from "../contracts/tool-result.ts";
import { builtinTools } from "../tools/builtin/index.ts";
import { prepareCall } from "../tools/prepare-call.ts";
import { createRegistry } from "../tools/registry.ts";
import { toToolResult } from "../tools/tool-output.ts";

// Built at collection time: the it.each tables below name paths inside it.
const base = realpathSync(mkdtempSync(path.join(tmpdir(), "keel-builtin-")));
const ws = path.join(base, "ws");
const outside = path.join(base, "outside");
let registry: ReturnType<typeof createRegistry>;

beforeAll(() => {
  mkdirSync(path.join(ws, "src", "deep"), { recursive: true });
  mkdirSync(path.join(ws, "node_modules", "pkg"), { recursive: true });
  mkdirSync(outside);
  writeFileSync(path.join(outside, "secret.txt"), "TOP SECRET\n");
  writeFileSync(path.join(ws, "src", "a.ts"), "export const a = 1;\nexport const b = 2;\n");
  writeFileSync(path.join(ws, "src", "deep", "c.ts"), "// TODO: c\n");
  writeFileSync(path.join(ws, "src", "b.js"), "console.log('TODO b');\n");
  writeFileSync(path.join(ws, "node_modules", "pkg", "index.ts"), "// TODO hidden\n");
  writeFileSync(path.join(ws, "README.md"), "# readme\n");
  writeFileSync(path.join(ws, "bin.dat"), Buffer.from([1, 0, 2, 3]));
  symlinkSync(outside, path.join(ws, "escape-dir"));
  symlinkSync(path.join(outside, "secret.txt"), path.join(ws, "escape-file"));
  symlinkSync(path.join(outside, "missing.txt"), path.join(ws, "dangling"));
  // Unconfined: what these tests check is the shell without bubblewrap (test/shell-sandbox.e2e.test.ts has the sandbox).
  registry = createRegistry(builtinTools({ root: ws, sandbox: false }));
});

afterAll(() => rmSync(base, { recursive: true, force: true }));

/** Prepares (as the runtime does) and executes a built-in; a thrown error is returned. */
async function run(
  name: string,
  args: unknown,
  extra: {
    signal?: AbortSignal;
    onUpdate?: (p: unknown) => void;
    registry?: ReturnType<typeof createRegistry>;
    log?: pino.Logger;
  } = {},
): Promise<ToolResult> {
  const prepared = prepareCall(
    { id: "call_1", name, argumentsText: JSON.stringify(args) },
    extra.registry ?? registry,
  );
  if (!prepared.ok) return prepared.error;
  const ctx = {
    callId: "call_1",
    signal: extra.signal ?? new AbortController().signal,
    idempotencyKey: "k",
    sessionId: "s",
    onUpdate: extra.onUpdate ?? (() => {}),
    log: extra.log ?? pino({ level: "silent" }),
  };
  return toToolResult(await prepared.call.tool.execute(prepared.call.args, ctx), name);
}

const content = (r: ToolResult) => {
  if (!r.ok) throw new Error(`${r.code}: ${r.message}`);
  return r.content;
};

describe("workspace confinement", () => {
  it.each([
    ["read_file", { path: "../outside/secret.txt" }],
    ["read_file", { path: path.join(outside, "secret.txt") }],
    ["read_file", { path: "/etc/passwd" }],
    ["read_file", { path: "escape-dir/secret.txt" }],
    ["read_file", { path: "escape-file" }],
    ["read_file", { path: "src/../../outside/secret.txt" }],
    ["write_file", { path: "escape-dir/new.txt", content: "x" }],
    ["write_file", { path: "escape-dir/sub/new.txt", content: "x" }],
    ["write_file", { path: "dangling", content: "x" }],
    ["write_file", { path: "../evil.txt", content: "x" }],
    ["edit_file", { path: "escape-file", old_string: "TOP", new_string: "NOT" }],
    ["list_dir", { path: "escape-dir" }],
    ["list_dir", { path: ".." }],
    ["glob", { pattern: "*", path: "escape-dir" }],
    ["grep", { pattern: "SECRET", path: "escape-file" }],
    ["shell", { command: "pwd", cwd: "escape-dir" }],
  ])("%s refuses %j with PATH_OUTSIDE_WORKSPACE", async (tool, args) => {
    const r = await run(tool, args);
    expect(r).toMatchObject({ ok: false, code: "PATH_OUTSIDE_WORKSPACE" });
    expect(!r.ok && r.message).toContain("How to fix: use a path relative to the workspace root");
  });

  it("nothing was created outside the workspace by the refused writes", () => {
    expect(existsSync(path.join(outside, "new.txt"))).toBe(false);
    expect(existsSync(path.join(outside, "sub"))).toBe(false);
    expect(existsSync(path.join(outside, "missing.txt"))).toBe(false);
    expect(existsSync(path.join(base, "evil.txt"))).toBe(false);
    expect(readFileSync(path.join(outside, "secret.txt"), "utf8")).toBe("TOP SECRET\n");
  });

  it("an absolute path inside the workspace is accepted", async () => {
    expect(content(await run("read_file", { path: path.join(ws, "README.md") }))).toBe(
      "     1\t# readme",
    );
  });

  it("grep over the root does not follow a symlink out of the workspace", async () => {
    expect(content(await run("grep", { pattern: "SECRET" }))).toContain("No matches");
  });
});

describe("foreign tool conventions", () => {
  it("a Claude-style Read call with file_path reaches read_file", async () => {
    expect(content(await run("Read", { file_path: "src/a.ts", limit: 1 }))).toContain(
      "     1\texport const a = 1;",
    );
  });

  it("a Bash call with timeout reaches shell's timeout_ms", async () => {
    const prepared = prepareCall(
      { id: "c", name: "Bash", argumentsText: '{"command":"true","timeout":5000}' },
      registry,
    );
    expect(prepared.ok && prepared.call.args).toEqual({ command: "true", timeout_ms: 5000 });
  });

  it("builtinTools refuses a root that is not a directory", () => {
    expect(() => builtinTools({ root: path.join(base, "missing") })).toThrow(
      /is not an existing directory/,
    );
  });
});

describe("read_file", () => {
  it("returns numbered lines and honours offset and limit", async () => {
    expect(content(await run("read_file", { path: "src/a.ts" }))).toBe(
      "     1\texport const a = 1;\n     2\texport const b = 2;",
    );
    const r = await run("read_file", { path: "src/a.ts", offset: 1, limit: 1 });
    expect(r).toMatchObject({
      ok: true,
      truncated: true,
      continuation: { tool: "read_file", args: { path: "src/a.ts", offset: 2, limit: 1 } },
    });
    expect(content(r)).toContain("[showing lines 1–1 of 2. Continue with read_file");
  });

  it("following the continuations of a large file reproduces every line once", async () => {
    const lines = Array.from({ length: 6000 }, (_, i) => `line ${i + 1} ${"é".repeat(i % 7)}`);
    writeFileSync(path.join(ws, "big.txt"), `${lines.join("\n")}\n`);
    const seen: string[] = [];
    let args: Record<string, unknown> | undefined = { path: "big.txt" };
    let calls = 0;
    while (args) {
      const r = await run("read_file", args);
      const text = content(r);
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(33 * 1024);
      for (const l of text.split("\n"))
        if (/^\s+\d+\t/.test(l)) seen.push(l.replace(/^\s+\d+\t/, ""));
      args = r.ok ? r.continuation?.args : undefined;
      calls++;
    }
    expect(calls).toBeGreaterThan(3);
    expect(seen).toEqual(lines);
  });

  it("explains missing files, directories, binaries and offsets past the end", async () => {
    const missing = await run("read_file", { path: "src/a.tsx" });
    expect(missing).toMatchObject({ ok: false, code: "NOT_FOUND" });
    expect(!missing.ok && missing.message).toContain('Did you mean "src/a.ts"?');
    expect(await run("read_file", { path: "src" })).toMatchObject({
      ok: false,
      message: expect.stringContaining("Use list_dir"),
    });
    expect(content(await run("read_file", { path: "bin.dat" }))).toContain("binary file (4 bytes)");
    expect(await run("read_file", { path: "src/a.ts", offset: 9 })).toMatchObject({
      ok: false,
      code: "INVALID_ARGS",
      message: expect.stringContaining("has 2 lines"),
    });
  });
});

describe("write_file and edit_file", () => {
  it("creates parent directories, then reports an overwrite", async () => {
    expect(content(await run("write_file", { path: "new/dir/f.txt", content: "one\ntwo\n" }))).toBe(
      "Created new/dir/f.txt: 8 bytes, 2 lines.",
    );
    expect(content(await run("write_file", { path: "new/dir/f.txt", content: "x" }))).toBe(
      "Overwrote new/dir/f.txt: 1 bytes, 1 line.",
    );
    expect(readFileSync(path.join(ws, "new/dir/f.txt"), "utf8")).toBe("x");
  });

  it("replaces a unique string literally (no $ patterns) and reports its line", async () => {
    writeFileSync(path.join(ws, "e.ts"), "a\nconst port = 3000;\nb\n");
    expect(
      content(
        await run("edit_file", { path: "e.ts", old_string: "3000", new_string: "$& $1 8080" }),
      ),
    ).toBe("Edited e.ts: replaced 1 occurrence (line 2).");
    expect(readFileSync(path.join(ws, "e.ts"), "utf8")).toBe("a\nconst port = $& $1 8080;\nb\n");
  });

  it("refuses an ambiguous string with its count and line numbers, and replace_all replaces all", async () => {
    writeFileSync(path.join(ws, "amb.ts"), "x = 1\ny = 2\nx = 1\n\nx = 1\n");
    const r = await run("edit_file", { path: "amb.ts", old_string: "x = 1", new_string: "x = 9" });
    expect(r).toMatchObject({ ok: false, code: "INVALID_ARGS" });
    expect(!r.ok && r.message).toContain("occurs 3 times");
    expect(!r.ok && r.message).toContain("(lines 1, 3, 5)");
    expect(!r.ok && r.message).toContain("replace_all: true");
    expect(readFileSync(path.join(ws, "amb.ts"), "utf8")).toBe("x = 1\ny = 2\nx = 1\n\nx = 1\n");
    expect(
      content(
        await run("edit_file", {
          path: "amb.ts",
          old_string: "x = 1",
          new_string: "x = 9",
          replace_all: true,
        }),
      ),
    ).toBe("Edited amb.ts: replaced 3 occurrences (lines 1, 3, 5).");
    expect(readFileSync(path.join(ws, "amb.ts"), "utf8")).toBe("x = 9\ny = 2\nx = 9\n\nx = 9\n");
  });

  it("explains an absent string, pointing at a near match", async () => {
    writeFileSync(path.join(ws, "ind.ts"), "function f() {\n    return 1;\n}\n");
    const r = await run("edit_file", {
      path: "ind.ts",
      old_string: "\treturn 1;",
      new_string: "\treturn 2;",
    });
    expect(r).toMatchObject({ ok: false, code: "INVALID_ARGS" });
    expect(!r.ok && r.message).toContain("not found");
    expect(!r.ok && r.message).toContain("at line 2");
    expect(
      await run("edit_file", { path: "ind.ts", old_string: "", new_string: "x" }),
    ).toMatchObject({ ok: false, code: "INVALID_ARGS" });
    expect(
      await run("edit_file", { path: "nope.ts", old_string: "a", new_string: "b" }),
    ).toMatchObject({ ok: false, code: "NOT_FOUND" });
  });
});

describe("list_dir, glob and grep", () => {
  it("list_dir marks directories and symlinks", async () => {
    const text = content(await run("list_dir", { path: "src" }));
    expect(text).toBe("a.ts\nb.js\ndeep/");
    expect(content(await run("list_dir", {}))).toContain(`escape-dir -> ${outside}`);
  });

  it("glob matches **, *, ? and {a,b}, skips node_modules, and hints at ** when nothing matches", async () => {
    expect(content(await run("glob", { pattern: "**/*.ts", path: "src" }))).toBe(
      "src/a.ts\nsrc/deep/c.ts",
    );
    expect(content(await run("glob", { pattern: "**/index.ts" }))).toContain("No files match");
    expect(content(await run("glob", { pattern: "*.{js,ts}", path: "src" }))).toBe(
      "src/a.ts\nsrc/b.js",
    );
    expect(content(await run("glob", { pattern: "src/?.ts" }))).toBe("src/a.ts");
    expect(content(await run("glob", { pattern: "node_modules/**/*.ts" }))).toBe(
      "node_modules/pkg/index.ts",
    );
    expect(content(await run("glob", { pattern: "*.ts", path: "src/deep/.." }))).toBe("src/a.ts");
    expect(content(await run("glob", { pattern: "*.py" }))).toContain(
      'use "**/*.py" for every depth',
    );
  });

  it("glob pages with a continuation", async () => {
    const r = await run("glob", { pattern: "**/*", path: "src", max_results: 2 });
    expect(r).toMatchObject({
      ok: true,
      truncated: true,
      continuation: { tool: "glob", args: { offset: 2 } },
    });
    const next = await run("glob", (r as { continuation: { args: object } }).continuation.args);
    expect(content(next)).toBe("src/deep/c.ts");
  });

  it("grep reports path:line: text, filters by glob and pages", async () => {
    expect(content(await run("grep", { pattern: "TODO" }))).toBe(
      "src/b.js:1: console.log('TODO b');\nsrc/deep/c.ts:1: // TODO: c",
    );
    expect(
      content(await run("grep", { pattern: "todo", ignore_case: true, glob: "**/*.ts" })),
    ).toBe("src/deep/c.ts:1: // TODO: c");
    expect(content(await run("grep", { pattern: "export", path: "src/a.ts" }))).toBe(
      "src/a.ts:1: export const a = 1;\nsrc/a.ts:2: export const b = 2;",
    );
    const paged = await run("grep", { pattern: "export", path: "src", max_results: 1 });
    expect(paged).toMatchObject({
      ok: true,
      truncated: true,
      continuation: { tool: "grep", args: { offset: 1 } },
    });
    expect(
      content(await run("grep", (paged as { continuation: { args: object } }).continuation.args)),
    ).toBe("src/a.ts:2: export const b = 2;");
    expect(await run("grep", { pattern: "(" })).toMatchObject({
      ok: false,
      code: "INVALID_ARGS",
      message: expect.stringContaining("not a valid JavaScript regular expression"),
    });
  });
});

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

describe("Keel's own folders (.keel/ at any depth, and protected store files)", () => {
  const root = path.join(base, "store-ws");
  let tools: ReturnType<typeof createRegistry>;
  const call = (name: string, args: unknown) => run(name, args, { registry: tools });
  const refused = (r: ToolResult) => {
    expect(r).toMatchObject({ ok: false, code: "PATH_OUTSIDE_WORKSPACE" });
    expect(r.ok ? "" : r.message).toContain("session store");
  };

  beforeAll(() => {
    mkdirSync(path.join(root, ".keel", "spill"), { recursive: true });
    mkdirSync(path.join(root, "sub", ".keel"), { recursive: true });
    mkdirSync(path.join(root, "data"));
    writeFileSync(path.join(root, ".keel", "keel.db"), "TODO in the store\n");
    writeFileSync(path.join(root, ".keel", "spill", "call_1.txt"), "TODO spilled output\n");
    writeFileSync(path.join(root, "sub", ".keel", "keel.db"), "TODO nested store\n");
    writeFileSync(path.join(root, "data", "store.db"), "TODO custom store\n");
    writeFileSync(path.join(root, "data", "store.db-wal"), "TODO wal\n");
    writeFileSync(path.join(root, "data", "notes.txt"), "TODO visible\n");
    writeFileSync(path.join(root, "main.ts"), "// TODO visible too\n");
    symlinkSync(path.join(root, ".keel"), path.join(root, "link-to-store"));
    tools = createRegistry(
      builtinTools({ root, protect: ["data/store.db", path.join(root, "data", "store.db-wal")] }),
    );
  });

  it("list_dir, glob and grep never show them; naming them as the path is refused", async () => {
    expect(content(await call("list_dir", {}))).toBe(
      `data/\nlink-to-store -> ${path.join(root, ".keel")}\nmain.ts\nsub/`,
    );
    expect(content(await call("list_dir", { path: "data" }))).toBe("notes.txt");
    expect(content(await call("list_dir", { path: "sub" }))).toBe("sub is empty.");
    expect(content(await call("glob", { pattern: "**/*" })).split("\n")).toEqual([
      "data/notes.txt",
      "link-to-store",
      "main.ts",
    ]);
    expect(content(await call("glob", { pattern: ".keel/**" }))).toContain("No files match");
    expect(content(await call("grep", { pattern: "TODO" })).split("\n")).toEqual([
      "data/notes.txt:1: TODO visible",
      "main.ts:1: // TODO visible too",
    ]);
    for (const [name, args] of [
      ["list_dir", { path: ".keel" }],
      ["list_dir", { path: "link-to-store/spill" }],
      ["glob", { pattern: "*", path: "sub/.keel" }],
      ["grep", { pattern: "TODO", path: ".keel/keel.db" }],
      ["grep", { pattern: "TODO", path: "data/store.db" }],
    ] as const) {
      refused(await call(name, args));
    }
  });

  it("write_file and edit_file refuse them whatever path leads there; read_file still reads a spilled output", async () => {
    for (const [name, args] of [
      ["write_file", { path: ".keel/keel.db", content: "gone" }],
      ["write_file", { path: "sub/.keel/new.txt", content: "x" }],
      ["write_file", { path: "link-to-store/evil.txt", content: "x" }],
      ["write_file", { path: `${root}/.keel/abs.txt`, content: "x" }],
      ["write_file", { path: "data/store.db-wal", content: "x" }],
      ["edit_file", { path: "data/store.db", old_string: "TODO", new_string: "DONE" }],
      ["edit_file", { path: ".keel/spill/call_1.txt", old_string: "TODO", new_string: "x" }],
    ] as const) {
      refused(await call(name, args));
    }
    expect(readFileSync(path.join(root, ".keel", "keel.db"), "utf8")).toBe("TODO in the store\n");
    expect(readFileSync(path.join(root, "data", "store.db"), "utf8")).toBe("TODO custom store\n");
    for (const made of [".keel/evil.txt", ".keel/abs.txt", "sub/.keel/new.txt"]) {
      expect(existsSync(path.join(root, made))).toBe(false);
    }
    expect(content(await call("read_file", { path: ".keel/spill/call_1.txt" }))).toContain(
      "TODO spilled output",
    );
    expect(content(await call("write_file", { path: "data/other.txt", content: "ok" }))).toMatch(
      /^Created data\/other.txt/,
    );
  });

  it("shell refuses a command that names .keel/ or a protected store file, or runs in .keel/, and runs none of it", async () => {
    for (const command of [
      "touch ran && rm -rf .keel",
      "cat .keel/keel.db",
      `echo x > ${root}/.keel/x.txt`,
      "cd sub && ls -a .keel/",
      "cp /dev/null ./data/store.db",
      "truncate -s 0 data/store.db-wal",
      `echo x >> ${path.join(root, "data", "store.db")}`,
    ]) {
      const r = await call("shell", { command });
      refused(r);
      expect(r.ok ? "" : r.message, command).toContain("shell commands that name it are refused");
    }
    for (const cwd of [".keel", "link-to-store", "sub/.keel"]) {
      const r = await call("shell", { command: "touch ran", cwd });
      refused(r);
      expect(r.ok ? "" : r.message, cwd).toContain("commands do not run there");
    }
    expect(existsSync(path.join(root, "ran"))).toBe(false);
    expect(existsSync(path.join(root, ".keel", "ran"))).toBe(false);
    expect(readFileSync(path.join(root, ".keel", "keel.db"), "utf8")).toBe("TODO in the store\n");
    expect(readFileSync(path.join(root, "data", "store.db"), "utf8")).toBe("TODO custom store\n");
    // A longer name that merely contains them is not the store.
    expect(
      content(
        await call("shell", { command: "echo app.keel .keelrc mydata/store.db data/store.db.bak" }),
      ),
    ).toContain("exit code: 0");
  });

  it("a shell command that removes or replaces the store without naming it fails saying so, with its own result, and the log says it", async () => {
    const dir = path.join(base, "store-ws-shell");
    mkdirSync(path.join(dir, ".keel", "sessions"), { recursive: true });
    mkdirSync(path.join(dir, "data"));
    writeFileSync(path.join(dir, ".keel", "keel.db"), "store\n");
    writeFileSync(path.join(dir, ".keel", "keel.db-wal"), "wal\n");
    writeFileSync(path.join(dir, "data", "store.db"), "custom\n");
    const lines: string[] = [];
    const log = pino({ level: "error" }, { write: (l: string) => lines.push(l) });
    const shell = createRegistry(
      builtinTools({ root: dir, protect: ["data/store.db"], sandbox: false }),
    );
    const sh = (command: string) => run("shell", { command }, { registry: shell, log });

    // Neither names the store; SQLite's own -wal comes and goes by itself and is not compared.
    expect(content(await sh("rm -f .k*/*-wal; echo fine"))).toBe("exit code: 0\nstdout:\nfine\n");
    expect(lines).toEqual([]);

    const replaced = await sh(
      'for f in data/*.db; do cp "$f" "$f.new" && mv "$f.new" "$f"; done; echo copied',
    );
    expect(replaced).toMatchObject({ ok: false, code: "PATH_OUTSIDE_WORKSPACE" });
    expect(replaced.ok ? "" : replaced.message).toMatch(
      /^The command removed or replaced data\/store\.db, where Keel keeps its session store\. Keel cannot put it back/,
    );
    expect(replaced.ok ? "" : replaced.message).toContain("exit code: 0\nstdout:\ncopied");

    const removed = await sh("rm -rf .k*");
    expect(removed.ok ? "" : removed.message).toMatch(
      /^The command removed or replaced \.keel, \.keel\/keel\.db, \.keel\/sessions, where Keel keeps/,
    );
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      expect.objectContaining({
        paths: ["data/store.db"],
        msg: expect.stringContaining("session store"),
      }),
      expect.objectContaining({ paths: [".keel", ".keel/keel.db", ".keel/sessions"] }),
    ]);
  });
});

describe("shell", () => {
  it("returns the exit code, stdout and stderr; a non-zero exit is a normal result", async () => {
    expect(content(await run("shell", { command: "echo hi; echo err >&2" }))).toBe(
      "exit code: 0\nstdout:\nhi\n\nstderr:\nerr\n",
    );
    expect(content(await run("shell", { command: "exit 3" }))).toBe(
      "exit code: 3\nstdout: (empty)",
    );
    expect(content(await run("shell", { command: "pwd", cwd: "src" }))).toContain(`${ws}/src`);
  });

  it("abort kills the whole process group, background children included", async () => {
    const ac = new AbortController();
    const pids: number[] = [];
    let seen = "";
    const result = run(
      "shell",
      { command: 'echo "pid:$$"; sleep 30 & echo "pid:$!"; sleep 30 & echo "pid:$!"; wait' },
      {
        signal: ac.signal,
        onUpdate: (p) => {
          seen += (p as { text: string }).text;
          const found = [...seen.matchAll(/pid:(\d+)/g)].map((m) => Number(m[1]));
          if (found.length === 3 && pids.length === 0) {
            pids.push(...found);
            ac.abort();
          }
        },
      },
    ).catch((err: Error) => err);
    const outcome = await result;
    expect(outcome).toBeInstanceOf(Error);
    expect((outcome as Error).name).toBe("AbortError");
    expect((outcome as Error).message).toContain("process group was killed");
    expect(pids).toHaveLength(3);
    for (const pid of pids) expect(isGone(pid)).toBe(true);
  });

  it("a timeout kills the group and fails with TIMEOUT and the output so far", async () => {
    const start = performance.now();
    const r = await run("shell", { command: "echo started; sleep 30", timeout_ms: 200 });
    expect(r).toMatchObject({ ok: false, code: "TIMEOUT" });
    expect(!r.ok && r.message).toContain("started");
    expect(performance.now() - start).toBeLessThan(5000);
  });

  it("background processes left running when the command exits are killed", async () => {
    const r = await run("shell", { command: 'sleep 30 & echo "pid:$!"' });
    const pid = Number(/pid:(\d+)/.exec(content(r))?.[1]);
    expect(content(r)).toContain("exit code: 0");
    expect(isGone(pid)).toBe(true);
  });

  it("keeps output within the budget: head, omitted count, tail", async () => {
    const r = await run("shell", { command: "seq 1 100000" });
    const text = content(r);
    expect(r).toMatchObject({ ok: true, truncated: true });
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(33 * 1024);
    expect(text).toMatch(/^exit code: 0\nstdout:\n1\n2\n3\n/);
    expect(text).toMatch(/\[… \d+ bytes omitted …\]/);
    expect(text.trimEnd().endsWith("100000")).toBe(true);
  });
});
