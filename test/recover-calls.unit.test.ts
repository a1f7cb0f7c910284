import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { seededIds } from "../actors/ids.ts";
import { recoverCalls } from "../actors/recover-calls.ts";
import type { EntryOf } from "../session/entries.ts";
import { SessionLog } from "../session/log.ts";
import { memoryStore } from "../session/memory-store.ts";
import { type SqliteSessionStore, sqliteStore } from "../session/sqlite-store.ts";
import { defineTool } from "../tools/define-tool.ts";
import { createRegistry } from "../tools/registry.ts";
import { call, countingClock, openLog, started, step, user } from "./session-fixtures.ts";

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
    expect(log.unansweredCalls()).toEqual([]);
    // Running it again changes nothing.
    expect(await recoverCalls({ log, registry, logger })).toEqual({
      retried: 0,
      unknown: 0,
      notStarted: 0,
    });
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
        loadPrefix: () => {
          loads.count++;
          return load.loadPrefix();
        },
      }
    );
  };
  return { store: wrapped, loads };
}
