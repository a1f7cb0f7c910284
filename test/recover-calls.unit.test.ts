import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { seededIds } from "../actors/ids.ts";
import { recoverCalls } from "../actors/recover-calls.ts";
import { rollback } from "../session/branches.ts";
import type { EntryOf } from "../session/entries.ts";
import { SessionLog } from "../session/log.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { type SqliteSessionStore, sqliteStore } from "../session/stores/sqlite-store.ts";
import { defineTool } from "../tools/define-tool.ts";
import { createRegistry } from "../tools/registry.ts";
import { call, countingClock, openLog, result, started, step, user } from "./session-fixtures.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-recover-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const tool = defineTool({
  name: "tool",
  description: "A tool that is not idempotent.",
  parameters: z.object({}),
  execute: () => "ran",
});
const registry = createRegistry([tool]);
const logger = pino({ level: "silent" });

const resultsOf = (log: SessionLog) =>
  Object.fromEntries(
    log
      .entries()
      .filter((e): e is EntryOf<"call_result"> => e.type === "call_result")
      .map((e) => [e.callId, e.outcome]),
  );

describe("recoverCalls", () => {
  it("re-runs an idempotent call with its arguments prepared again from the model's text: a transformed field arrives as its transformed type", async () => {
    const seen: unknown[] = [];
    const typed = defineTool({
      name: "schedule",
      description: "Schedules at a date, for a set of tags.",
      parameters: z.object({
        at: z.string().transform((s) => new Date(s)),
        tags: z.array(z.string()).transform((a) => new Set(a)),
      }),
      traits: { idempotent: true },
      execute: (args) => {
        seen.push(args);
        return "scheduled";
      },
    });
    const log = await openLog(memoryStore(), "typed");
    log.append({ type: "turn_start", turnId: "t1" });
    log.append(user("schedule it"));
    const text = '{"at":"2025-01-02T03:04:05.000Z","tags":["a","b"]}';
    step(log, "a1", "", [call("c1", "schedule", text)]);
    // The start record holds the schema's output as the log stores it: a Date became a string,
    // a Set became {}.
    log.append({
      type: "call_started",
      callId: "c1",
      name: "schedule",
      args: JSON.parse(
        JSON.stringify({ at: new Date("2025-01-02T03:04:05.000Z"), tags: new Set(["a", "b"]) }),
      ),
      idempotencyKey: "k1",
      idempotent: true,
    });
    const report = await recoverCalls({ log, registry: createRegistry([typed]), logger });
    expect(report.retried).toBe(1);
    const args = seen[0] as { at: unknown; tags: unknown };
    expect(args.at).toBeInstanceOf(Date);
    expect((args.at as Date).toISOString()).toBe("2025-01-02T03:04:05.000Z");
    expect(args.tags).toEqual(new Set(["a", "b"]));
  });

  it("answers a call that never started 'not executed' and a started one 'unknown', never the reverse", async () => {
    const log = await openLog(memoryStore(), "crashed");
    log.append({ type: "turn_start", turnId: "t1", inboxIds: [] });
    log.append(user("do three things"));
    step(log, "a1", "", [call("c1"), call("c2"), call("c3")]);
    log.append(started("c1"));
    log.append({
      type: "call_result",
      callId: "c1",
      name: "tool",
      outcome: "completed",
      result: { ok: true, content: "done" },
    });
    log.append(started("c2")); // the crash came here: c2 may have run, c3 never started
    const report = await recoverCalls({ log, registry, logger });
    expect(report).toEqual({ retried: 0, unknown: 1, notStarted: 1 });
    expect(resultsOf(log)).toEqual({ c1: "completed", c2: "unknown", c3: "not_executed" });
    expect(log.unstartedCalls()).toEqual([]);
    // Running it again changes nothing.
    expect(await recoverCalls({ log, registry, logger })).toEqual({
      retried: 0,
      unknown: 0,
      notStarted: 0,
    });
  });

  it("after a rollback to a message whose calls ran on the abandoned branch, a clean reopen writes nothing (only the last tool-asking message counts)", async () => {
    const store = memoryStore();
    const log = await openLog(store, "rolled", 1);
    log.append({ type: "turn_start", turnId: "t1", inboxIds: [] });
    log.append(user("delete the file"));
    const asked = step(log, "a1", "", [call("c1")]);
    log.append(started("c1")); // it ran: the file is gone
    log.append(result("c1", "deleted"));
    step(log, "a2", "done");
    log.append({ type: "turn_end", turnId: "t1", status: "completed" });
    rollback(log, asked.id); // c1's start and result are now off the path
    log.append({ type: "turn_start", turnId: "t2", inboxIds: [] });
    log.append(user("now list the files"));
    step(log, "a3", "", [call("d1")], "t2");
    log.append(started("d1"));
    log.append(result("d1", "listed"));
    step(log, "a4", "ok", [], "t2");
    log.append({ type: "turn_end", turnId: "t2", status: "completed" });
    await log.close();
    const reopened = await openLog(store, "rolled", 2);
    expect(await recoverCalls({ log: reopened, registry, logger })).toEqual({
      retried: 0,
      unknown: 0,
      notStarted: 0,
    });
    await reopened.loadHistory();
    expect(reopened.entries().filter((e) => e.type === "call_result")).toHaveLength(2);
  });

  it("a model that reuses call ids across messages: the started call of the last message is unknown, never 'not executed'", async () => {
    const store = memoryStore();
    const log = await openLog(store, "reused", 1);
    log.append({ type: "turn_start", turnId: "t1", inboxIds: [] });
    log.append(user("x"));
    step(log, "a1", "", [call("call_0")]);
    log.append(started("call_0"));
    log.append(result("call_0", "ran"));
    step(log, "a2", "", [call("call_0"), call("call_1")]);
    log.append(started("call_0")); // the crash came while it ran; call_1 never started
    await log.flush();
    const reopened = await openLog(store, "reused", 2);
    expect(await recoverCalls({ log: reopened, registry, logger })).toEqual({
      retried: 0,
      unknown: 1,
      notStarted: 1,
    });
    const outcomes = reopened
      .path()
      .filter((e): e is EntryOf<"call_result"> => e.type === "call_result")
      .map((e) => `${e.callId}:${e.outcome}`);
    expect(outcomes).toEqual(["call_0:completed", "call_0:unknown", "call_1:not_executed"]);
  });

  it("rollback, then a reused call id that crashed while running: unknown, never 'not executed' (it may have run)", async () => {
    const store = memoryStore();
    const log = await openLog(store, "rolled-reused", 1);
    log.append({ type: "turn_start", turnId: "t1", inboxIds: [] });
    log.append(user("x"));
    const asked = step(log, "a1", "", [call("call_0")]);
    log.append(started("call_0"));
    log.append(result("call_0", "ran"));
    step(log, "a2", "done");
    log.append({ type: "turn_end", turnId: "t1", status: "completed" });
    rollback(log, asked.id);
    log.append({ type: "turn_start", turnId: "t2", inboxIds: [] });
    log.append(user("y"));
    step(log, "a3", "", [call("call_0")], "t2");
    log.append(started("call_0")); // the crash came while it ran
    await log.flush();
    const reopened = await openLog(store, "rolled-reused", 2);
    expect(await recoverCalls({ log: reopened, registry, logger })).toEqual({
      retried: 0,
      unknown: 1,
      notStarted: 0,
    });
    const outcomes = reopened
      .path()
      .filter((e): e is EntryOf<"call_result"> => e.type === "call_result")
      .map((e) => e.outcome);
    expect(outcomes).toEqual(["unknown"]);
  });

  it("reads the projection, not the history: a checkpointed session recovers without decoding entries before its checkpoint", async () => {
    const store = sqliteStore(join(dir, "keel.db"));
    const log = await SessionLog.open({
      sessionId: "long",
      store,
      clock: countingClock(),
      ids: seededIds(1),
    });
    for (let i = 0; i < 40; i++) {
      log.append(user(`step ${i}`));
      step(log, `h${i}`, `answer ${i}`);
    }
    step(log, "a1", "", [call("c1"), call("c2")]);
    log.append(started("c1"));
    await log.flush();
    await log.checkpoint(); // the crash comes after a checkpoint that covers everything
    const { store: counted, loads } = countingPrefix(store);
    const reopened = await SessionLog.open({
      sessionId: "long",
      store: counted,
      clock: countingClock(),
      ids: seededIds(2),
    });
    const report = await recoverCalls({ log: reopened, registry, logger });
    expect(report).toEqual({ retried: 0, unknown: 1, notStarted: 1 });
    expect(loads.count).toBe(0);
    await reopened.loadHistory();
    expect(resultsOf(reopened)).toEqual({ c1: "unknown", c2: "not_executed" });
    await store.close();
  });
});

/** The store, counting how often a log decodes the history before a checkpoint. */
function countingPrefix(s: SqliteSessionStore) {
  const loads = { count: 0 };
  const wrapped = Object.create(s) as SqliteSessionStore;
  wrapped.loadFromCheckpoint = async (id) => {
    const load = await s.loadFromCheckpoint(id);
    return (
      load && {
        ...load,
        loadPrefix: async () => {
          loads.count++;
          return load.loadPrefix();
        },
      }
    );
  };
  return { store: wrapped, loads };
}
