import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { sqliteDatabase } from "../session/stores/sqlite-handle.ts";
import { sqliteLedger } from "../session/stores/sqlite-ledger.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { crashTools, readLines } from "./support/crash-tools.ts";

const child = join(import.meta.dirname, "support", "crash-child.ts");

/** Runs a scenario in a child process and kills it with SIGKILL at its READY moment. */
async function crash(scenario: string) {
  const dir = mkdtempSync(join(tmpdir(), "keel-crash-"));
  const dbPath = join(dir, "keel.db");
  const proc = spawn(process.execPath, ["--import", "tsx", child, dbPath, dir, scenario], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  proc.stderr.on("data", (d) => {
    stderr += d;
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    proc.on("exit", (_c, sig) => resolve(sig)),
  );
  await new Promise<void>((resolve, reject) => {
    let out = "";
    proc.stdout.on("data", (d) => {
      out += d;
      if (out.includes(`READY ${scenario}`)) resolve();
    });
    proc.on("exit", () => reject(new Error(`child exited before READY: ${stderr}`)));
  });
  proc.kill("SIGKILL");
  expect(await exited).toBe("SIGKILL");
  return { dir, dbPath };
}

/**
 * Reopens the crashed session in this process, as a restarted program would, closing the cut
 * turn (`recovery: "close"`; continued turns: test/durable-waits.e2e.test.ts).
 */
async function reopen(dir: string, dbPath: string) {
  const store = sqliteStore(dbPath, { durability: "process" });
  const ledger = sqliteLedger(store, {
    clock: { now: () => Date.now(), setTimeout, clearTimeout },
  });
  const tools = crashTools({ dir, ledger, afterEffect: async () => {} });
  const model = scriptedModel([{ text: "carrying on" }]);
  const session = createAgent({ model, store, tools, recovery: "close" }).session("crash");
  await session.ready;
  return { store, session, model };
}

const results = (entries: readonly LogEntry[]) =>
  entries.filter((e) => e.type === "call_result") as Extract<LogEntry, { type: "call_result" }>[];

describe("crash recovery with a real SIGKILL", () => {
  it("a non-idempotent call killed after its side effect is unknown on reopen and never runs again", async () => {
    const { dir, dbPath } = await crash("non-idempotent");
    expect(readLines(join(dir, "marker.log"))).toEqual(["once"]);
    const { session, model, store } = await reopen(dir, dbPath);
    const [r] = results(session.entries());
    expect(r).toMatchObject({
      callId: "m1",
      outcome: "unknown",
      result: { code: "OUTCOME_UNKNOWN" },
    });
    expect((r.result as { message: string }).message).toMatch(/check/i);
    expect(session.entries().some((e) => e.type === "turn_end" && e.status === "failed")).toBe(
      true,
    );
    await session.prompt("what happened?");
    const tool = model.requests[0].messages.find((m) => m.role === "tool");
    expect(tool?.content).toMatch(/unknown/);
    expect(readLines(join(dir, "marker.log"))).toEqual(["once"]);
    await store.close();
  });

  it("an idempotent call is retried on reopen with the same key, and the ledger prevents a second effect", async () => {
    const { dir, dbPath } = await crash("idempotent");
    const keys = readLines(join(dir, "increment.log"));
    expect(keys).toHaveLength(1);
    const { session, store } = await reopen(dir, dbPath);
    const [r] = results(session.entries());
    expect(r).toMatchObject({ callId: "i1", outcome: "completed" });
    expect((r.result as { content: string }).content).toContain("(replayed)");
    expect(readLines(join(dir, "increment.log"))).toEqual(keys);
    const started = session.entries().find((e) => e.type === "call_started");
    expect(started).toMatchObject({ idempotencyKey: keys[0] });
    expect(sqliteDatabase(store).prepare("SELECT n FROM counter").get()).toEqual({ n: 1 });
    await store.close();
  });

  it("a kill during streaming closes the attempt as interrupted; its partial text never reaches the model", async () => {
    const { dir, dbPath } = await crash("streaming");
    const { session, model, store } = await reopen(dir, dbPath);
    const end = session.entries().find((e) => e.type === "attempt_end");
    expect(end).toMatchObject({ status: "interrupted" });
    await session.prompt("again");
    expect(JSON.stringify(model.requests[0].messages)).not.toContain("partial");
    await store.close();
  });

  it("a kill between two calls of a parallel batch keeps the finished result and marks the other unknown", async () => {
    const { dir, dbPath } = await crash("parallel-batch");
    const { session, store } = await reopen(dir, dbPath);
    const byId = Object.fromEntries(results(session.entries()).map((r) => [r.callId, r]));
    expect(byId.p1).toMatchObject({
      outcome: "completed",
      result: { ok: true, content: "quick done" },
    });
    expect(byId.p2).toMatchObject({ outcome: "unknown" });
    expect(readLines(join(dir, "marker.log"))).toEqual(["second"]);
    const tools = session.messages().filter((m) => m.role === "tool");
    expect(tools).toHaveLength(2);
    await store.close();
  });
});
