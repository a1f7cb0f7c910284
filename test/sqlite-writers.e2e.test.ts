import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { sqliteStore } from "../session/stores/sqlite-store.ts";

// Many writing processes on one SQLite file (docs/many-processes.md): real processes, each
// running sessions through the real runtime with fsync at every commit (durability power, the
// longest lock holds) and a short lease. A process that waited for the file lock synchronously
// stopped its event loop: its lease heartbeats came late, its leases expired and its turns
// ended FENCED. Writes now wait for the lock from a timer, so every turn completes.

const CHILD = fileURLToPath(new URL("./support/sqlite-writer-child.ts", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "keel-writers-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Out {
  completed: number;
  failure?: string;
  stallMs: number;
}

function writer(args: string[]): Promise<Out> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ["--import", "tsx", CHILD, ...args], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (err = (err + d).slice(-4000)));
    p.on("exit", (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`writer exited ${code}: ${err}`)),
    );
  });
}

describe("sqlite store shared by writing processes", () => {
  it("three processes writing one file with durability power: every turn completes, no lease lapses, and every step is in the file", async () => {
    const path = join(dir, "keel.db");
    await sqliteStore(path).close(); // the schema, before three processes race to create it
    const SESSIONS = 8;
    const STEPS = 12;
    // A 3 s lease is renewed every second: a process that stops its loop for 2 s loses its
    // sessions' leases (the store before this test waited up to busyTimeoutMs, 5 s, and did).
    const outs = await Promise.all(
      ["p0", "p1", "p2"].map((tag) => writer([path, tag, String(SESSIONS), String(STEPS), "3000"])),
    );
    for (const o of outs) {
      expect(o.failure).toBeUndefined();
      expect(o.completed).toBe(SESSIONS);
    }
    const store = sqliteStore(path);
    for (const tag of ["p0", "p1", "p2"]) {
      for (let i = 0; i < SESSIONS; i++) {
        const entries = await store.load(`${tag}-${i}`);
        expect(entries.filter((e) => e.type === "call_result")).toHaveLength(STEPS);
        expect(entries.at(-1)).toMatchObject({ type: "turn_end", status: "completed" });
      }
    }
    await store.close();
    console.log(
      `longest event-loop stall per process: ${outs.map((o) => `${o.stallMs.toFixed(0)} ms`).join(", ")}`,
    );
  }, 120_000);
});
