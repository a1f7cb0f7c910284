#!/usr/bin/env node
// Builds the package's JavaScript: index.ts and testing.ts bundled by esbuild into
// dist/index.js and dist/testing.js (ESM, Node 20, every package external, sourcemaps, no
// keepNames). Run by `npm run build` and by `prepare` (so `npm ci` builds it).
//
//   node scripts/build.mjs [outdir]      outdir: default dist/ (or $KEEL_BUILD_OUTDIR)
//
// Types stay the .ts sources (package.json "exports" → "types"). Code shared by the two
// entries goes to one chunk, so `keel` and `keel/testing` hand out the same functions.
import { realpathSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * Inside a bundle `import.meta.url` is the output file's URL, not the source's. Sources that
 * find files next to themselves (inspector/server.ts reads inspector/page/) get their own
 * source's URL instead, written relative to the output file so dist/ can move with the sources.
 */
function sourceImportMetaUrl(outdir) {
  return {
    name: "source-import-meta-url",
    setup(build) {
      build.onLoad({ filter: /\.ts$/ }, async (args) => {
        if (args.path.includes(`${sep}node_modules${sep}`)) return undefined;
        const text = await readFile(args.path, "utf8");
        if (!text.includes("import.meta.url")) return undefined;
        const rel = relative(outdir, args.path).split(sep).join("/");
        const url = `new URL(${JSON.stringify(rel)}, import.meta.url).href`;
        return {
          contents: text.replaceAll("import.meta.url", url),
          loader: "ts",
          resolveDir: dirname(args.path),
        };
      });
    },
  };
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
  // Outputs all sit directly in outdir (chunks too): the import.meta.url rewrite relies on it.
  return esbuild.build({
    absWorkingDir: root,
    entryPoints: { index: join(root, "index.ts"), testing: join(root, "testing.ts") },
    outdir,
    bundle: true,
    splitting: true,
    chunkNames: "[name]",
    format: "esm",
    platform: "node",
    target: "node20",
    packages: "external",
    sourcemap: true,
    keepNames: false,
    logLevel: "silent",
    plugins: [sourceImportMetaUrl(outdir)],
  });
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
      `build: esbuild could not build ${shown(outdir)} from index.ts and testing.ts:\n${detail}\n`,
    );
    process.exit(1);
  }
}
