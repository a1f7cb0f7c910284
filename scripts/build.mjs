#!/usr/bin/env node
// Builds the package: index.ts, testing.ts and client/index.ts bundled by esbuild into
// dist/index.js, dist/testing.js and dist/client.js (ESM, Node 20, every package external,
// sourcemaps, no keepNames), and their declarations (dist/index.d.ts, dist/testing.d.ts,
// dist/client/index.d.ts and the .d.ts of every module they reach, with declaration maps back
// to the shipped sources) emitted by TypeScript from tsconfig.build.json. Run by
// `npm run build` and by `prepare` (so `npm ci` and `npm pack` build it).
//
//   node scripts/build.mjs [outdir] [--no-types]   outdir: default dist/ (or $KEEL_BUILD_OUTDIR)
//
// package.json "exports" points `types` at the declarations, so an embedder's compiler reads
// them under its own settings and never checks Keel's sources. Code shared by the entries
// goes to shared chunks, so `keel` and `keel/testing` hand out the same functions. The
// inspector's page is copied to outdir/page/, where the bundled server looks for it.
import { cpSync, readdirSync, realpathSync, rmSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * What a build writes directly in outdir: its two entries, the shared chunks, their maps, and
 * the inspector's page. Removed before each build, so no chunk of an earlier build is left
 * (chunk names carry a hash); nothing else in outdir is touched.
 */
const OWN = /^(index|testing|client|chunk(-[A-Z0-9]+)?)\.js(\.map)?$/;

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
  const rewrite = (text) =>
    text.replace(/((?:from |import\()["'])(\.{1,2}\/[^"']*?)\.ts(["'])/g, "$1$2.js$3");
  const emitted = program.emit(undefined, (file, text, bom) => {
    ts.sys.writeFile(file, file.endsWith(".d.ts") ? rewrite(text) : text, bom);
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
