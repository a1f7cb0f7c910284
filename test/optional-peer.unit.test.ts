// What not every embedder uses is an optional peer dependency, loaded on first use: package.json
// declares each one optional with the range contracts/optional-peer.ts names in its messages, no
// shipped module imports one as a value at load time, and a missing one is an error that says
// which feature needs it and what to install.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  installCommand,
  loadPeer,
  MissingPeerError,
  OPTIONAL_PEERS,
  type OptionalPeer,
} from "../contracts/optional-peer.ts";
// @ts-expect-error: a plain ES module without declarations
import { shiftMap, toleratePeerImports } from "../scripts/build.mjs";

const ROOT = join(import.meta.dirname, "..");
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
const peers = Object.keys(OPTIONAL_PEERS) as OptionalPeer[];

/** Node's error for a module that is not installed, as `require` throws it. */
function notFound(specifier: string): Error {
  return Object.assign(new Error(`Cannot find module '${specifier}'\nRequire stack:\n- /x.js`), {
    code: "MODULE_NOT_FOUND",
  });
}

function sourcesOf(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(ROOT, dir))) {
    const rel = join(dir, name);
    if (statSync(join(ROOT, rel)).isDirectory()) {
      if (name !== "page") out.push(...sourcesOf(rel));
    } else if (/\.(ts|js)$/.test(name) && !name.endsWith(".d.ts")) out.push(rel);
  }
  return out;
}

/** The devDependency the tests run is the range's floor (`^x.y.z`) or inside `>=a <b`. */
function testedWith(dev: string, range: string): boolean {
  if (range.startsWith("^")) return range === `^${dev}`;
  const bounds = /^>=(\S+) <(\S+)$/.exec(range);
  if (!bounds) return false;
  const n = (v: string) => v.split(".").map(Number);
  const cmp = (a: number[], b: number[]) => {
    for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) - (b[i] ?? 0);
    return 0;
  };
  return cmp(n(dev), n(bounds[1])) >= 0 && cmp(n(dev), n(bounds[2])) < 0;
}

describe("optional peer dependencies", () => {
  it("package.json declares each one as an optional peer with the range the messages give, and as a devDependency for the tests", () => {
    for (const peer of peers) {
      expect(pkg.peerDependencies[peer], peer).toBe(OPTIONAL_PEERS[peer]);
      expect(pkg.peerDependenciesMeta[peer], peer).toEqual({ optional: true });
      expect(pkg.dependencies[peer], peer).toBeUndefined();
      expect(testedWith(pkg.devDependencies[peer], OPTIONAL_PEERS[peer]), peer).toBe(true);
    }
    // zod is the one required peer; nothing else is optional without being listed.
    expect(Object.keys(pkg.peerDependenciesMeta).sort()).toEqual([...peers].sort());
    expect(pkg.peerDependenciesMeta.zod).toBeUndefined();
  });

  it('no shipped module imports an optional peer as a value: `import "keel"` loads without any of them', () => {
    const shipped = [
      "index.ts",
      "testing.ts",
      ...[
        "actors",
        "contracts",
        "machines",
        "providers",
        "session",
        "tools",
        "inspector",
        "client",
        "cli",
      ].flatMap(sourcesOf),
    ];
    const offenders: string[] = [];
    for (const file of shipped) {
      const text = readFileSync(join(ROOT, file), "utf8");
      for (const peer of peers) {
        const escaped = peer.replace(/[/.]/g, "\\$&");
        // A static import that is not `import type`, or a bare `import("peer")`.
        const value = new RegExp(
          `^\\s*import\\s+(?!type\\b)[^;]*?from\\s+["']${escaped}(/[^"']*)?["']|import\\(\\s*["']${escaped}`,
          "m",
        );
        if (value.test(text)) offenders.push(`${file}: ${peer}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it("a missing peer is a MissingPeerError naming the feature and the install command", () => {
    let error: unknown;
    try {
      loadPeer(
        (s) => {
          throw notFound(s);
        },
        "pg",
        "postgresStore (the PostgreSQL session store)",
      );
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(MissingPeerError);
    expect((error as MissingPeerError).name).toBe("MissingPeerError");
    expect((error as MissingPeerError).peer).toBe("pg");
    expect((error as Error).message).toBe(
      "postgresStore (the PostgreSQL session store) needs the package pg, an optional peer dependency of keel that is not installed: npm install pg@^8.23.1",
    );
    expect(installCommand("better-sqlite3")).toBe("npm install better-sqlite3@^12.11.1");
  });

  it("a peer that is installed but does not load says so, not that it is missing; a missing dependency of the peer is not the peer missing", () => {
    const broken = () =>
      loadPeer(
        () => {
          throw Object.assign(new Error("Could not locate the bindings file."), { code: "ERR" });
        },
        "better-sqlite3",
        "sqliteStore",
      );
    expect(broken).toThrow(
      /sqliteStore needs the package better-sqlite3, which is installed but does not load \(Could not locate the bindings file\.\): rebuild or reinstall it/,
    );
    const inner = () =>
      loadPeer(
        () => {
          throw notFound("pg-pool");
        },
        "pg",
        "postgresStore",
      );
    expect(inner).toThrow(/installed but does not load \(Cannot find module 'pg-pool'\)/);
  });

  it("a subpath is loaded as peer/subpath, and what the loader returns is the module", () => {
    const asked: string[] = [];
    const mod = loadPeer<{ ok: true }>(
      (s) => {
        asked.push(s);
        return { ok: true };
      },
      "gpt-tokenizer",
      "counting",
      "cjs/encoding/o200k_base",
    );
    expect(mod).toEqual({ ok: true });
    expect(asked).toEqual(["gpt-tokenizer/cjs/encoding/o200k_base"]);
  });

  it("the built declarations tolerate an absent peer: its type imports carry @ts-ignore, and their maps stay aligned", () => {
    const emitted = [
      'import type pg from "pg";',
      'import type { X } from "./x.js";',
      'import type { Runner } from "graphile-worker/dist/x";',
      "export declare const a: pg.Pool;",
    ].join("\n");
    const { text, inserted } = toleratePeerImports(emitted);
    expect(text.split("\n")).toEqual([
      "// @ts-ignore: pg is an optional peer of keel; its types are read when it is installed",
      'import type pg from "pg";',
      'import type { X } from "./x.js";',
      "// @ts-ignore: graphile-worker is an optional peer of keel; its types are read when it is installed",
      'import type { Runner } from "graphile-worker/dist/x";',
      "export declare const a: pg.Pool;",
    ]);
    expect(inserted).toEqual([0, 2]);
    const map = JSON.stringify({ version: 3, mappings: "A;B;C;D" });
    expect(JSON.parse(shiftMap(map, inserted)).mappings).toBe(";A;B;;C;D");
  });
});
