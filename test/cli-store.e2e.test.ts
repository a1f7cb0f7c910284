// `keel … --store` as a user meets it: a PostgreSQL URL is a PostgreSQL store (never a file path
// that looks like one), and a store that cannot be used says why in one line of its own: a
// corrupted file, a read-only one (read anyway by the reading commands), one locked by another
// process. Real `keel` processes, a real PostgreSQL server, a real SQLite file.
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { postgresStore } from "../session/stores/postgres-store.ts";
import { startFakeOpenAIServer, streamReply } from "./support/fake-openai-server.ts";
import { type KeelRun, runKeel } from "./support/run-keel.ts";
import { usePostgres } from "./support/use-postgres.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) {
    chmodSync(d, 0o755);
    rmSync(d, { recursive: true, force: true });
  }
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "keel-cli-store-"));
  chmodSync(d, 0o755);
  dirs.push(d);
  return d;
}

/** The parent's provider variables: a run sees only those its test sets. */
const UNSET = ["OPENAI_API_KEY", "OPENAI_BASE_URL", "KEEL_MODEL", "KEEL_CONTEXT_WINDOW"];

/**
 * Runs `keel` with no provider variables but `env`. `withoutPrivileges`, when root, runs it as
 * root with every capability dropped (`setpriv`): file modes then bind it as they bind the owner,
 * so a 0444 store is read-only to it, while it can still read a checkout in a 0700 directory
 * (running as `nobody` could not: a clone in a root home or `mktemp -d`).
 */
function keel(
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
  options: { withoutPrivileges?: boolean } = {},
): Promise<KeelRun> {
  const wrapper =
    options.withoutPrivileges && process.getuid?.() === 0
      ? ["setpriv", "--bounding-set", "-all", "--inh-caps", "-all", "--"]
      : undefined;
  return runKeel(args, { cwd, env, unset: UNSET, wrapper });
}

/** A store file holding one session of the scripted demo; returns its path and the session id. */
async function storeWithSession(dir: string): Promise<{ file: string; id: string }> {
  const file = join(dir, "keel.db");
  const demo = await keel(["demo", "--json", "--no-inspect", "--store", file], dir);
  expect(demo.code).toBe(0);
  const result = JSON.parse(demo.stdout.trim().split("\n").at(-1)!);
  return { file, id: result.sessionId };
}

const db = usePostgres();

describe.skipIf(!db.mode.run)("--store with a PostgreSQL URL", { timeout: 120_000 }, () => {
  it("run, demo, sessions and show use the PostgreSQL database and write no file that looks like the URL", async () => {
    const cwd = tempDir();
    const url = db.url();
    const fake = await startFakeOpenAIServer();
    fake.enqueue(streamReply({ text: "Hello from the fake model." }));
    const env = {
      OPENAI_BASE_URL: fake.baseURL,
      KEEL_MODEL: "fake-model",
      KEEL_CONTEXT_WINDOW: "32768",
    };
    const run = await keel(["run", "--json", "--store", url, "say hello"], cwd, env).finally(() =>
      fake.close(),
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const runId = JSON.parse(run.stdout.trim().split("\n").at(-1)!).sessionId as string;

    const demo = await keel(["demo", "--json", "--no-inspect", "--store", url], cwd);
    expect(demo.code).toBe(0);
    const demoId = JSON.parse(demo.stdout.trim().split("\n").at(-1)!).sessionId as string;

    // Nothing in the working directory: no `postgres:` folder, no SQLite file, no .keel/.
    expect(readdirSync(cwd)).toEqual([]);

    const store = await postgresStore(url);
    db.stores.push(store);
    const stored = (await store.list()).map((s) => s.sessionId);
    expect(stored).toEqual(expect.arrayContaining([runId, demoId]));

    const sessions = await keel(["sessions", "--json", "--store", url], cwd);
    expect(sessions.code).toBe(0);
    expect(JSON.parse(sessions.stdout).map((s: { sessionId: string }) => s.sessionId)).toEqual(
      expect.arrayContaining([runId, demoId]),
    );
    const show = await keel(["show", runId, "--store", url], cwd);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toContain("Hello from the fake model.");
    expect(readdirSync(cwd)).toEqual([]);
  });
});

describe("--store refusals and store errors", { timeout: 120_000 }, () => {
  it("a URL of another scheme is a usage error naming what --store takes, and creates nothing", async () => {
    const cwd = tempDir();
    for (const url of ["mysql://keel@127.0.0.1/keel", "sqlite:///tmp/keel.db"]) {
      const r = await keel(["sessions", "--store", url], cwd);
      expect(r.code).toBe(2);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toContain('--store takes a SQLite file path, "memory" or a postgres:// URL');
    }
    expect(readdirSync(cwd)).toEqual([]);
  });

  it("a corrupted store file is named as corrupted, once, with what to do; not as a permission problem", async () => {
    const cwd = tempDir();
    const file = join(cwd, "keel.db");
    writeFileSync(
      file,
      "this is not a database, it is a note that was saved over it\n".repeat(100),
    );
    for (const args of [["sessions"], ["show", "s_1"], ["run", "hi"]]) {
      const r = await keel([...args, "--store", file], cwd, {
        OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
        KEEL_MODEL: "m",
        KEEL_CONTEXT_WINDOW: "32768",
      });
      expect(r.code, args.join(" ")).toBe(3);
      const lines = r.stderr.trim().split("\n");
      expect(lines, args.join(" ")).toHaveLength(1);
      expect(lines[0]).toContain("is not a SQLite database or is corrupted");
      expect(lines[0]).toContain("move it aside");
      expect(lines[0]).not.toMatch(/writable|permission/i);
      expect(lines[0].match(/session store/g)).toHaveLength(1);
    }
  });

  it("a read-only store is listed and shown (opened for reading); a run on it says it cannot be written", async () => {
    const cwd = tempDir();
    const { file, id } = await storeWithSession(cwd);
    chmodSync(file, 0o444);
    chmodSync(cwd, 0o555);
    try {
      const sessions = await keel(
        ["sessions", "--store", file],
        "/",
        {},
        { withoutPrivileges: true },
      );
      expect(sessions.stderr).toBe("");
      expect(sessions.code).toBe(0);
      expect(sessions.stdout).toContain(id);
      const show = await keel(["show", id, "--store", file], "/", {}, { withoutPrivileges: true });
      expect(show.stderr).toBe("");
      expect(show.code).toBe(0);
      expect(show.stdout).toContain(`session ${id}`);
      const run = await keel(
        ["run", "--store", file, "hi"],
        "/tmp",
        { OPENAI_BASE_URL: "http://127.0.0.1:9/v1", KEEL_MODEL: "m", KEEL_CONTEXT_WINDOW: "32768" },
        { withoutPrivileges: true },
      );
      expect(run.code).toBe(3);
      expect(run.stderr.trim().split("\n")).toHaveLength(1);
      expect(run.stderr).toContain("cannot be opened for writing by this user");
    } finally {
      chmodSync(cwd, 0o755);
    }
  });

  it("a store locked by another process says so, in one line", async () => {
    const cwd = tempDir();
    const { file } = await storeWithSession(cwd);
    const holder = new Database(file);
    try {
      holder.pragma("locking_mode = EXCLUSIVE");
      holder.exec("BEGIN IMMEDIATE; CREATE TABLE held (x); ");
      const r = await keel(["sessions", "--store", file], cwd);
      expect(r.code).toBe(3);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.stderr).toContain("is locked by another process");
    } finally {
      holder.exec("ROLLBACK");
      holder.close();
    }
  });

  it("a demo that fails on its configuration leaves no temporary workspace behind", async () => {
    const cwd = tempDir();
    const tmp = tempDir();
    // A local server's model without a context window: a configuration error (exit 3).
    const r = await keel(["demo", "--no-inspect", "--store", "memory"], cwd, {
      OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
      KEEL_MODEL: "qwen2.5",
      TMPDIR: tmp,
    });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain("KEEL_CONTEXT_WINDOW");
    expect(readdirSync(tmp).filter((f) => f.startsWith("keel-demo-"))).toEqual([]);
    expect(existsSync(join(cwd, ".keel"))).toBe(false);
  });
});
