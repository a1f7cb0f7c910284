// Issue 41 (low): a folder on the path swapped for a symbolic link between the workspace check
// and the open led `edit_file` (and `read_file`; `write_file` opens the same way) outside the workspace: `open`
// follows a symlink in any folder of the path (O_NOFOLLOW guards only the last part). A real
// child process swaps the folder back and forth while the tools run; the file outside must
// never be written or read.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { editFileTool } from "../tools/builtin/edit-file.ts";
import { readFileTool } from "../tools/builtin/read-file.ts";
import type { Workspace } from "../tools/builtin/workspace.ts";
import type { ToolContext } from "../tools/types.ts";

const ctx = () =>
  ({
    callId: "c",
    signal: new AbortController().signal,
    onUpdate: () => {},
    log: { debug() {}, info() {}, warn() {}, error() {} },
  }) as unknown as ToolContext;

// Swaps root/sub between a real folder and a symlink to `out` (each held about as long as the
// other), as fast as it can, until killed.
const SWAPPER = `
const fs = require("node:fs");
const [sub, real, link, out] = JSON.parse(process.env.SWAP_PATHS);
fs.symlinkSync(out, link);
const hold = () => { const t = process.hrtime.bigint(); while (process.hrtime.bigint() - t < 50000n); };
process.stdout.write("ready\\n");
for (;;) {
  try {
    fs.renameSync(sub, real); fs.renameSync(link, sub); hold();
    fs.renameSync(sub, link); fs.renameSync(real, sub); hold();
  } catch {}
}
`;

let swapper: ChildProcess | undefined;
afterEach(() => {
  swapper?.kill("SIGKILL");
  swapper = undefined;
});

function setUp() {
  const base = realpathSync(mkdtempSync(join(tmpdir(), "keel-race-")));
  const root = join(base, "ws");
  const out = join(base, "outside");
  mkdirSync(join(root, "sub"), { recursive: true });
  mkdirSync(out);
  writeFileSync(join(root, "sub", "target.txt"), "needle\n");
  writeFileSync(join(out, "target.txt"), "needle SECRET\n");
  const ws: Workspace = { root, realRoot: root, protected: [] };
  return { base, root, out, ws };
}

async function startSwapper(root: string, out: string) {
  const paths = [join(root, "sub"), join(root, "sub_real"), join(root, "sub_link"), out];
  swapper = spawn(process.execPath, ["-e", SWAPPER], {
    env: { ...process.env, SWAP_PATHS: JSON.stringify(paths) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise((resolve) => swapper!.stdout!.once("data", resolve));
}

describe("a folder swapped for a symlink mid-call (issue 41)", () => {
  it("edit_file and read_file never write or read outside the workspace (before: edit_file wrote outside within a few hundred calls)", async () => {
    const { base, root, out, ws } = setUp();
    const edit = editFileTool(ws);
    const read = readFileTool(ws);
    await startSwapper(root, out);
    const leaked: string[] = [];
    // A call may also throw (the folder is missing for an instant): the runtime makes that the
    // call's failure; what matters here is what it touched.
    const run = (tool: { execute: (a: never, c: ToolContext) => unknown }, args: object) =>
      Promise.resolve()
        .then(() => tool.execute(args as never, ctx()))
        .catch((err: unknown) => ({ threw: String(err) }));
    const until = performance.now() + 5000;
    for (let i = 0; performance.now() < until; i++) {
      await run(edit, { path: "sub/target.txt", old_string: "needle", new_string: `needle ${i}` });
      await run(edit, { path: "sub/target.txt", old_string: `needle ${i}`, new_string: "needle" });
      const r = await run(read, { path: "sub/target.txt" });
      if (JSON.stringify(r).includes("SECRET")) leaked.push(`read ${i}`);
      if (readFileSync(join(out, "target.txt"), "utf8") !== "needle SECRET\n") {
        leaked.push(`edit ${i}`);
        break;
      }
    }
    swapper?.kill("SIGKILL");
    const outside = readFileSync(join(out, "target.txt"), "utf8");
    rmSync(base, { recursive: true, force: true });
    expect({ leaked, outside }).toEqual({ leaked: [], outside: "needle SECRET\n" });
  }, 30_000);
});
