#!/usr/bin/env node
// Builds the package: index.ts, testing.ts, client/index.ts and the `keel` command
// (cli/main.ts) bundled by esbuild into dist/index.js, dist/testing.js, dist/client.js and
// dist/cli.js (ESM, Node 20, every package external,
// sourcemaps, no keepNames), and their declarations (dist/index.d.ts, dist/testing.d.ts,
// dist/client/index.d.ts and the .d.ts of every module they reach, with declaration maps back
// to the shipped sources) emitted by TypeScript from tsconfig.build.json. Run by
// `npm run build` and `prepack` (so `npm pack` ships both); `prepare` (so `npm ci`) builds the
// JavaScript only: a clone runs it (benchmarks, the compiled CLI), and the declarations, which
// only an embedder's compiler reads, take most of a build's time.
//
//   node scripts/build.mjs [outdir] [--no-types]   outdir: default dist/ (or $KEEL_BUILD_OUTDIR)
//
// package.json "exports" points `types` at the declarations, so an embedder's compiler reads
// them under its own settings and never checks Keel's sources. Code shared by the entries
// goes to shared chunks, so `keel` and `keel/testing` hand out the same functions. The
// inspector's page is copied to outdir/page/, where the bundled server looks for it.
import { cpSync, readdirSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * What a build writes directly in outdir: its four entries, the shared chunks, their maps, and
 * the inspector's page. Removed before each build, so no chunk of an earlier build is left
 * (chunk names carry a hash); nothing else in outdir is touched.
 */
const OWN = /^(index|testing|client|cli|chunk(-[A-Z0-9]+)?)\.js(\.map)?$/;

/**
 * The optional peer dependencies (package.json's peerDependenciesMeta): an embedder who does
 * not use a peer's feature does not install it, so a declaration that imports its types must
 * not fail their compiler under `skipLibCheck: false`.
 */
const OPTIONAL_PEERS = Object.keys(
  JSON.parse(readFileSync(join(root, "package.json"), "utf8")).peerDependenciesMeta ?? {},
);

/**
 * Marks each import of an optional peer's types in an emitted declaration with `@ts-ignore`:
 * with the peer (and its types) installed the import resolves and is checked as any other;
 * without it the import's types are `any` instead of an error in Keel's declarations.
 */
export function toleratePeerImports(text) {
  /** 0-based lines of the input before which a line was inserted (for the declaration map). */
  const inserted = [];
  const lines = text.split("\n");
  const out = [];
  for (const [i, line] of lines.entries()) {
    const specifier = /^import\b.*?\bfrom ["']([^"']+)["'];?$/.exec(line)?.[1];
    const peer = OPTIONAL_PEERS.find((p) => specifier === p || specifier?.startsWith(`${p}/`));
    if (peer) {
      out.push(
        `// @ts-ignore: ${peer} is an optional peer of keel; its types are read when it is installed`,
      );
      inserted.push(i);
    }
    out.push(line);
  }
  return { text: out.join("\n"), inserted };
}

/** A declaration map whose generated file got empty lines before the 0-based `inserted` lines. */
export function shiftMap(json, inserted) {
  if (inserted.length === 0) return json;
  const map = JSON.parse(json);
  const lines = map.mappings.split(";");
  for (const at of [...inserted].reverse()) lines.splice(at, 0, "");
  map.mappings = lines.join(";");
  return JSON.stringify(map);
}

/** What the declaration emit writes: `.d.ts` files and their maps, in any folder. */
const DECLARATION = /\.d\.ts(\.map)?$/;

function clean(outdir, { types }) {
  let names = [];
  try {
    names = readdirSync(outdir);
  } catch {
    return; // no outdir yet
  }
  for (const name of names) if (OWN.test(name)) rmSync(join(outdir, name));
  rmSync(join(outdir, "page"), { recursive: true, force: true });
  if (types) removeDeclarations(outdir, true);
}

/** Removes the declarations under dir, and the folders left empty (not dir itself). */
function removeDeclarations(dir, top) {
  let left = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory() && !(top && entry.name === "page")) {
      if (removeDeclarations(path, false)) left++;
    } else if (entry.isFile() && DECLARATION.test(entry.name)) rmSync(path);
    else left++;
  }
  if (!top && left === 0) rmSync(dir, { recursive: true });
  return left > 0;
}

/**
 * The declarations of the three entries (and of every module they reach) in outdir,
 * type-checked as they are emitted. The sources import with `.ts` extensions; in the emitted
 * declarations relative specifiers end in `.js`, which every `moduleResolution` of an
 * embedder's project maps to the `.d.ts` beside it.
 */
async function emitDeclarations(outdir) {
  let ts;
  try {
    ts = (await import("typescript")).default;
  } catch (e) {
    throw new Error(
      `cannot load typescript (${e instanceof Error ? e.message : e}); it is a devDependency: run \`npm ci\` first`,
    );
  }
  const config = ts.getParsedCommandLineOfConfigFile(
    join(root, "tsconfig.build.json"),
    { outDir: outdir },
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => fail([d]) },
  );
  if (config.errors.length > 0) fail(config.errors);
  const program = ts.createProgram({ rootNames: config.fileNames, options: config.options });
  const relative = (text) =>
    text.replace(/((?:from |import\()["'])(\.{1,2}\/[^"']*?)\.ts(["'])/g, "$1$2.js$3");
  // A declaration and its map may be written in either order: the map waits for its file.
  const insertedIn = new Map();
  const mapsWaiting = new Map();
  const emitted = program.emit(undefined, (file, text, bom) => {
    if (file.endsWith(".d.ts")) {
      const tolerated = toleratePeerImports(relative(text));
      insertedIn.set(file, tolerated.inserted);
      ts.sys.writeFile(file, tolerated.text, bom);
      const waiting = mapsWaiting.get(`${file}.map`);
      if (waiting) ts.sys.writeFile(`${file}.map`, shiftMap(waiting.text, tolerated.inserted), bom);
    } else if (file.endsWith(".d.ts.map")) {
      const inserted = insertedIn.get(file.slice(0, -".map".length));
      if (inserted) ts.sys.writeFile(file, shiftMap(text, inserted), bom);
      else mapsWaiting.set(file, { text });
    } else ts.sys.writeFile(file, text, bom);
  });
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...emitted.diagnostics];
  if (diagnostics.length > 0 || emitted.emitSkipped) fail(diagnostics);

  function fail(list) {
    const text = ts.formatDiagnostics(list, {
      getCanonicalFileName: (f) => f,
      getCurrentDirectory: () => root,
      getNewLine: () => "\n",
    });
    throw new Error(`TypeScript could not emit the declarations:\n${text.trim()}`);
  }
}

/**
 * Builds outdir. `types: false` writes only the JavaScript (and leaves any declarations there
 * alone): for tests and benchmarks that load the bundle and never compile against it.
 */
export async function buildKeel(outdir, { types = true } = {}) {
  let esbuild;
  try {
    esbuild = await import("esbuild");
  } catch (e) {
    throw new Error(
      `cannot load esbuild (${e instanceof Error ? e.message : e}); it is a devDependency: run \`npm ci\` first`,
    );
  }
  clean(outdir, { types });
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: {
      index: join(root, "index.ts"),
      testing: join(root, "testing.ts"),
      // keel/client (the control-protocol client): spawns ../cli/bin.js relative to dist/.
      client: join(root, "client", "index.ts"),
      // The `keel` command (cli/bin.js imports it): compiled, so no TypeScript loader is a
      // runtime dependency of the package.
      cli: join(root, "cli", "main.ts"),
    },
    outdir,
    bundle: true,
    splitting: true,
    chunkNames: "chunk-[hash]",
    format: "esm",
    platform: "node",
    target: "node20",
    packages: "external",
    sourcemap: true,
    keepNames: false,
    logLevel: "silent",
  });
  // inspector/server.ts serves the page next to its module (`new URL("./page/",
  // import.meta.url)`); bundled, its module is a file of outdir, so the page goes there too.
  cpSync(join(root, "inspector", "page"), join(outdir, "page"), { recursive: true });
  if (types) await emitDeclarations(outdir);
  return result;
}

/** A path for messages: relative to the repository when inside it. */
function shown(path) {
  const rel = relative(root, path);
  return rel === "" || rel.startsWith("..") || isAbsolute(rel) ? path : rel;
}

const main = process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url);
if (main) {
  const args = process.argv.slice(2);
  const types = !args.includes("--no-types");
  const given = args.find((a) => !a.startsWith("--"));
  const outdir = resolve(given ?? process.env.KEEL_BUILD_OUTDIR ?? join(root, "dist"));
  const started = performance.now();
  try {
    const result = await buildKeel(outdir, { types });
    for (const w of result.warnings) {
      const where = w.location ? `${w.location.file}:${w.location.line}: ` : "";
      process.stderr.write(`build: warning: ${where}${w.text}\n`);
    }
    const ms = Math.round(performance.now() - started);
    process.stderr.write(
      `build: ${shown(outdir)}${types ? " (JavaScript and declarations)" : " (JavaScript only)"} in ${ms} ms\n`,
    );
  } catch (e) {
    const errors = e?.errors ?? [];
    const detail =
      errors.length > 0
        ? errors
            .map((m) => `  ${m.location ? `${m.location.file}:${m.location.line}: ` : ""}${m.text}`)
            .join("\n")
        : `  ${e instanceof Error ? e.message : String(e)}`;
    process.stderr.write(
      `build: could not build ${shown(outdir)} from index.ts, testing.ts and client/index.ts:\n${detail}\n`,
    );
    process.exit(1);
  }
}
