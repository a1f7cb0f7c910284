/**
 * The size of a 1 000-step session's log (one tool call a step, SQLite store): the file after a
 * WAL checkpoint and VACUUM, and the JSON bodies of its entries, total and by entry type.
 *   npx tsx bench/extras/log-size.ts [file.db]           write a fresh session, then measure it
 *   npx tsx bench/extras/log-size.ts --measure file.db   open (migrating it) and measure a file
 * Run before and after a schema change; `--measure` on the earlier file shows what migration
 * makes of it.
 */
import { copyFileSync, mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { createAgent } from "../../actors/agent.ts";
import { seededIds } from "../../actors/ids.ts";
import { scriptedModel } from "../../providers/scripted-model.ts";
import { sqliteDatabase } from "../../session/stores/sqlite-handle.ts";
import { sqliteStore } from "../../session/stores/sqlite-store.ts";
import { defineTool } from "../../tools/define-tool.ts";

const STEPS = 1000;
const args = process.argv.slice(2);

function measure(path: string): void {
  const store = sqliteStore(path); // migrates an older file
  const db = sqliteDatabase(store);
  db.pragma("wal_checkpoint(TRUNCATE)");
  db.exec("VACUUM");
  const version = db
    .prepare("SELECT value FROM keel_meta WHERE key = 'schema_version'")
    .pluck()
    .get();
  const rows = db
    .prepare(
      "SELECT type, count(*) AS n, sum(length(body)) AS bytes FROM entries GROUP BY type ORDER BY bytes DESC",
    )
    .all() as { type: string; n: number; bytes: number }[];
  const total = rows.reduce((s, r) => s + r.bytes, 0);
  void store.close();
  const file = statSync(path).size;
  console.log(
    `schema version ${version}: file ${file} B, entry bodies ${total} B (${(total / STEPS).toFixed(0)} B a step)`,
  );
  for (const r of rows)
    console.log(
      `  ${r.type.padEnd(18)} ${String(r.n).padStart(5)} × ${(r.bytes / r.n).toFixed(0).padStart(4)} B = ${r.bytes}`,
    );
}

if (args[0] === "--measure") {
  const copy = join(mkdtempSync(join(tmpdir(), "keel-size-")), "copy.db");
  copyFileSync(args[1], copy);
  measure(copy);
} else {
  const path = args[0] ?? join(mkdtempSync(join(tmpdir(), "keel-size-")), "keel.db");
  const store = sqliteStore(path);
  const read = defineTool({
    name: "read_file",
    description: "Reads a file.",
    parameters: z.object({ path: z.string() }),
    traits: { readOnly: true, concurrencySafe: true },
    execute: async ({ path: p }) => `contents of ${p}: ${"x".repeat(200)}`,
  });
  const steps = Array.from({ length: STEPS }, (_, i) =>
    i < STEPS - 1
      ? {
          text: `Step ${i}: reading the next file.`,
          toolCalls: [
            {
              id: `call_${i}`,
              name: "read_file",
              arguments: JSON.stringify({ path: `src/file-${i}.ts` }),
            },
          ],
          usage: { inputTokens: 1000 + i * 60, outputTokens: 40 },
        }
      : { text: "Done.", usage: { inputTokens: 61_000, outputTokens: 5 } },
  );
  const agent = createAgent({
    model: scriptedModel(steps),
    tools: [read],
    store,
    ids: seededIds(1),
    limits: { maxSteps: STEPS + 1 },
  });
  const session = agent.session("size");
  await session.ready;
  const result = await session.prompt("Read every file.");
  await agent.close();
  await store.close();
  console.log(`${result.status}; ${path}`);
  measure(path);
}
