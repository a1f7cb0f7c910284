// A real `keel serve --http` child process for the HTTP tests: started on a free port, its
// printed address, token and page URL read from stdout; stopped with SIGTERM.
import { type ChildProcess, spawn } from "node:child_process";
import { BIN } from "./serve-child.ts";

/** A running `keel serve --http`. */
export interface HttpChild {
  child: ChildProcess;
  /** e.g. `http://127.0.0.1:40123/api` */
  api: string;
  origin: string;
  token: string | undefined;
  stdout(): string;
  stderr(): string;
  /** SIGTERM, then resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** Starts `node cli/bin.js serve --http 0 <args>` in `cwd` with `env` and waits for its address. */
export function startHttpChild(
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
): Promise<HttpChild> {
  const child = spawn(process.execPath, [BIN, "serve", "--http", "0", ...args], {
    cwd,
    env: { ...process.env, KEEL_LOG: "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stderr!.on("data", (d) => {
    err += d;
  });
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (code) => resolve(code)),
  );
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`keel serve --http printed no address in 20 s: ${out}${err}`)),
      20_000,
    );
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`keel serve --http exited with ${code}: ${out}${err}`));
    });
    child.stdout!.on("data", (d) => {
      out += d;
      const api = /keel serve: (\S+\/api)/.exec(out)?.[1];
      const token = /^token: (\S+)/m.exec(out)?.[1];
      if (!api || !token) return;
      if (args.includes("--static") && !/page: /.test(out)) return;
      clearTimeout(timer);
      resolve({
        child,
        api,
        origin: api.replace(/\/api$/, ""),
        token: token === "none" ? undefined : token,
        stdout: () => out,
        stderr: () => err,
        stop: () => {
          child.kill("SIGTERM");
          return exited;
        },
      });
    });
  });
}
