import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const CHILD = fileURLToPath(new URL("./pg-child.ts", import.meta.url));

/** A running pg-child.ts process and the JSON lines it printed. */
export interface Proc {
  child: ChildProcess;
  pid: number;
  lines: Record<string, unknown>[];
  /** Resolves with the first line (already printed or later) that matches. */
  waitFor(
    match: (line: Record<string, unknown>) => boolean,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
  stderr(): string;
}

export function startChild(args: string[], env: Record<string, string> = {}): Proc {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, ...args], {
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  const lines: Record<string, unknown>[] = [];
  const waiters: {
    match: (l: Record<string, unknown>) => boolean;
    resolve: (l: Record<string, unknown>) => void;
  }[] = [];
  let buffer = "";
  let err = "";
  child.stdout!.on("data", (d) => {
    buffer += d;
    let nl = buffer.indexOf("\n");
    while (nl >= 0) {
      const text = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      nl = buffer.indexOf("\n");
      let line: Record<string, unknown>;
      try {
        line = JSON.parse(text);
      } catch {
        continue;
      }
      lines.push(line);
      for (const w of [...waiters]) {
        if (w.match(line)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  });
  child.stderr!.on("data", (d) => {
    err = (err + d).slice(-8000);
  });
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  return {
    child,
    pid: child.pid!,
    lines,
    stderr: () => err,
    exited,
    waitFor(match, timeoutMs = 15_000) {
      const found = lines.find(match);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(
              new Error(
                `child ${child.pid} printed no matching line in ${timeoutMs} ms; stderr: ${err}`,
              ),
            ),
          timeoutMs,
        );
        waiters.push({
          match,
          resolve: (l) => {
            clearTimeout(timer);
            resolve(l);
          },
        });
      });
    },
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it returns a value that is not undefined. */
export async function until<T>(
  check: () => Promise<T | undefined>,
  timeoutMs = 20_000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}
