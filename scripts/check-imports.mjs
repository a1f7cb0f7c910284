#!/usr/bin/env node
// The folders' import rules (docs/architecture.md), checked by `npm run lint`: a file may import only the
// Keel folders its own folder lists, and `contracts/` and `machines/` only the packages listed.
// Run: `node scripts/check-imports.mjs [root]`; exits 1 and names each wrong-way import.
import { readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Each folder: which Keel folders (or top-level files) it may import, and which packages
 * (`null`: any). The first matching prefix wins, so a sub-folder listed before its parent gets
 * its own rule.
 */
export const RULES = [
  { folder: "contracts/", keel: ["contracts/"], packages: [] },
  { folder: "machines/policies/", keel: ["machines/policies/", "contracts/"], packages: [] },
  { folder: "machines/", keel: ["machines/", "contracts/"], packages: ["xstate"] },
  { folder: "tools/", keel: ["tools/", "contracts/"], packages: null },
  { folder: "session/", keel: ["session/", "contracts/", "machines/policies/"], packages: null },
  { folder: "providers/", keel: ["providers/", "contracts/"], packages: null },
  {
    folder: "actors/",
    keel: ["actors/", "contracts/", "machines/", "tools/", "session/", "providers/"],
    packages: null,
  },
  // The inspector is re-exported by index.ts, so it must not import index.ts (a cycle, even
  // type-only, is two files that cannot be read apart). It reads the vocabulary directly:
  // `contracts/`, the log's entry and store types, the inspection sink it implements, and
  // `machines/` (pure charts, no I/O): a replayed session's statecharts are drawn from the
  // machines' definitions, with no live actor to read them from. A replay runs the stored
  // session through the shipped charts and hosts (actors/replay-session.ts, no copy of a chart)
  // and reports where it differs from the log (session/replay-compare.ts).
  {
    folder: "inspector/",
    keel: [
      "inspector/",
      "contracts/",
      "machines/",
      "session/entries.ts",
      "session/store.ts",
      "session/replay-compare.ts",
      "actors/events.ts",
      "actors/replay-session.ts",
    ],
    packages: null,
  },
  // The HTTP transport is re-exported by index.ts too, so it may not import index.ts either: it
  // reads the types of the agent, the session, the store and the log, and the vocabulary.
  {
    folder: "http/",
    keel: [
      "http/",
      "contracts/",
      "session/entries.ts",
      "session/store.ts",
      "actors/agent-options.ts",
      "actors/session.ts",
    ],
    packages: null,
  },
  // The command also reads the control protocol's vocabulary (contracts/protocol.ts, ndjson.ts)
  // where keel/client does, so that `keel`'s own entry need not export it.
  { folder: "cli/", keel: ["cli/", "index.ts", "contracts/", "package.json"], packages: null },
  { folder: "client/", keel: ["client/", "contracts/"], packages: null },
];

const SOURCE = /\.(ts|mts|js|mjs)$/;
const SKIP = new Set([
  "node_modules",
  "dist",
  ".git",
  "test-output",
  ".keel",
  "page",
  ".stryker-tmp",
]);
const IMPORT =
  /(?:^|[\s;])(?:import|export)(?:[\s\w{},*]*?from\s*)?\s*["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g;

function* files(dir, root) {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) yield* files(full, root);
    else if (SOURCE.test(name) && !name.endsWith(".d.ts")) yield path.relative(root, full);
  }
}

/** The import specifiers of a source text (comments removed first). */
export function importsOf(text) {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/.*$/gm, "$1");
  return [...code.matchAll(IMPORT)].map((m) => m[1] ?? m[2]);
}

const REEXPORT = /(?:^|[\s;])export\s+(?:type\s+)?(?:\*(?:\s+as\s+\w+)?|\{[^}]*\})\s*from\s*["']/;
/** The only barrels: the public API's entries (`keel`, `keel/testing`, `keel/client`). */
const BARRELS = new Set(["index.ts", "testing.ts", "client/index.ts"]);

/** Whether a source text re-exports another module (`export … from`; comments removed first). */
export function reexports(text) {
  return REEXPORT.test(text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/.*$/gm, "$1"));
}

/**
 * The wrong-way imports under `root`, one message each; also any re-export outside the public
 * API's entries (a convenience barrel hides which module defines a name: import from it).
 */
export function violations(root) {
  const found = [];
  for (const file of files(root, root)) {
    const rel = file.split(path.sep).join("/");
    if (!BARRELS.has(rel) && reexports(readFileSync(path.join(root, file), "utf8"))) {
      found.push(`${rel}: re-exports another module; only ${[...BARRELS].join(" and ")} may`);
    }
    const rule = RULES.find((r) => rel.startsWith(r.folder));
    if (!rule) continue;
    for (const spec of importsOf(readFileSync(path.join(root, file), "utf8"))) {
      if (spec.startsWith(".")) {
        const target = path.posix.normalize(path.posix.join(path.posix.dirname(rel), spec));
        if (target.startsWith("..")) continue;
        if (!rule.keel.some((k) => (k.endsWith("/") ? target.startsWith(k) : target === k))) {
          found.push(
            `${rel}: imports ${spec} (${target}); ${rule.folder} may import only ${rule.keel.join(", ")}`,
          );
        }
      } else if (rule.packages !== null) {
        const pkg = spec.startsWith("@")
          ? spec.split("/").slice(0, 2).join("/")
          : spec.split("/")[0];
        if (!rule.packages.includes(pkg)) {
          const allowed = rule.packages.length ? rule.packages.join(", ") : "no package";
          found.push(`${rel}: imports "${spec}"; ${rule.folder} may import ${allowed} (no I/O)`);
        }
      }
    }
  }
  return found;
}

// Run as a script (a path with spaces or a symlink included), not imported by a test.
if (
  process.argv[1] &&
  realpathSync(fileURLToPath(import.meta.url)) === realpathSync(process.argv[1])
) {
  const root = path.resolve(process.argv[2] ?? path.join(path.dirname(process.argv[1]), ".."));
  const found = violations(root);
  for (const v of found) console.error(`wrong-way import: ${v}`);
  if (found.length > 0) {
    console.error(
      `${found.length} wrong-way import(s): see the folder table in docs/architecture.md`,
    );
    process.exit(1);
  }
  console.log("imports: every folder imports only what docs/architecture.md allows");
}
