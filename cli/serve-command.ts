import type { Command } from "commander";
import { MAX_TIMER_MS } from "../contracts/clock.ts";
import { KEEL_VERSION as VERSION } from "../contracts/version.ts";
import type { ExitCode } from "./errors.ts";
import type { ServeOptions } from "./serve.ts";
import { checkTransportOptions, portOrZero } from "./serve-options.ts";

/**
 * Adds `keel serve` to `program`: the control protocol over stdio (docs/protocol.md) or HTTP
 * (docs/web-apps.md). `port` is the inspector's port option as the other commands take it;
 * `positiveInt` the program's integer parser.
 */
export function addServeCommand(
  program: Command,
  result: { code: ExitCode },
  port: readonly [string, string, (value: string) => number],
  positiveInt: (name: string, max?: number) => (value: string) => number,
): void {
  program
    .command("serve")
    .description(
      "serve the control protocol (NDJSON requests and events) to another process; see docs/protocol.md",
    )
    .option("--stdio", "speak on stdin/stdout (logs go to stderr)")
    .option(
      "--http <port>",
      "serve HTTP on this port, routes under /api (0: a free one); see docs/web-apps.md",
      portOrZero,
    )
    .option("--host <address>", "the address --http listens on (default 127.0.0.1)")
    .option(
      "--token <token>",
      "--http's bearer token (default KEEL_HTTP_TOKEN, else a random one, printed)",
    )
    .option("--no-token", "--http without a token: only on a loopback address")
    .option(
      "--cors-origin <origin>",
      "a browser origin allowed to call --http (repeatable)",
      (v: string, all: string[] = []) => [...all, v],
    )
    .option("--static <dir>", "with --http: serve this folder's page at / (e.g. examples/web/dist)")
    .option(
      "--max-body-bytes <n>",
      "with --http: the largest request body read (default 1048576)",
      positiveInt("--max-body-bytes", 1024 * 1024 * 1024),
    )
    .option("--inspect", "serve the inspector for the sessions it runs (its URL goes to stderr)")
    .option(...port)
    .option("--store <file>", 'session store (default ./.keel/keel.db; "memory" keeps nothing)')
    .option(
      "--provider <name>",
      "openai-compatible (default) | openai | anthropic | google, as for keel run; or scripted (with --script)",
    )
    .option(
      "--script <file>",
      "with --provider scripted: a JSON array of model steps, replayed by each session",
    )
    .option(
      "--max-frame-bytes <n>",
      "longest accepted line (default 8388608)",
      positiveInt("--max-frame-bytes", 1024 * 1024 * 1024),
    )
    .option(
      "--max-buffered-bytes <n>",
      "output waiting for the client before model streams pause (--http: before an event stream is cut); default 1048576",
      positiveInt("--max-buffered-bytes"),
    )
    .option(
      "--control-timeout <ms>",
      "default wait for a tool.execute reply (default 300000)",
      positiveInt("--control-timeout", MAX_TIMER_MS),
    )
    .option(
      "--permission-timeout <ms>",
      "default wait for a permission.request reply before denying (default 60000)",
      positiveInt("--permission-timeout", MAX_TIMER_MS),
    )
    .action(async (opts: Omit<ServeOptions, "version" | "env">) => {
      checkTransportOptions(opts);
      if (opts.http !== undefined) {
        const { runServeHttp } = await import("./serve-http.ts");
        result.code = await runServeHttp({ ...opts, http: opts.http, version: VERSION });
        return;
      }
      const { runServe } = await import("./serve.ts");
      result.code = await runServe({ ...opts, version: VERSION });
    });
}
