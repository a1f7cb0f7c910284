// The built package (scripts/build.mjs, what `npm ci` and `npm run build` write to dist/): it
// exports exactly what index.ts and testing.ts export, and a session runs through it in plain
// Node, with no TypeScript loader, as an embedder's `import "keel"` runs it.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..");

/** Run by plain `node` (no tsx): imports the built modules, runs one session, prints JSON. */
const CHECK = `
import { z } from "zod";
const keel = await import(process.env.KEEL_BUILT_INDEX);
const testing = await import(process.env.KEEL_BUILT_TESTING);
let executed = 0;
const touch = keel.defineTool({
  name: "touch",
  description: "Touches a file (test tool): returns what it touched.",
  parameters: z.object({ path: z.string() }),
  traits: { concurrencySafe: true, readOnly: true, risk: "low" },
  execute: async ({ path }) => {
    executed++;
    return "touched " + path;
  },
});
const agent = keel.createAgent({
  model: keel.scriptedModel([
    { toolCalls: [{ id: "call_1", name: "touch", arguments: '{"path":"a.txt"}' }] },
    { text: "done" },
  ]),
  tools: [touch],
  store: keel.memoryStore(),
});
const session = agent.session();
const result = await session.prompt("Touch a.txt");
const messages = session.messages();
await agent.close();
// inspector/server.ts reads its page next to its module: the build copies it to outdir/page/.
const inspector = await keel.startInspector();
const page = await fetch("http://127.0.0.1:" + inspector.port + "/?token=" + inspector.token);
await inspector.close();
console.log(JSON.stringify({
  index: Object.keys(keel).sort(),
  testing: Object.keys(testing).sort(),
  sameScriptedModel: keel.scriptedModel === testing.scriptedModel,
  status: result.status,
  executed,
  tool: messages.find((m) => m.role === "tool")?.content,
  last: messages.at(-1)?.content,
  page: page.status,
}));
`;

interface Checked {
  index: string[];
  testing: string[];
  sameScriptedModel: boolean;
  status: string;
  executed: number;
  tool: string;
  last: string;
  page: number;
}

let outdir = "";

beforeAll(() => {
  // Inside the repository (test-output/ is ignored), as dist/ is: the bundle's externals
  // (xstate, zod, pino, …) resolve from the repository's node_modules, as an embedder's would.
  mkdirSync(join(ROOT, "test-output"), { recursive: true });
  outdir = mkdtempSync(join(ROOT, "test-output", "build-"));
  try {
    execFileSync(process.execPath, [join(ROOT, "scripts", "build.mjs"), outdir], {
      cwd: ROOT,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (e) {
    throw new Error(`scripts/build.mjs failed:\n${(e as { stderr?: string }).stderr ?? e}`);
  }
});

afterAll(() => {
  if (outdir) rmSync(outdir, { recursive: true, force: true });
});

describe("the built package (scripts/build.mjs)", () => {
  let checked: Checked;
  beforeAll(() => {
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", CHECK], {
      cwd: ROOT,
      encoding: "utf8",
      env: {
        ...process.env,
        NODE_OPTIONS: "", // plain Node: no loader inherited from the test runner
        KEEL_LOG: "",
        KEEL_BUILT_INDEX: pathToFileURL(join(outdir, "index.js")).href,
        KEEL_BUILT_TESTING: pathToFileURL(join(outdir, "testing.js")).href,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    checked = JSON.parse(out.trim().split("\n").at(-1) ?? "") as Checked;
  }, 30_000);

  it("exports exactly the names index.ts and testing.ts export", async () => {
    const index = await import("../index.ts");
    const testing = await import("../testing.ts");
    expect(checked.index).toEqual(Object.keys(index).sort());
    expect(checked.testing).toEqual(Object.keys(testing).sort());
    expect(checked.index).toContain("createAgent");
  });

  it("runs a session in plain Node: one prompt, one tool call, completed", () => {
    expect(checked).toMatchObject({
      status: "completed",
      executed: 1,
      tool: "touched a.txt",
      last: "done",
    });
  });

  it("shares one copy of the code between keel and keel/testing", () => {
    expect(checked.sameScriptedModel).toBe(true);
  });

  it("finds the inspector's page, which the build copies next to the bundle", () => {
    expect(checked.page).toBe(200);
    expect(readFileSync(join(outdir, "page", "index.html"), "utf8")).toBe(
      readFileSync(join(ROOT, "inspector", "page", "index.html"), "utf8"),
    );
  });

  it("a rebuild removes what an earlier build wrote (stale chunks) and nothing else", () => {
    const dir = mkdtempSync(join(ROOT, "test-output", "rebuild-"));
    try {
      writeFileSync(join(dir, "chunk-STALE123.js"), "stale");
      writeFileSync(join(dir, "chunk.js"), "stale");
      writeFileSync(join(dir, "notes.txt"), "mine");
      mkdirSync(join(dir, "page"));
      writeFileSync(join(dir, "page", "old.css"), "stale");
      execFileSync(process.execPath, [join(ROOT, "scripts", "build.mjs"), dir], {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
      });
      const names = readdirSync(dir);
      expect(names).not.toContain("chunk-STALE123.js");
      expect(names).not.toContain("chunk.js");
      expect(names).toContain("notes.txt");
      expect(names).toEqual(expect.arrayContaining(["index.js", "testing.js", "page"]));
      expect(readdirSync(join(dir, "page"))).not.toContain("old.css");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("is the plain JS that package.json maps `keel` to: ESM, no keepNames, a sourcemap", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    expect(pkg.exports).toEqual({
      ".": { types: "./index.ts", default: "./dist/index.js" },
      "./testing": { types: "./testing.ts", default: "./dist/testing.js" },
      "./client": { types: "./client/index.ts", default: "./dist/client.js" },
    });
    const js = readFileSync(join(outdir, "index.js"), "utf8");
    expect(js).toMatch(/^export \{/m);
    expect(js).not.toContain("__name(");
    expect(js).toContain("//# sourceMappingURL=index.js.map");
    expect(JSON.parse(readFileSync(join(outdir, "index.js.map"), "utf8")).sources).toContain(
      "../../actors/agent.ts",
    );
  });
});
