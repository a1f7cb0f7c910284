// A real `keel serve --stdio` child process, spoken to in raw frames (for the protocol tests).
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { join } from "node:path";
import type { ServerFrame } from "../../contracts/protocol.ts";

export const BIN = join(import.meta.dirname, "..", "..", "cli", "bin.js");

export interface RawServer {
  child: ChildProcessWithoutNullStreams;
  /** Every frame the server wrote, in order. */
  frames: ServerFrame[];
  /** Lines of stdout that were not JSON (must stay empty: stdout carries frames only). */
  junk: string[];
  stderr(): string;
  write(data: string | Uint8Array): void;
  send(frame: object): void;
  /** The first frame (seen or to come) matching `pred`. */
  waitFor(pred: (f: ServerFrame) => boolean, what?: string): Promise<ServerFrame>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Spawns `node cli/bin.js serve --stdio <args>` and collects its frames. */
export function spawnServer(args: string[], env: Record<string, string> = {}): RawServer {
  const child = spawn(process.execPath, [BIN, "serve", "--stdio", ...args], {
    env: { ...process.env, KEEL_LOG: "", ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  const frames: ServerFrame[] = [];
  const junk: string[] = [];
  let stderr = "";
  let buffer = "";
  const waiters: { pred: (f: ServerFrame) => boolean; resolve: (f: ServerFrame) => void }[] = [];
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    buffer += chunk;
    let nl = buffer.indexOf("\n");
    while (nl !== -1) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      nl = buffer.indexOf("\n");
      let frame: ServerFrame;
      try {
        frame = JSON.parse(line);
      } catch {
        junk.push(line);
        continue;
      }
      frames.push(frame);
      for (const w of [...waiters]) {
        if (w.pred(frame)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(frame);
        }
      }
    }
  });
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  child.stdin.on("error", () => {}); // the server may be gone (the tests that kill it)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    frames,
    junk,
    stderr: () => stderr,
    write: (data) => child.stdin.write(data),
    send: (frame) => child.stdin.write(`${JSON.stringify(frame)}\n`),
    waitFor(pred, what = "a frame") {
      const seen = frames.find(pred);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        waiters.push({ pred, resolve });
        exited.then(() =>
          setTimeout(
            () =>
              reject(
                new Error(
                  `the server exited before ${what}; frames: ${JSON.stringify(frames).slice(-2000)}; stderr: ${stderr}`,
                ),
              ),
            50,
          ),
        );
      });
    },
    exited,
  };
}

/** Matches the response (`ok` or `error`) to request `id`. */
export const responseTo = (id: string | number) => (f: ServerFrame) =>
  (f.type === "ok" || f.type === "error") && "id" in f && f.id === id;

/** A client tool (JSON schema) the serve tests declare in `session.open`. */
export const weatherTool = {
  name: "get_weather",
  description: "The weather in a city.",
  parameters: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
    additionalProperties: false,
  },
  traits: { risk: "low" as const },
};
