// The built package (scripts/build.mjs, what `npm ci` and `npm run build` write to dist/): it
// exports exactly what index.ts and testing.ts export, a session runs through it in plain
// Node, with no TypeScript loader, as an embedder's `import "keel"` runs it, and its
// declarations resolve without Keel's sources or other packages' missing types. (That an
// embedder's compiler accepts them is test/package.e2e.test.ts's, from the packed tarball.)
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
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
  // What an earlier build left, and what is not the build's: the build replaces the first.
  writeFileSync(join(outdir, "chunk-STALE123.js"), "stale");
  writeFileSync(join(outdir, "chunk.js"), "stale");
  writeFileSync(join(outdir, "notes.txt"), "mine");
  mkdirSync(join(outdir, "page"));
  writeFileSync(join(outdir, "page", "old.css"), "stale");
  mkdirSync(join(outdir, "gone"));
  writeFileSync(join(outdir, "gone", "module.d.ts"), "stale");
  writeFileSync(join(outdir, "gone", "module.d.ts.map"), "stale");
  mkdirSync(join(outdir, "actors"));
  writeFileSync(join(outdir, "actors", "keep.txt"), "mine");
  try {
    execFileSync(process.execPath, [join(ROOT, "scripts", "build.mjs"), outdir], {
      cwd: ROOT,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (e) {
    throw new Error(`scripts/build.mjs failed:\n${(e as { stderr?: string }).stderr ?? e}`);
  }
}, 120_000); // JavaScript and declarations: ≈ 12 s alone, more on a busy machine

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

  it("a rebuild removes what an earlier build wrote (stale chunks, declarations) and nothing else", () => {
    const names = readdirSync(outdir);
    expect(names).not.toContain("chunk-STALE123.js");
    expect(names).not.toContain("chunk.js");
    expect(names).not.toContain("gone");
    expect(names).toContain("notes.txt");
    expect(names).toEqual(expect.arrayContaining(["index.js", "testing.js", "page"]));
    expect(readdirSync(join(outdir, "page"))).not.toContain("old.css");
    expect(readdirSync(join(outdir, "actors"))).toEqual(
      expect.arrayContaining(["keep.txt", "agent.d.ts", "agent.d.ts.map"]),
    );
  });

  it("writes declarations whose relative imports end in .js, and what an embedder loads names no package without its own types", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    const typed = new Set([...Object.keys(pkg.dependencies), ...Object.keys(pkg.peerDependencies)]);
    typed.delete("better-sqlite3"); // its types are @types/better-sqlite3, a devDependency
    typed.delete("ws"); // likewise @types/ws
    // The declarations a compiler reads from the three entries, following relative imports.
    const seen = new Set<string>();
    const queue = ["index.d.ts", "testing.d.ts", "client/index.d.ts"];
    while (queue.length > 0) {
      const file = queue.shift()!;
      if (seen.has(file)) continue;
      seen.add(file);
      const text = readFileSync(join(outdir, file), "utf8");
      for (const [, specifier] of text.matchAll(/(?:from |import\()"([^"]+)"/g)) {
        if (specifier.startsWith(".")) {
          expect(specifier, file).toMatch(/\.js$/);
          queue.push(join(dirname(file), specifier.replace(/\.js$/, ".d.ts")));
        } else if (!specifier.startsWith("node:")) {
          const parts = specifier.split("/");
          const name = specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
          expect(typed, `${file} imports ${specifier}`).toContain(name);
        }
      }
    }
    expect(seen.size).toBeGreaterThan(20);
    expect(JSON.parse(readFileSync(join(outdir, "index.d.ts.map"), "utf8")).sources).toEqual([
      "../../index.ts",
    ]);
  });

  it("is the plain JS and declarations that package.json maps `keel` to: ESM, no keepNames, a sourcemap", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    expect(pkg.exports).toEqual({
      ".": { types: "./dist/index.d.ts", default: "./dist/index.js" },
      "./testing": { types: "./dist/testing.d.ts", default: "./dist/testing.js" },
      "./client": { types: "./dist/client/index.d.ts", default: "./dist/client.js" },
      "./package.json": "./package.json",
    });
    const js = readFileSync(join(outdir, "index.js"), "utf8");
    expect(js).toMatch(/^export \{/m);
    expect(js).not.toContain("__name(");
    expect(js).toContain("//# sourceMappingURL=index.js.map");
    // The agent's code is in index.js or, shared with the command (dist/cli.js), in a chunk
    // that index.js imports; either way a sourcemap leads back to the source.
    const sources = readdirSync(outdir)
      .filter((f) => f.endsWith(".js.map"))
      .flatMap((f) => JSON.parse(readFileSync(join(outdir, f), "utf8")).sources as string[]);
    expect(sources).toContain("../../actors/agent.ts");
    expect(readdirSync(outdir)).toContain("cli.js");
  });
});
