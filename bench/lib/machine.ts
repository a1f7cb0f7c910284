import { execFileSync } from "node:child_process";
import { cpus, loadavg, release, totalmem, type } from "node:os";
import { type KeelEntry, keelEntry } from "./keel-entry.ts";
import { installedVersion, repoDir } from "./workload.ts";

/** Where the numbers were taken. */
export interface MachineInfo {
  cpuModel: string;
  cores: number;
  memoryGiB: number;
  node: string;
  os: string;
  /** 1-minute load average when the run started; above the core count the numbers are noisy. */
  loadAtStart: number;
  /** The commit Keel was measured at, and whether the work tree had changes on top. */
  keel: string;
  /** The Keel module measured (the built dist/index.js unless KEEL_ENTRY named another). */
  keelEntry: Omit<KeelEntry, "file">;
  packages: Record<string, string>;
}

/** Packages whose versions the results depend on (root dependencies and bench/'s peers). */
const packages = [
  "xstate",
  "zod",
  "better-sqlite3",
  "tsx",
  "ai",
  "@ai-sdk/provider",
  "@openai/agents",
  "@openai/agents-core",
  "@mariozechner/pi-agent-core",
  "@mariozechner/pi-ai",
  "@langchain/langgraph",
  "@langchain/langgraph-checkpoint",
  "@langchain/langgraph-checkpoint-sqlite",
  "@langchain/core",
];

export function describeMachine(): MachineInfo {
  const list = cpus();
  const versions: Record<string, string> = {};
  for (const p of packages) versions[p] = installedVersion(p) ?? "not installed";
  const entry = keelEntry();
  return {
    cpuModel: list[0]?.model.trim() ?? "unknown",
    cores: list.length,
    memoryGiB: totalmem() / 1024 ** 3,
    node: process.version,
    os: `${type()} ${release()}`,
    loadAtStart: loadavg()[0],
    keel: keelRevision(),
    keelEntry: { shown: entry.shown, built: entry.built, label: entry.label },
    packages: versions,
  };
}

/** `git rev-parse --short HEAD` (+ "with uncommitted changes"), or "unknown" outside git. */
function keelRevision(): string {
  try {
    const git = (...args: string[]) =>
      execFileSync("git", args, {
        cwd: repoDir,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
      }).trim();
    const head = git("rev-parse", "--short", "HEAD");
    return git("status", "--porcelain", "--untracked-files=no") === ""
      ? head
      : `${head} with uncommitted changes`;
  } catch {
    return "unknown (not a git checkout)";
  }
}

/** The current 1-minute load average. */
export function currentLoad(): number {
  return loadavg()[0];
}
