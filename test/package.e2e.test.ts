// The package as an embedder gets it: `npm pack` of the repository, installed from the tarball
// into a fresh project, type-checked by the user's compiler under the user's settings, the
// examples of the README and of every page under docs/ run against it, and the `keel` command installed globally into a
// temporary prefix and run from another folder. Slow (≈ 1 min: a build, two installs, three
// compilations), so everything is done once and each test reads a part of it.
import { execFile } from "node:child_process";
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
import { runNode } from "./support/run-keel.ts";

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
  "web-apps": [{ text: "Hello!" }],
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
  // The docs' AI SDK example imports a provider package and the README's example keeps its
  // sessions in SQLite: both optional peers, installed as their users install them.
  const anthropic = versionOf("@ai-sdk/anthropic");
  const sqlite = versionOf("better-sqlite3");
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
        `better-sqlite3@${sqlite}`,
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
  it("points types at built declarations, ships no source as types, and has zod as its one required peer", () => {
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
    // zod is the one required peer; the others (OpenTelemetry's API among them) are optional.
    expect(pkg.peerDependencies.zod).toMatch(/^\^4\./);
    expect(pkg.peerDependenciesMeta.zod).toBeUndefined();
    expect(
      Object.keys(pkg.peerDependencies).filter(
        (p) => p !== "zod" && !pkg.peerDependenciesMeta[p]?.optional,
      ),
    ).toEqual([]);
    expect(pkg.peerDependenciesMeta["@opentelemetry/api"]).toEqual({ optional: true });
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
    // A fragment is not run here, so each names, within the lines after it, the test that runs
    // what it shows; and fragments stay the exception.
    const fragments = ts.filter((f) => f.info.startsWith("ts fragment"));
    expect(fragments.length).toBeLessThanOrEqual(9);
    const unexercised = fragments.filter(({ file, line }) => {
      const text = markdown.find(([f]) => f === file)?.[1] ?? "";
      const after = text
        .split("\n")
        .slice(line, line + 45)
        .join("\n");
      const names = [...after.matchAll(/`(test\/[\w./-]+\.test\.ts)`/g)].map((m) => m[1]);
      return !names.some((n) => existsSync(join(ROOT, n)));
    });
    expect(unexercised.map((f) => `${f.file}:${f.line} ${f.info}`)).toEqual([]);
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
    // A dependency's declarations that need a types package it does not install (@ai-sdk/provider's
    // `json-schema`) fail every user who checks libraries: Keel depends on that package itself.
    expect(errors.filter((l) => l.includes("error TS7016"))).toEqual([]);
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
    // Installed alone, the command has neither a TypeScript loader nor the SQLite driver: it
    // runs compiled, and a command that needs SQLite says what to install (or how to do without).
    const modules = join(prefix, "lib", "node_modules");
    for (const absent of ["tsx", "esbuild", "better-sqlite3"]) {
      expect(existsSync(join(modules, absent)), absent).toBe(false);
      expect(existsSync(join(modules, "keel", "node_modules", absent)), absent).toBe(false);
    }
    const noSqlite = await sh("keel", ["demo", "--json", "--no-inspect"], elsewhere, env);
    expect(noSqlite.code).toBe(3);
    expect(noSqlite.stderr).toContain("npm install better-sqlite3@^12.11.1");
    expect(noSqlite.stderr).toContain("--store memory");
    expect(noSqlite.stderr.trim().split("\n")).toHaveLength(1);
    expect(existsSync(join(elsewhere, ".keel"))).toBe(false);
  });
});

describe("the lighter install: what only some embedders use is an optional peer", {
  timeout: 180_000,
}, () => {
  it("the tarball ships the docs and a LICENSE, and leaves out the contributors' scripts and the CLI's sources", async () => {
    const listed = ok("tar", await sh("tar", ["tzf", tarball], work)).stdout.split("\n");
    for (const file of [
      "LICENSE",
      "README.md",
      "docs/protocol.md",
      "docs/cli.md",
      "dist/cli.js",
      "cli/bin.js",
    ]) {
      expect(listed, file).toContain(`package/${file}`);
    }
    expect(listed.filter((f) => f.startsWith("package/scripts/"))).toEqual([]);
    expect(listed.filter((f) => /^package\/cli\/.*\.ts$/.test(f))).toEqual([]);
    const pkg = JSON.parse(
      readFileSync(join(project, "node_modules", "keel", "package.json"), "utf8"),
    );
    for (const runtime of [
      "tsx",
      "esbuild",
      "pg",
      "graphile-worker",
      "better-sqlite3",
      "gpt-tokenizer",
    ]) {
      expect(pkg.dependencies[runtime], runtime).toBeUndefined();
    }
  });

  it('keel and zod alone: import "keel" loads, a session runs in memory, and each optional feature says what to install', async () => {
    const minimal = join(work, "minimal");
    mkdirSync(minimal, { recursive: true });
    writeFileSync(
      join(minimal, "package.json"),
      JSON.stringify({ name: "minimal", private: true, type: "module" }),
    );
    const zod = JSON.parse(readFileSync(join(ROOT, "node_modules", "zod", "package.json"), "utf8"));
    ok(
      "npm install <tarball> zod",
      await sh("npm", ["install", ...NPM_QUIET, tarball, `zod@${zod.version}`], minimal),
    );
    for (const peer of [
      "better-sqlite3",
      "pg",
      "graphile-worker",
      "gpt-tokenizer",
      "@ai-sdk/openai",
      "tsx",
      "esbuild",
    ]) {
      expect(existsSync(join(minimal, "node_modules", peer)), peer).toBe(false);
    }
    writeFileSync(
      join(minimal, "check.js"),
      `import { createAgent, memoryStore, openaiModel, postgresStore, scriptedModel, sqliteStore, startWorker } from "keel";
const warnings = [];
process.on("warning", (w) => warnings.push(w.message));
const agent = createAgent({ model: scriptedModel([{ text: "hi" }]), store: memoryStore() });
const session = await agent.openSession("s");
const result = await session.prompt("hello");
await agent.close();
const failure = async (f) => { try { await f(); return "no error"; } catch (e) { return e.name + ": " + e.message; } };
const sqlite = await failure(() => sqliteStore("x.db"));
const pg = await failure(() => postgresStore("postgres://keel@127.0.0.1:9/keel"));
const fakeStore = { schema: "keel", pool: {} };
const worker = await failure(() => startWorker({ store: fakeStore, model: scriptedModel([]) }));
const model = openaiModel({ model: "gpt-4o-mini", apiKey: "k" });
await new Promise((r) => setImmediate(r));
console.log(JSON.stringify({ status: result.status, text: result.text, sqlite, pg, worker, counts: typeof model.countTokens, warnings }));
`,
    );
    const r = ok("node check.js", await sh(process.execPath, ["check.js"], minimal));
    const out = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
    expect(out).toMatchObject({ status: "completed", text: "hi", counts: "undefined" });
    expect(out.sqlite).toBe(
      "MissingPeerError: sqliteStore (the SQLite session store) needs the package better-sqlite3, an optional peer dependency of keel that is not installed: npm install better-sqlite3@^12.11.1",
    );
    expect(out.pg).toContain(
      "needs the package pg, an optional peer dependency of keel that is not installed: npm install pg@^8.23.1",
    );
    expect(out.worker).toContain("npm install graphile-worker@^0.17.3");
    expect(out.warnings).toEqual([
      expect.stringContaining(
        "npm install gpt-tokenizer@^4.0.0; until then they are estimated from characters",
      ),
    ]);
    expect(existsSync(join(minimal, ".keel"))).toBe(false);
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
  const run = await runNode([file], {
    cwd,
    unset: ["OPENAI_API_KEY", "OPENAI_BASE_URL", "KEEL_MODEL", "KEEL_CONTEXT_WINDOW"],
    env: {
      ...(extraEnv as Record<string, string>),
      KEEL_EXAMPLE_SCRIPT: JSON.stringify(script ?? []),
      KEEL_EXAMPLE_REPORT: reportFile,
    },
    killAfterMs: 30_000,
  });
  const result: Exec = { code: run.code ?? 1, stdout: run.stdout, stderr: run.stderr };
  const report = existsSync(reportFile) ? JSON.parse(readFileSync(reportFile, "utf8")) : undefined;
  return { ...result, report };
}
