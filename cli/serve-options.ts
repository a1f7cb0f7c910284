// `keel serve`'s option checks that need nothing of Keel's runtime (cli/main.ts loads it eagerly).
import { InvalidArgumentError } from "commander";
import { CliError, EXIT } from "./errors.ts";

/** `--http <port>`'s parser: 0 to 65535 (0: a free one). */
export function portOrZero(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 65_535) {
    throw new InvalidArgumentError(
      `--http must be a port from 0 to 65535 (0: a free one), got "${value}"`,
    );
  }
  return n;
}

/**
 * `keel serve`'s options belong to one transport: --stdio's and --http's are not mixed, so no
 * option is accepted and then ignored. Throws a usage `CliError` naming them.
 */
export function checkTransportOptions(opts: Record<string, unknown>): void {
  const set = (keys: string[]) => keys.filter((k) => opts[k] !== undefined);
  if (opts.http === undefined) {
    if (set(["host", "token", "corsOrigin", "static", "maxBodyBytes"]).length > 0) {
      throw new CliError(
        "--host, --token, --no-token, --cors-origin, --static and --max-body-bytes are --http options; add --http <port>",
        EXIT.usage,
      );
    }
    return;
  }
  if (opts.stdio) {
    throw new CliError(
      "keel serve takes one transport: --stdio or --http <port>, not both",
      EXIT.usage,
    );
  }
  if (set(["maxFrameBytes", "controlTimeout"]).length > 0) {
    throw new CliError(
      "--max-frame-bytes and --control-timeout are --stdio options; --http does not read them",
      EXIT.usage,
    );
  }
}
