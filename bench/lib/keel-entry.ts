/**
 * Which Keel the bench measures. By default the built package, `dist/index.js`: the esbuild
 * bundle that `npm ci` (`prepare`) and `npm run build` write and that an embedder's
 * `import "keel"` loads, as the peers are measured as the compiled JS they ship. `bench/run.ts`
 * rebuilds it before measuring ({@link buildKeel}), so it is always the current sources.
 * `KEEL_ENTRY=<file>` measures another entry instead, e.g. `KEEL_ENTRY=index.ts` for the
 * sources through tsx (whose keepNames wraps every function creation in a `__name` call).
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { isAbsolute, join, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { repoDir } from "./workload.ts";

export type KeelModule = typeof import("../../index.ts");

/** Names the entry to measure instead of the built package (a path, relative to the cwd). */
export const KEEL_ENTRY_ENV = "KEEL_ENTRY";

/** The built package's entry, as package.json "exports" maps `keel` to it. */
export const BUILT_ENTRY = join(repoDir, "dist", "index.js");

/** What the Keel harnesses import, and how RESULTS.md names it. */
export interface KeelEntry {
  /** Absolute path of the module imported. */
  file: string;
  /** True for the built package (dist/index.js, the default). */
  built: boolean;
  /** The path, relative to the repository when inside it. */
  shown: string;
  /** For the Machine table: the path and what it is. */
  label: string;
}

export function keelEntry(env: NodeJS.ProcessEnv = process.env): KeelEntry {
  const given = env[KEEL_ENTRY_ENV];
  const file = given ? resolve(given) : BUILT_ENTRY;
  const rel = relative(repoDir, file);
  const shown = rel.startsWith("..") || isAbsolute(rel) ? file : rel;
  const built = file === BUILT_ENTRY;
  return {
    file,
    built,
    shown,
    label: built
      ? `${shown} (the built package: esbuild bundle of index.ts)`
      : `${shown} (${KEEL_ENTRY_ENV}; not the built package${file.endsWith(".ts") ? ": TypeScript through tsx" : ""})`,
  };
}

/**
 * Runs scripts/build.mjs (dist/), failing with the build's own message. JavaScript only
 * (`--no-types`): the bench loads the bundle and never compiles against it, and the
 * declarations' type-check would add ≈ 10 s to every run.
 */
export function buildKeel(): void {
  try {
    execFileSync(process.execPath, [join(repoDir, "scripts", "build.mjs"), "--no-types"], {
      cwd: repoDir,
      stdio: ["ignore", "ignore", "pipe"],
      encoding: "utf8",
    });
  } catch (e) {
    const stderr = (e as { stderr?: string }).stderr?.trim();
    throw new Error(stderr || `scripts/build.mjs failed: ${(e as Error).message}`);
  }
}

/** Imports the entry to measure, checking it exports what the harnesses use. */
export async function importKeel(names: readonly (keyof KeelModule)[]): Promise<KeelModule> {
  const entry = keelEntry();
  if (!existsSync(entry.file)) {
    throw new Error(
      entry.built
        ? `Keel's built package ${entry.file} does not exist: run \`npm run build\` (npm ci does it), or set ${KEEL_ENTRY_ENV}=index.ts to measure the sources`
        : `${KEEL_ENTRY_ENV}=${process.env[KEEL_ENTRY_ENV]}: ${entry.file} does not exist`,
    );
  }
  const keel = (await import(pathToFileURL(entry.file).href)) as KeelModule;
  for (const name of names) {
    if (typeof keel[name] !== "function") {
      throw new Error(`Keel's entry ${entry.file} does not export ${name}`);
    }
  }
  return keel;
}
