import {
  builtinTools,
  type Inspector,
  type SessionStore,
  startInspector,
  type ToolDefinition,
} from "../index.ts";
import { CliError, EXIT, type ExitCode } from "./errors.ts";
import { loadSession } from "./sessions.ts";
import { openStore, shownStore, storeChoice } from "./store.ts";

export interface InspectOptions {
  replay?: string;
  port?: number;
  store?: string;
  json?: boolean;
  /** When to stop (default: Ctrl-C / SIGTERM). Contract: resolves once; must not reject. */
  until?: () => Promise<void>;
}

/**
 * `keel inspect`: serves the inspector on 127.0.0.1. With `--replay <id>` the page opens that
 * stored session; otherwise any stored session opens with `?replay=<id>` added to the URL.
 */
export async function runInspect(options: InspectOptions, out = process.stdout): Promise<ExitCode> {
  const choice = storeChoice(options.store);
  const memory = choice.kind === "memory";
  if (options.replay) await loadSession(options.replay, options.store);
  const store = memory ? undefined : await openStore(choice, { create: false, readOnly: true });
  let inspector: Inspector;
  try {
    // A replay prepares and schedules calls with the tools' own schemas and traits (nothing runs).
    inspector = await openInspector(options.port, store, builtinTools({ root: process.cwd() }));
  } catch (error) {
    await store?.close();
    throw error;
  }
  const url = options.replay
    ? `${inspector.url}&replay=${encodeURIComponent(options.replay)}`
    : inspector.url;
  if (options.json)
    out.write(
      `${JSON.stringify({ url, port: inspector.port, store: !store ? null : choice.kind === "sqlite" ? choice.path : shownStore(choice) })}\n`,
    );
  else {
    out.write(`keel inspector: ${url}\n`);
    out.write(
      store
        ? `the page lists the sessions of ${shownStore(choice)}; click one to replay it\n`
        : `${memory ? "--store memory" : `no store at ${shownStore(choice)}`}: nothing to replay (watch a live turn with keel run --inspect)\n`,
    );
    out.write("Ctrl-C to stop\n");
  }
  await (options.until ?? untilSignal)();
  await inspector.close();
  await store?.close();
  return EXIT.ok;
}

/**
 * Starts the inspector on `port` (absent: a free one) for `keel inspect`, `demo`, `run` and
 * `serve`, replaying `store`'s sessions with `tools`; a port in use is a config error that says
 * what to do.
 */
export async function openInspector(
  port?: number,
  store?: SessionStore,
  tools?: readonly ToolDefinition[],
): Promise<Inspector> {
  try {
    return await startInspector({
      ...(port ? { port } : {}),
      ...(store ? { store } : {}),
      ...(tools ? { tools } : {}),
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EADDRINUSE") {
      throw new CliError(
        `port ${port} is in use: pick another with --port, or omit it for a free one`,
        EXIT.config,
      );
    }
    throw error;
  }
}

function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
  });
}
