import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The one workload every runtime runs: a prompt, then per step one model response with
 * `callsPerStep` calls of a trivial tool (one string argument, returns "ok"), results fed
 * back, and after the last step a response with final text.
 */
export const workload = {
  prompt: "Call the tool until you are told to stop.",
  system: "You are a benchmark.",
  toolName: "touch",
  toolDescription: "Touches a file (trivial tool for the benchmark: returns ok).",
  argsJson: '{"path":"a.txt"}',
  args: { path: "a.txt" },
  toolResult: "ok",
  finalText: "done",
} as const;

/** A call id unique within a run: step and position in the response. */
export function callId(step: number, index: number): string {
  return `call_${step}_${index}`;
}

/** Absolute path of bench/. */
export const benchDir = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Absolute path of the repository root (where index.ts lives). */
export const repoDir = join(benchDir, "..");

/** The installed version of a package from bench/node_modules (or the root's), or null. */
export function installedVersion(pkg: string): string | null {
  for (const base of [join(benchDir, "node_modules"), join(repoDir, "node_modules")]) {
    const file = join(base, pkg, "package.json");
    if (existsSync(file))
      return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
  }
  return null;
}

/**
 * Imports a peer runtime from bench/node_modules. The specifier is a runtime value on purpose:
 * the repository typechecks without the peers installed (they are bench/'s dev dependencies),
 * so each harness states the small part of the peer's API it uses as a local type.
 */
export async function loadPeer<T>(specifier: string): Promise<T> {
  const pkg = specifier.startsWith("@")
    ? specifier.split("/").slice(0, 2).join("/")
    : specifier.split("/")[0];
  if (!existsSync(join(benchDir, "node_modules", pkg, "package.json"))) {
    throw new Error(
      `peer ${pkg} is not installed: run \`npm install\` in bench/ (the peers are bench/'s own dev dependencies)`,
    );
  }
  return (await import(specifier)) as T;
}
