// Vitest global setup: `npm test` writes only to temporary folders (and test-output/). It
// notes what the clone's .keel/ holds and which entries its root has before the run, and
// fails the run if either changed after it: a test that ran the demo or a command with the
// default store in the repository's own folder wrote a session into the clone.
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "..", "..");
/** Root entries tests and tools may create: build output, test artefacts, installs. */
const ALLOWED = new Set(["test-output", "dist", "node_modules", "docs"]);

/** `<path> <size> <mtime>` for every file under dir, sorted; [] when dir does not exist. */
export function listing(dir: string): string[] {
  let entries: string[];
  try {
    entries = readdirSync(dir, { recursive: true }) as string[];
  } catch {
    return [];
  }
  return entries
    .map((name) => {
      const info = statSync(join(dir, name), { throwIfNoEntry: false });
      return info?.isFile() ? `${name} ${info.size} ${info.mtimeMs}` : undefined;
    })
    .filter((line): line is string => line !== undefined)
    .sort();
}

/** What changed between two listings, as lines for a message. */
export function changes(before: string[], after: string[]): string[] {
  const was = new Set(before);
  const is = new Set(after);
  return [
    ...after.filter((l) => !was.has(l)).map((l) => `+ ${l}`),
    ...before.filter((l) => !is.has(l)).map((l) => `- ${l}`),
  ];
}

export default function setup(): () => void {
  return guardClone(ROOT);
}

/**
 * Notes what `root`'s .keel/ holds and which entries `root` has; the returned teardown sets
 * `process.exitCode = 1` and throws, saying what, when either changed since.
 */
export function guardClone(root: string): () => void {
  const keelBefore = listing(join(root, ".keel"));
  const rootBefore = new Set(readdirSync(root));
  return () => {
    const keel = changes(keelBefore, listing(join(root, ".keel")));
    const created = readdirSync(root).filter((n) => !rootBefore.has(n) && !ALLOWED.has(n));
    if (keel.length === 0 && created.length === 0) return;
    // A throw here is only logged by vitest ("error during close"): the exit code is ours to set.
    process.exitCode = 1;
    throw new Error(
      [
        "npm test wrote into the clone: tests must write only to temporary folders (or test-output/).",
        ...(keel.length > 0 ? [`.keel/ changed:`, ...keel.map((l) => `  ${l}`)] : []),
        ...(created.length > 0 ? [`new at the root: ${created.join(", ")}`] : []),
        "Run the offending command with a temporary cwd or --store (e.g. memory).",
      ].join("\n"),
    );
  };
}
