/**
 * Closed sessions are released: the heap after opening, prompting and closing N sessions
 * (each with its own id) comes back to the baseline plus a constant (the same rise for 1 000
 * and 3 000 sessions: warm-up, not retention). Before, the agent kept every closed session in
 * its map (≈ 23 MB per 1 000).
 * `node --expose-gc --import tsx bench/extras/closed-sessions.ts [N]` (default 1000)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAgent } from "../../actors/agent.ts";
import type { Model } from "../../contracts/model.ts";
import { sqliteStore } from "../../session/stores/sqlite-store.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with node --expose-gc --import tsx");
const n = Number(process.argv[2] ?? 1000);
const heap = async () => {
  for (let i = 0; i < 3; i++) {
    await new Promise((r) => setTimeout(r, 20));
    gc();
  }
  return process.memoryUsage().heapUsed;
};
// SQLite, so the logs live in the file and not in the heap (the memory store keeps them).
const dir = mkdtempSync(join(tmpdir(), "keel-closed-"));
// A model that keeps nothing (the scripted model records every request).
const model: Model = {
  name: "answer",
  async *stream() {
    yield { type: "text.delta", text: "an answer" };
    yield { type: "finish", reason: "stop" };
  },
};
const agent = createAgent({
  model,
  store: sqliteStore(join(dir, "k.db")),
});
async function cycle(id: string) {
  const session = await agent.openSession(id);
  await session.prompt("a question");
  await session.close();
}
await cycle("warm-up");
const before = await heap();
for (let i = 0; i < n; i++) await cycle(`s${i}`);
const after = await heap();
console.log(
  `${n} sessions opened, prompted, closed: heap ${(before / 1e6).toFixed(1)} MB → ${(after / 1e6).toFixed(1)} MB (${((after - before) / n / 1024).toFixed(2)} KB a closed session)`,
);
await agent.close();
await agent.store.close();
rmSync(dir, { recursive: true, force: true });
