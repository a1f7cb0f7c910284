import { readFileSync } from "node:fs";
import pino, { type Logger } from "pino";
import {
  type Inspector,
  type Model,
  memoryStore,
  type ScriptStep,
  scriptedModel,
} from "../index.ts";
import { CliError, EXIT, type ExitCode, oneLine } from "./errors.ts";
import { openInspector } from "./inspect.ts";
import { modelFor, PROVIDERS, type ProviderName } from "./provider.ts";
import { type Server, serve } from "./serve/server.ts";
import { openStore, shown, storeChoice } from "./store.ts";

export interface ServeOptions {
  stdio?: boolean;
  /** Serve the inspector for every session (`--inspect`); its URL goes to stderr. */
  inspect?: boolean;
  /** The inspector's port (`--port`, implies `--inspect`); absent: a free one. */
  port?: number;
  /** A SQLite file, or "memory". Default `./.keel/keel.db`. */
  store?: string;
  /**
   * As for `keel run` (cli/provider.ts): `openai-compatible` (the default, or `KEEL_PROVIDER`),
   * `openai`, `anthropic`, `google`; or "scripted".
   */
  provider?: string;
  /** With `--provider scripted`: a JSON file holding the script (an array of steps). */
  script?: string;
  maxFrameBytes?: number;
  maxBufferedBytes?: number;
  controlTimeout?: number;
  permissionTimeout?: number;
  /** `--http <port>`: serve HTTP instead (cli/serve-http.ts); 0 picks a free port. */
  http?: number;
  /** `--host`: the address `--http` listens on. Default 127.0.0.1. */
  host?: string;
  /** `--token`: the bearer token of `--http` (default KEEL_HTTP_TOKEN or a random one); false: `--no-token`. */
  token?: string | false;
  /** `--cors-origin` (repeatable): browser origins allowed to call `--http` from another origin. */
  corsOrigin?: string[];
  /** `--static <dir>`: a page served at `/` beside `--http`'s `/api`. */
  static?: string;
  /** `--max-body-bytes`: the largest request body `--http` reads. */
  maxBodyBytes?: number;
  version: string;
  env?: NodeJS.ProcessEnv;
}

/**
 * Reads a script file: a JSON array of scripted-model steps (`ScriptStep`, see
 * providers/scripted-model.ts), or `{ "steps": [...] }`. Every session plays it from its first
 * step. Throws a config `CliError` saying what is wrong with the file.
 */
export function readScript(file: string): ScriptStep[] {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new CliError(`cannot read the script ${shown(file)}: ${oneLine(error)}`, EXIT.config);
  }
  const steps = Array.isArray(value) ? value : (value as { steps?: unknown } | null)?.steps;
  if (!Array.isArray(steps)) {
    throw new CliError(
      `the script ${shown(file)} must be a JSON array of steps (or {"steps": [...]}), e.g. [{"text":"Hello"}]`,
      EXIT.config,
    );
  }
  try {
    scriptedModel(steps as ScriptStep[]);
  } catch (error) {
    throw new CliError(`the script ${shown(file)} is invalid: ${oneLine(error)}`, EXIT.config);
  }
  return steps as ScriptStep[];
}

/** The model factory the options name: one scripted model per session, or one shared model. */
export function modelFactory(options: ServeOptions): () => Model {
  const env = options.env ?? process.env;
  const provider = options.provider ?? (env.KEEL_PROVIDER || "openai-compatible");
  if (provider === "scripted") {
    if (!options.script) {
      throw new CliError(
        "--provider scripted needs --script <file.json> (a JSON array of model steps)",
        EXIT.usage,
      );
    }
    const steps = readScript(options.script);
    let n = 0;
    return () => scriptedModel(steps, { name: `scripted-${++n}` });
  }
  if (options.script) {
    throw new CliError("--script is only read with --provider scripted", EXIT.usage);
  }
  if (!(PROVIDERS as readonly string[]).includes(provider)) {
    throw new CliError(
      `unknown provider "${provider}": use --provider ${PROVIDERS.join(" | ")} (or KEEL_PROVIDER), or --provider scripted --script <file.json>`,
      EXIT.usage,
    );
  }
  // The same provider, environment and meaning of each name as `keel run`.
  const model = modelFor(provider as ProviderName, env);
  return () => model;
}

/**
 * Guards the serving process: an unhandled rejection or an uncaught exception anywhere (a bug)
 * ends the connection the orderly way — every request answered, turns settled, logs flushed —
 * with a `goodbye` whose reason names the error, never a silent exit that takes every session
 * of the server with it. `failed` says whether it happened (the exit code is then 70).
 */
export function guardProcess(server: Server, logger: Logger) {
  const state = { failed: false };
  const fail = (kind: string) => (error: unknown) => {
    state.failed = true;
    const message = error instanceof Error ? error.message : String(error);
    logger.error({ err: error }, `keel serve: ${kind}`);
    void server.shutdown(`internal error (${kind}): ${message}`);
  };
  const onRejection = fail("unhandled rejection");
  const onException = fail("uncaught exception");
  process.on("unhandledRejection", onRejection);
  process.on("uncaughtException", onException);
  return {
    get failed() {
      return state.failed;
    },
    release() {
      process.off("unhandledRejection", onRejection);
      process.off("uncaughtException", onException);
    },
  };
}

/**
 * What both transports of `keel serve` run on: the store `--store` names (created if missing;
 * "memory" keeps nothing), where `choice` says it is, and a logger quiet by default on stderr
 * (`KEEL_LOG=warn`, `info`, `debug` … for the runtime's logs).
 */
export async function openServeStore(named: string | undefined) {
  const choice = storeChoice(named);
  const store =
    choice.kind === "memory" ? memoryStore() : (await openStore(choice, { create: true }))!;
  const logger = pino(
    { level: process.env.KEEL_LOG || "silent", base: undefined },
    pino.destination({ fd: 2, sync: true }),
  );
  return { choice, store, logger };
}

/**
 * `keel serve --stdio`: the control protocol on stdin/stdout (docs/protocol.md), logs on stderr.
 * Returns when the connection ended (stdin ended, stdout broke, SIGTERM/SIGINT) and every turn
 * settled and every log flushed: exit code 0.
 */
export async function runServe(options: ServeOptions): Promise<ExitCode> {
  if (!options.stdio) {
    throw new CliError(
      "keel serve needs a transport: --stdio (NDJSON on stdin/stdout, see docs/protocol.md) or --http <port> (docs/web-apps.md)",
      EXIT.usage,
    );
  }
  const model = modelFactory(options);
  const { store, logger } = await openServeStore(options.store);
  let inspector: Inspector | undefined;
  try {
    inspector = options.inspect || options.port ? await openInspector(options.port) : undefined;
  } catch (error) {
    await store.close();
    throw error;
  }
  // stdout speaks the protocol: the inspector's URL goes to stderr.
  if (inspector) process.stderr.write(`keel inspector: ${inspector.url}\n`);
  const server = serve({
    input: process.stdin,
    output: process.stdout,
    store,
    model,
    logger,
    version: options.version,
    ...(options.maxFrameBytes ? { maxFrameBytes: options.maxFrameBytes } : {}),
    ...(options.maxBufferedBytes ? { maxBufferedBytes: options.maxBufferedBytes } : {}),
    ...(options.controlTimeout ? { controlTimeoutMs: options.controlTimeout } : {}),
    ...(options.permissionTimeout ? { permissionTimeoutMs: options.permissionTimeout } : {}),
    ...(inspector ? { agent: { inspect: inspector.sink } } : {}),
  });
  const onSignal = (signal: NodeJS.Signals) => void server.shutdown(`${signal} received`);
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  const guard = guardProcess(server, logger);
  try {
    const reason = await server.closed;
    logger.info({ reason }, "keel serve: closed");
  } finally {
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
    guard.release();
    await store.close();
    await inspector?.close();
  }
  return guard.failed ? EXIT.internal : EXIT.ok;
}
