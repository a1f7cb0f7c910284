#!/usr/bin/env node
// Builds the package's JavaScript: index.ts, testing.ts and client/index.ts bundled by esbuild
// into dist/index.js, dist/testing.js and dist/client.js (ESM, Node 20, every package
// external, sourcemaps, no keepNames). Run by `npm run build` and by `prepare` (so `npm ci` builds it).
//
//   node scripts/build.mjs [outdir]      outdir: default dist/ (or $KEEL_BUILD_OUTDIR)
//
// Types stay the .ts sources (package.json "exports" → "types"). Code shared by the
// entries goes to shared chunks, so `keel` and `keel/testing` hand out the same functions. The
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

function clean(outdir) {
  let names = [];
  try {
    names = readdirSync(outdir);
  } catch {
    return; // no outdir yet
  }
  for (const name of names) if (OWN.test(name)) rmSync(join(outdir, name));
  rmSync(join(outdir, "page"), { recursive: true, force: true });
}

export async function buildKeel(outdir) {
  let esbuild;
  try {
    esbuild = await import("esbuild");
  } catch (e) {
    throw new Error(
      `cannot load esbuild (${e instanceof Error ? e.message : e}); it is a devDependency: run \`npm ci\` first`,
    );
  }
  clean(outdir);
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
  return result;
}

/** A path for messages: relative to the repository when inside it. */
function shown(path) {
  const rel = relative(root, path);
  return rel === "" || rel.startsWith("..") || isAbsolute(rel) ? path : rel;
}

const main = process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url);
if (main) {
  const outdir = resolve(process.argv[2] ?? process.env.KEEL_BUILD_OUTDIR ?? join(root, "dist"));
  const started = performance.now();
  try {
    const result = await buildKeel(outdir);
    for (const w of result.warnings) {
      const where = w.location ? `${w.location.file}:${w.location.line}: ` : "";
      process.stderr.write(`build: warning: ${where}${w.text}\n`);
    }
    const ms = Math.round(performance.now() - started);
    process.stderr.write(`build: ${shown(outdir)} in ${ms} ms\n`);
  } catch (e) {
    const errors = e?.errors ?? [];
    const detail =
      errors.length > 0
        ? errors
            .map((m) => `  ${m.location ? `${m.location.file}:${m.location.line}: ` : ""}${m.text}`)
            .join("\n")
        : `  ${e instanceof Error ? e.message : String(e)}`;
    process.stderr.write(
      `build: esbuild could not build ${shown(outdir)} from index.ts, testing.ts and client/index.ts:\n${detail}\n`,
    );
    process.exit(1);
  }
}
