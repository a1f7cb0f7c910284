import { builtinTools, postgresStore, startWorker } from "../index.ts";
import { CliError, EXIT, type ExitCode, oneLine } from "./errors.ts";
import { modelFromEnv } from "./run.ts";

/**
 * `keel worker --store postgres://… [--concurrency N]`: runs sessions from the store with the
 * model from the environment and the built-in tools on the current directory, until SIGTERM or
 * SIGINT (then finishes or settles running turns and releases their leases).
 */
export async function runWorkerCommand(options: {
  store: string;
  schema?: string;
  concurrency: number;
}): Promise<ExitCode> {
  if (!/^postgres(ql)?:\/\//.test(options.store)) {
    throw new CliError(
      `--store must be a PostgreSQL URL (postgres://user:password@host:port/database), got "${options.store}"; workers share sessions through PostgreSQL`,
      EXIT.usage,
    );
  }
  const model = modelFromEnv();
  let store: Awaited<ReturnType<typeof postgresStore>>;
  try {
    store = await postgresStore(options.store, { schema: options.schema });
  } catch (error) {
    throw new CliError(`cannot open the store: ${oneLine(error)}`, EXIT.config);
  }
  const worker = await startWorker({
    store,
    model,
    tools: builtinTools({ root: process.cwd() }),
    concurrency: options.concurrency,
  });
  process.stderr.write(
    `keel worker: running (concurrency ${options.concurrency}); SIGTERM stops\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  });
  process.stderr.write(`keel worker: stopping (${worker.running().length} sessions running)\n`);
  await worker.stop();
  await store.close();
  return EXIT.ok;
}
