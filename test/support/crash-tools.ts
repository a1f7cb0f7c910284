import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type Database from "better-sqlite3";
import { z } from "zod";
import type { Ledger } from "../../session/stores/ledger.ts";
import { defineTool } from "../../tools/define-tool.ts";

/**
 * Tools with observable side effects for crash tests:
 * - `mark` (NOT idempotent): appends a line to `<dir>/marker.log`, then `afterEffect`;
 * - `increment` (idempotent): adds to a counter row in the store's own SQLite database through
 *   the idempotency ledger, atomically with the ledger row, then `afterEffect`;
 * - `quick`: returns at once.
 */
export function crashTools(options: {
  dir: string;
  ledger: Ledger;
  afterEffect: (name: string) => Promise<unknown>;
}) {
  const { dir, ledger, afterEffect } = options;
  const mark = defineTool({
    name: "mark",
    description: "Writes a marker line (a side effect that must not happen twice).",
    parameters: z.object({ label: z.string() }),
    traits: { concurrencySafe: true },
    execute: async ({ label }) => {
      appendFileSync(join(dir, "marker.log"), `${label}\n`);
      await afterEffect("mark");
      return `marked ${label}`;
    },
  });
  const increment = defineTool({
    name: "increment",
    description: "Adds to a durable counter, exactly once per idempotency key.",
    parameters: z.object({ by: z.number() }),
    traits: { idempotent: true, concurrencySafe: true },
    execute: async ({ by }, ctx) => {
      const outcome = await ledger.run(
        "increment",
        ctx.idempotencyKey,
        { by },
        (run) =>
          run.transact((db) => {
            const d = db as Database.Database;
            d.exec("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, n INTEGER)");
            d.prepare(
              "INSERT INTO counter (id, n) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET n = n + excluded.n",
            ).run(by);
            appendFileSync(join(dir, "increment.log"), `${ctx.idempotencyKey}\n`);
            return `incremented by ${by}`;
          }),
        { atomic: true },
      );
      await afterEffect("increment");
      if (outcome.type === "failed") return outcome.failure;
      return `${outcome.result} (${outcome.type})`;
    },
  });
  const quick = defineTool({
    name: "quick",
    description: "Returns at once.",
    parameters: z.object({}),
    traits: { concurrencySafe: true },
    execute: () => "quick done",
  });
  return [mark, increment, quick];
}

export const readLines = (path: string) => {
  try {
    return readFileSync(path, "utf8").split("\n").filter(Boolean);
  } catch {
    return [];
  }
};
