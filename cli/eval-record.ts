import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import type { Model, ModelToolSpec } from "../index.ts";

/** Which Keel ran an eval: its version, and the git commit of its sources when they are a checkout. */
export interface KeelRecord {
  version: string;
  /** `git rev-parse HEAD` of Keel's own checkout; null for an installed package (no checkout). */
  commit: string | null;
  /** Whether tracked files differ from that commit (null without a checkout). */
  dirty: boolean | null;
}

/** A model as an eval report names it. */
export interface ModelRecord {
  /** `Model.name`, e.g. `openai:gpt-4.1-mini`. */
  name: string;
  /** The provider: the part of the name before its first `:` (Keel's adapters name models so), else null. */
  provider: string | null;
}

/** The tools a run offered the model: their names and a digest of what the model was sent. */
export interface ToolSetRecord {
  names: string[];
  /** SHA-256 (hex) of the tools' names, descriptions and parameter schemas, as sent: changes with any of them. */
  digest: string;
}

const ROOT = path.resolve(import.meta.dirname, "..");

/**
 * Keel's version (its package.json) and, when Keel runs from a git checkout of its own (not from
 * a package inside another project's repository), the commit and whether it has local changes.
 */
export function keelRecord(root = ROOT): KeelRecord {
  const pkg: unknown = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
  const field = typeof pkg === "object" && pkg !== null && "version" in pkg ? pkg.version : null;
  const version = typeof field === "string" ? field : "unknown";
  const git = (...args: string[]) =>
    execFileSync("git", ["-C", root, ...args], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 5000,
    }).trim();
  try {
    // A package installed inside another project's repository is not a checkout of Keel.
    if (path.resolve(git("rev-parse", "--show-toplevel")) !== path.resolve(root))
      return { version, commit: null, dirty: null };
    const commit = git("rev-parse", "HEAD");
    const dirty = git("status", "--porcelain", "--untracked-files=no") !== "";
    return { version, commit, dirty };
  } catch {
    return { version, commit: null, dirty: null };
  }
}

/** The record of a model. This is a pure function. */
export function modelRecord(model: Pick<Model, "name">): ModelRecord {
  const i = model.name.indexOf(":");
  return { name: model.name, provider: i > 0 ? model.name.slice(0, i) : null };
}

/** The record of the tools a model was offered. This is a pure function. */
export function toolSetRecord(tools: readonly ModelToolSpec[]): ToolSetRecord {
  const sorted = [...tools].sort((a, b) => a.function.name.localeCompare(b.function.name));
  const digest = createHash("sha256")
    .update(JSON.stringify(sorted.map((t) => t.function)))
    .digest("hex");
  return { names: sorted.map((t) => t.function.name), digest };
}
