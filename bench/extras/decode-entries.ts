/**
 * What decoding stored entries costs when a session opens (session/decode.ts), side by side with
 * the cast it replaced (`JSON.parse(body) as LogEntry`), in one process, interleaved A/B:
 * - `bodies`: the bodies of an N-entry session already read from SQLite, decoded vs cast, and
 *   decoded with zod's own `parse` instead of the compiled check (what the fast path saves);
 * - `open`: `SessionLog.open` of that session over its SQLite store with no checkpoint (every
 *   entry read, decoded and replayed into the projection), the store's decoding `load` vs the
 *   same SELECT with a cast.
 * The session is a real one: a prompt of N/8 steps, one tool call a step.
 *   npx tsx bench/extras/decode-entries.ts [N=100000] [reps=7]
 * Prints µs per entry for each and the ratio decode ÷ cast (median of the reps).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import { createAgent } from "../../actors/agent.ts";
import { seededIds } from "../../actors/ids.ts";
import { systemClock } from "../../contracts/clock.ts";
import { scriptedModel } from "../../providers/scripted-model.ts";
import { decodeEntries } from "../../session/decode.ts";
import type { LogEntry } from "../../session/entries.ts";
import { logEntrySchema } from "../../session/entry-schema.ts";
import { SessionLog } from "../../session/log.ts";
import type { SessionStore } from "../../session/store.ts";
import { sqliteDatabase } from "../../session/stores/sqlite-handle.ts";
import { sqliteStore } from "../../session/stores/sqlite-store.ts";
import { defineTool } from "../../tools/define-tool.ts";

const N = Number(process.argv[2] ?? 100_000);
const REPS = Number(process.argv[3] ?? 7);
const dir = mkdtempSync(join(tmpdir(), "keel-decode-"));
const path = join(dir, "keel.db");

/** Writes a session of about `entries` entries: one tool call a step, as an agent writes them. */
async function writeSession(entries: number): Promise<void> {
  const steps = Math.max(2, Math.round(entries / 8));
  const store = sqliteStore(path);
  const read = defineTool({
    name: "read_file",
    description: "Reads a file.",
    parameters: z.object({ path: z.string() }),
    traits: { readOnly: true, concurrencySafe: true },
    execute: async ({ path: p }) => `contents of ${p}: ${"x".repeat(200)}`,
  });
  const script = Array.from({ length: steps }, (_, i) =>
    i < steps - 1
      ? {
          text: `Step ${i}: reading the next file.`,
          toolCalls: [
            { id: `call_${i}`, name: "read_file", arguments: JSON.stringify({ path: `f${i}.ts` }) },
          ],
          usage: { inputTokens: 1000 + i, outputTokens: 40 },
        }
      : { text: "Done.", usage: { inputTokens: 9000, outputTokens: 5 } },
  );
  const agent = createAgent({
    model: scriptedModel(script),
    tools: [read],
    store,
    ids: seededIds(1),
    limits: { maxSteps: steps + 1 },
  });
  const session = agent.session("d");
  await session.ready;
  await session.prompt("Read every file.");
  await agent.close();
  await store.close();
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const time = (fn: () => unknown) => {
  const t = performance.now();
  fn();
  return performance.now() - t;
};
const timeAsync = async (fn: () => Promise<unknown>) => {
  const t = performance.now();
  await fn();
  return performance.now() - t;
};

await writeSession(N);
const store = sqliteStore(path);
const db = sqliteDatabase(store);
db.exec("DELETE FROM checkpoints"); // every open decodes and replays every entry
const select = db.prepare("SELECT seq, body FROM entries WHERE session_id = ? ORDER BY seq").raw();
const rows = select.all("d") as [number, string][];
const site = { store: "bench", sessionId: "d" };
const cast = (): LogEntry[] => rows.map((r) => JSON.parse(r[1]) as LogEntry);
const zodParse = (): LogEntry[] => rows.map((r) => logEntrySchema.parse(JSON.parse(r[1])));
/** The store as it was: the same SELECT, each body cast. */
const castingStore: SessionStore = Object.create(store);
castingStore.load = async (id) =>
  (select.all(id) as [number, string][]).map((r) => JSON.parse(r[1]) as LogEntry);
const open = (s: SessionStore) =>
  SessionLog.open({
    sessionId: "d",
    store: s,
    clock: systemClock,
    ids: seededIds(2),
    checkpoints: false,
  });

const bodies = { decode: [] as number[], cast: [] as number[], zod: [] as number[] };
const opens = { decode: [] as number[], cast: [] as number[] };
for (let i = 0; i < 2; i++) {
  decodeEntries(rows, site); // warm-up
  cast();
  zodParse();
  await open(store);
  await open(castingStore);
}
for (let r = 0; r < REPS; r++) {
  // Alternate which goes first, so neither always runs on the other's garbage.
  const order = r % 2 === 0 ? (["decode", "cast"] as const) : (["cast", "decode"] as const);
  for (const which of order) {
    bodies[which].push(time(() => (which === "decode" ? decodeEntries(rows, site) : cast())));
    opens[which].push(await timeAsync(() => open(which === "decode" ? store : castingStore)));
  }
  bodies.zod.push(time(zodParse));
}
await store.close();
rmSync(dir, { recursive: true, force: true });

const perEntry = (ms: number) => (ms * 1000) / rows.length;
const line = (name: string, m: { decode: number[]; cast: number[] }) => {
  const d = median(m.decode);
  const c = median(m.cast);
  return `| ${name} | ${perEntry(c).toFixed(2)} | ${perEntry(d).toFixed(2)} | ${(d / c).toFixed(2)}× | +${perEntry(d - c).toFixed(2)} |`;
};
console.log(`${rows.length} entries, median of ${REPS} (interleaved), Node ${process.version}`);
console.log("| per entry | cast µs | decode µs | decode ÷ cast | decode − cast µs |");
console.log("| --- | --- | --- | --- | --- |");
console.log(line("bodies (JSON.parse vs decodeEntries)", bodies));
console.log(line("open (SessionLog.open over SQLite, no checkpoint)", opens));
console.log(
  line("bodies, zod's parse instead of the compiled check", {
    decode: bodies.zod,
    cast: bodies.cast,
  }),
);
