// The package as an embedder gets it: `npm pack` of the repository, installed from the tarball
// into a fresh project, type-checked by the user's compiler under the user's settings, the
// examples of the README and of every page under docs/ run against it, and the `keel` command installed globally into a
// temporary prefix and run from another folder. Slow (≈ 1 min: a build, two installs, three
// compilations), so everything is done once and each test reads a part of it.
import { execFile, spawn } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ScriptStep } from "../providers/scripted-model.ts";
import {
  type FakeReply,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";
import { examplesOf, fenceInfos, type ReadmeExample } from "./support/readme-examples.ts";

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "..");
const TSC = join(ROOT, "node_modules", "typescript", "bin", "tsc");
const NPM_QUIET = ["--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"];

/**
 * What stands in for the model in each example that calls `openaiModel` (no key in tests).
 * An example that needs none is absent.
 */
const SCRIPTS: Record<string, ScriptStep[]> = {
  embedding: [
    { toolCalls: [{ id: "call_1", name: "read_note", arguments: '{"id":"7"}' }] },
    { text: "Note 7 is a shopping list, written on 3 May." },
    { text: "Related notes: 3 and 9." },
  ],
  inspector: [{ text: "Hello!" }],
};

/**
 * Examples whose model runs in another process (`keel serve`, spawned by keel/client): an
 * OpenAI-compatible fake on 127.0.0.1 stands in for the provider there (OPENAI_BASE_URL).
 */
const SERVED: Record<string, () => FakeReply[]> = {
  client: () => [
    streamReply({ calls: [{ id: "call_1", name: "get_weather", args: '{"city":"Lisbon"}' }] }),
    streamReply({ text: "Sunny in Lisbon." }),
  ],
};

/**
 * Replaces `openaiModel` in a compiled example (its `from "keel"` is rewritten to this file):
 * a scripted model plays the script in KEEL_EXAMPLE_SCRIPT, and at exit the file
 * KEEL_EXAMPLE_REPORT says how many requests it got and whether one told the model that a
 * previous turn was cut short.
 */
const SHIM = `export * from "keel";
import { writeFileSync } from "node:fs";
import { scriptedModel } from "keel/testing";
const models = [];
export function openaiModel(options) {
  const model = scriptedModel(JSON.parse(process.env.KEEL_EXAMPLE_SCRIPT), {
    name: "scripted stand-in for " + options.model,
  });
  models.push(model);
  return model;
}
process.on("exit", () => {
  const requests = models.flatMap((m) => m.requests);
  writeFileSync(process.env.KEEL_EXAMPLE_REPORT, JSON.stringify({
    requests: requests.length,
    cutShort: requests.some((r) => JSON.stringify(r.messages).includes("was cut short")),
  }));
});
`;

/** The strictest settings a user may compile with, Keel's declarations checked too. */
const LIBCHECK = {
  compilerOptions: {
    module: "nodenext",
    target: "es2022",
    strict: true,
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
    noImplicitOverride: true,
    skipLibCheck: false,
    types: ["node"],
    noEmit: true,
  },
  include: ["examples"],
};

let work = "";
let project = "";
let tarball = "";
let examples: ReadmeExample[] = [];
/** The README and every page under docs/, as the installed package holds them. */
let markdown: [file: string, text: string][] = [];

/** `README.md` and every `.md` file under `docs/` of an installed package, relative paths, sorted. */
function markdownOf(pkg: string): [string, string][] {
  const files = ["README.md"];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(pkg, dir), { withFileTypes: true })) {
      const rel = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith(".md")) files.push(rel);
    }
  };
  if (existsSync(join(pkg, "docs"))) walk("docs");
  return files.sort().map((f) => [f, readFileSync(join(pkg, f), "utf8")]);
}

interface Exec {
  code: number;
  stdout: string;
  stderr: string;
}

async function sh(file: string, args: string[], cwd: string, env?: NodeJS.ProcessEnv) {
  try {
    const r = await run(file, args, {
      cwd,
      env: env ?? process.env,
      encoding: "utf8",
      maxBuffer: 64 << 20,
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr } satisfies Exec;
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return {
      code: typeof err.code === "number" ? err.code : 1,
      stdout: err.stdout ?? "",
      stderr: err.stderr ?? String(e),
    } satisfies Exec;
  }
}

function ok(what: string, r: Exec): Exec {
  if (r.code !== 0) throw new Error(`${what} failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  return r;
}

/** `npm pack` of a copy of the working tree (what git tracks or would), built by `prepare`. */
async function pack(): Promise<string> {
  const src = join(work, "src");
  const listed = ok(
    "git ls-files",
    await sh("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], ROOT),
  );
  for (const file of listed.stdout.split("\0")) {
    if (!file || file === "node_modules" || !existsSync(join(ROOT, file))) continue;
    mkdirSync(dirname(join(src, file)), { recursive: true });
    cpSync(join(ROOT, file), join(src, file));
  }
  // The build's own tools (esbuild, TypeScript) from the repository's install.
  symlinkSync(realpathSync(join(ROOT, "node_modules")), join(src, "node_modules"));
  const packed = ok(
    "npm pack",
    await sh("npm", ["pack", "--json", "--pack-destination", work, ...NPM_QUIET], src),
  );
  const [{ filename }] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf("["))) as {
    filename: string;
  }[];
  return join(work, filename);
}

/**
 * better-sqlite3's install script fetches a prebuilt binary or compiles SQLite (minutes on
 * this machine, and its download host is out of reach here): installs run with
 * --ignore-scripts and get the binary the repository's own install built, for the same
 * version and Node.
 */
function addSqliteBinary(nodeModules: string): void {
  const ours = join(ROOT, "node_modules", "better-sqlite3");
  const theirs = join(nodeModules, "better-sqlite3");
  const version = (dir: string) => JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  expect(version(theirs).version).toBe(version(ours).version);
  const binary = join("build", "Release", "better_sqlite3.node");
  mkdirSync(dirname(join(theirs, binary)), { recursive: true });
  cpSync(join(ours, binary), join(theirs, binary));
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "keel-package-"));
  tarball = await pack();
  project = join(work, "app");
  mkdirSync(join(project, "examples"), { recursive: true });
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({ name: "app", private: true, type: "module" }),
  );
  const versionOf = (name: string) =>
    JSON.parse(readFileSync(join(ROOT, "node_modules", name, "package.json"), "utf8")).version;
  const typesNode = versionOf("@types/node");
  // The README's AI SDK example imports a provider package, as its user installs it.
  const anthropic = versionOf("@ai-sdk/anthropic");
  ok(
    "npm install <tarball>",
    await sh(
      "npm",
      [
        "install",
        "--ignore-scripts",
        ...NPM_QUIET,
        tarball,
        `@types/node@${typesNode}`,
        `@ai-sdk/anthropic@${anthropic}`,
      ],
      project,
    ),
  );
  addSqliteBinary(join(project, "node_modules"));
  ok("tsc --init", await sh(process.execPath, [TSC, "--init"], project));
  markdown = markdownOf(join(project, "node_modules", "keel"));
  examples = examplesOf(markdown);
  for (const e of examples) writeFileSync(join(project, "examples", `${e.name}.ts`), e.code);
  writeFileSync(join(project, "tsconfig.libcheck.json"), JSON.stringify(LIBCHECK, null, 2));
}, 300_000);

// Two installs' worth of files: slow to remove on a busy machine.
afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
}, 120_000);

describe("the packed package in a fresh project", { timeout: 120_000 }, () => {
  it("points types at built declarations, ships no source as types, and has zod as a peer only", () => {
    const pkg = JSON.parse(
      readFileSync(join(project, "node_modules", "keel", "package.json"), "utf8"),
    );
    expect(pkg.exports["."]).toEqual({ types: "./dist/index.d.ts", default: "./dist/index.js" });
    expect(pkg.exports["./testing"]).toEqual({
      types: "./dist/testing.d.ts",
      default: "./dist/testing.js",
    });
    expect(pkg.exports["./client"]).toEqual({
      types: "./dist/client/index.d.ts",
      default: "./dist/client.js",
    });
    for (const file of ["index.d.ts", "index.d.ts.map", "testing.d.ts", "client/index.d.ts"]) {
      expect(existsSync(join(project, "node_modules", "keel", "dist", file))).toBe(true);
    }
    expect(pkg.peerDependencies).toEqual({ zod: expect.stringMatching(/^\^4\./) });
    expect(pkg.dependencies.zod).toBeUndefined();
    // One zod in the program: the user's, which Keel's schemas use too.
    expect(existsSync(join(project, "node_modules", "zod"))).toBe(true);
    expect(existsSync(join(project, "node_modules", "keel", "node_modules", "zod"))).toBe(false);
  });

  it("ships docs/ with the guide pages the README's map links to", () => {
    const files = markdown.map(([file]) => file);
    for (const page of ["embedding", "tools", "providers", "protocol", "architecture", "cli"]) {
      expect(files).toContain(`docs/${page}.md`);
    }
  });

  it("the TypeScript blocks of the README and docs/ are all examples or marked fragments, and there are some", () => {
    // `ts fragment <name>`: an excerpt that needs the reader's own code around it (a checks
    // spec, a property); each is exercised by the test named in the page next to it.
    const ts = markdown.flatMap(([file, text]) =>
      fenceInfos(text)
        .filter((f) => /^(ts|typescript)\b/.test(f.info))
        .map((f) => ({ file, ...f })),
    );
    const unmarked = ts.filter((f) => !/^ts (example|fragment) \S+$/.test(f.info));
    expect(unmarked).toEqual([]);
    expect(ts.filter((f) => f.info.startsWith("ts fragment")).length).toBeLessThanOrEqual(2);
    expect(examples.map((e) => e.name)).toEqual(
      expect.arrayContaining(["embedding", "inspector", "testing", "client", "ai-sdk"]),
    );
  });

  it("every example type-checks and compiles under a plain `tsc --init` configuration", async () => {
    const r = await sh(process.execPath, [TSC, "-p", ".", "--outDir", "build"], project);
    expect(r.stdout + r.stderr).toBe("");
    expect(r.code).toBe(0);
  });

  it("with module nodenext and skipLibCheck off, Keel's own declarations check under the user's strictest settings", async () => {
    const r = await sh(process.execPath, [TSC, "-p", "tsconfig.libcheck.json"], project);
    const errors = (r.stdout + r.stderr)
      .split("\n")
      .filter((l) => /^\S+\(\d+,\d+\): error/.test(l));
    // Other packages' declarations are theirs to fix (xstate's do not compile under
    // exactOptionalPropertyTypes); Keel's and the examples must.
    const ours = errors.filter(
      (l) => !l.startsWith("node_modules/") || l.startsWith("node_modules/keel/"),
    );
    expect(ours).toEqual([]);
    expect(errors.length === 0 || r.code !== 0).toBe(true);
  });

  it("every example of the README and docs/ runs against the package; a scripted model stands in for openaiModel", async () => {
    for (const e of examples) {
      const served = Object.hasOwn(SERVED, e.name) ? SERVED[e.name] : undefined;
      const fake = served ? await startFakeOpenAIServer() : undefined;
      if (fake && served) fake.enqueue(...served());
      const result = await runExample(
        e.name,
        fake
          ? {
              OPENAI_BASE_URL: fake.baseURL,
              KEEL_MODEL: "fake-model",
              KEEL_CONTEXT_WINDOW: "32768",
            }
          : {},
      ).finally(() => fake?.close());
      expect(result, `${e.name} (${e.file}:${e.line})`).toMatchObject({ code: 0 });
      if (served) expect(fake?.requests.length, e.name).toBe(served().length);
      if (SCRIPTS[e.name]) {
        expect(result.report, e.name).toEqual({
          requests: SCRIPTS[e.name].length,
          cutShort: false,
        });
      }
    }
  });

  it("the embedding example lets its follow-up turn finish: a second run is not told a turn was cut short", async () => {
    const second = await runExample("embedding"); // the same folder: the same SQLite store
    expect(second.code).toBe(0);
    expect(second.report).toEqual({ requests: 3, cutShort: false });
    const check = join(project, "build", "check-store.js");
    writeFileSync(
      check,
      `import { readSession, sqliteStore } from "keel";
const store = sqliteStore(".keel/keel.db");
const { entries } = await readSession(store, "my-session");
await store.close();
console.log(JSON.stringify(entries.filter((e) => e.type === "turn_end" || e.type === "turn_aborted")
  .map((e) => e.type === "turn_end" ? e.status : "aborted")));`,
    );
    const r = ok(
      "check-store",
      await sh(process.execPath, [check], join(project, "run-embedding")),
    );
    expect(JSON.parse(r.stdout)).toEqual(["completed", "completed", "completed", "completed"]);
  });

  it("npm install -g of the tarball into a temporary prefix gives a keel command that runs from another folder", async () => {
    const prefix = join(work, "global");
    ok(
      "npm install -g",
      await sh(
        "npm",
        ["install", "-g", "--prefix", prefix, "--ignore-scripts", ...NPM_QUIET, tarball],
        work,
      ),
    );
    const elsewhere = mkdtempSync(join(work, "elsewhere-"));
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PATH: `${join(prefix, "bin")}:${process.env.PATH}`,
    };
    for (const key of ["OPENAI_API_KEY", "OPENAI_BASE_URL"]) delete env[key];
    const help = await sh("keel", ["--help"], elsewhere, env);
    expect(help.code).toBe(0);
    for (const command of ["demo", "run", "resume", "sessions", "show", "inspect"]) {
      expect(help.stdout).toContain(command);
    }
    const demo = await sh(
      "keel",
      ["demo", "--json", "--no-inspect", "--store", "memory"],
      elsewhere,
      env,
    );
    expect(demo.stderr).toBe("");
    expect(demo.code).toBe(0);
    expect(JSON.parse(demo.stdout.trim().split("\n").at(-1)!)).toMatchObject({
      type: "result",
      status: "completed",
    });
    expect(existsSync(join(elsewhere, ".keel"))).toBe(false);
  });
});

let runs = 0;

/** Runs a compiled example as plain Node in its folder `run-<name>` (kept between runs). */
async function runExample(name: string, extraEnv: NodeJS.ProcessEnv = {}) {
  const build = join(project, "build");
  let file = join(build, `${name}.js`);
  const script = SCRIPTS[name];
  const reportFile = join(work, `report-${++runs}.json`);
  if (script) {
    writeFileSync(join(build, "keel-shim.js"), SHIM);
    const compiled = readFileSync(file, "utf8");
    expect(compiled).toContain('from "keel"');
    file = join(build, `${name}.scripted.js`);
    writeFileSync(file, compiled.replaceAll('from "keel"', 'from "./keel-shim.js"'));
  }
  const cwd = join(project, `run-${name}`);
  mkdirSync(cwd, { recursive: true });
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const key of ["OPENAI_API_KEY", "OPENAI_BASE_URL", "KEEL_MODEL", "KEEL_CONTEXT_WINDOW"]) {
    delete env[key];
  }
  Object.assign(env, {
    ...extraEnv,
    KEEL_EXAMPLE_SCRIPT: JSON.stringify(script ?? []),
    KEEL_EXAMPLE_REPORT: reportFile,
  });
  const result = await new Promise<Exec>((resolve) => {
    const child = spawn(process.execPath, [file], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? 1, stdout, stderr });
    });
  });
  const report = existsSync(reportFile) ? JSON.parse(readFileSync(reportFile, "utf8")) : undefined;
  return { ...result, report };
}
