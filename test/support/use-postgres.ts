import { afterAll, beforeAll } from "vitest";
import { type PostgresServer, postgresTestMode, startPostgres } from "./postgres-server.ts";

/**
 * One PostgreSQL server for a test file: started before its tests (when the machine has one,
 * see `postgresTestMode`), stopped after them, once every store pushed to `stores` is closed.
 * Call it before the file's own `afterAll`: hooks run as a stack, so the file's clean-up (its
 * child processes, its workers) runs first.
 */
export function usePostgres() {
  const mode = postgresTestMode();
  let server: PostgresServer | undefined;
  const stores: { close(): Promise<void> }[] = [];
  beforeAll(async () => {
    if (mode.run) server = await startPostgres();
  }, 60_000);
  afterAll(async () => {
    for (const s of stores) await s.close().catch(() => {});
    await server?.stop();
  });
  return {
    mode,
    stores,
    /** The server's connection URL (inside a test: the server has started). */
    url: (): string => server!.url,
  };
}
