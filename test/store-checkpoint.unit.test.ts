import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import pino from "pino";
import { afterAll, describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { seededIds } from "../actors/ids.ts";
import { inboxSnapshot } from "../machines/policies/inbox.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { type CheckpointStore, checkpointDue } from "../session/checkpoint.ts";
import type { EntryInput } from "../session/entries.ts";
import { inboxFromEntries } from "../session/inbox-log.ts";
import { SessionLog } from "../session/log.ts";
import { readSession } from "../session/read-session.ts";
import type { SessionStore } from "../session/store.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { sqliteDatabase } from "../session/stores/sqlite-handle.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { countingClock, user } from "./session-fixtures.ts";
import { opArb, playOps } from "./session-random-log.ts";

const dir = mkdtempSync(join(tmpdir(), "keel-ckpt-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const store = sqliteStore(join(dir, "keel.db"));
type CheckpointedStore = SessionStore & CheckpointStore;

/** The same store without its checkpoint methods: opening it replays every entry. */
const plain = (s: CheckpointedStore): SessionStore => ({
  kind: "plain",
  append: (id, e) => s.append(id, e),
  load: (id) => s.load(id),
  list: () => s.list(),
  close: async () => {},
});

/** Counts how often the history before the checkpoint is decoded. */
function counting(s: CheckpointedStore) {
  const counter = { prefixLoads: 0 };
  const wrapped = Object.create(s) as CheckpointedStore;
  wrapped.loadFromCheckpoint = async (id) => {
    const load = await s.loadFromCheckpoint(id);
    if (!load) return load;
    // Without the synchronous loader: the log reads history only through loadHistory(), as
    // over PostgreSQL.
    return {
      seq: load.seq,
      body: load.body,
      tail: load.tail,
      loadPrefix: async () => {
        counter.prefixLoads++;
        return load.loadPrefix();
      },
    };
  };
  return { store: wrapped, counter };
}

/** Counts how often a log reloads history it released after a checkpoint. */
function countingUpTo(s: CheckpointedStore) {
  const counter = { loads: 0, seqs: [] as number[] };
  const wrapped = Object.create(s) as CheckpointedStore;
  wrapped.loadUpToSync = undefined; // asynchronous reads only, as over PostgreSQL
  wrapped.loadUpTo = (id, seq) => {
    counter.loads++;
    counter.seqs.push(seq);
    return s.loadUpTo!(id, seq);
  };
  return { store: wrapped, counter };
}

let n = 0;
const open = (s: SessionStore, sessionId: string, checkpoints?: false, seed = ++n) =>
  SessionLog.open({
    sessionId,
    store: s,
    clock: countingClock(),
    ids: seededIds(seed),
    checkpoints,
  });

/** Ops that append without reading history; any other op needs `loadHistory()` first. */
const LOCAL = ["user", "turn", "step", "openAttempt", "endTurn", "settings", "note"];
const play = async (log: SessionLog, ops: Parameters<typeof playOps>[1]) => {
  if (!ops.every((op) => LOCAL.includes(op.k))) await log.loadHistory();
  playOps(log, ops);
};

const view = async (log: SessionLog) => {
  await log.loadHistory();
  return {
    messages: log.messages(),
    sources: log.messageSources(),
    settings: log.settings(),
    baseline: log.baseline(),
    work: log.openWork(),
    unstarted: log.unstartedCalls(),
    inbox: inboxSnapshot(log.inbox()),
    lastSeq: log.lastSeq,
    leaf: log.leafId,
    path: log.path().map((e) => e.id),
    entries: log.entries(),
  };
};

/** Every checkpointing store Keel ships: the log must behave the same over each. */
const stores: [string, CheckpointedStore][] = [
  ["sqlite", store],
  ["memory", memoryStore()],
];

describe.each(stores)("projection checkpoints (%s store)", (_name, store) => {
  it("reopening from a checkpoint plus its tail equals replaying every entry, and stays equal under further appends", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { maxLength: 30 }),
        fc.array(opArb, { maxLength: 15 }),
        fc.array(opArb, { maxLength: 8 }),
        async (before, after, more) => {
          const sessionId = `p${++n}`;
          const log = await open(store, sessionId, false);
          await play(log, before);
          await log.flush();
          await log.checkpoint();
          await play(log, after); // the tail: written, not checkpointed (a crash before the next one)
          await log.flush();
          const fast = await open(store, sessionId, false, 7);
          const slow = await open(plain(store), sessionId, false, 7);
          // append on the fast log BEFORE anything forces its history to load
          await play(fast, more);
          await play(slow, more);
          expect(await view(fast)).toEqual(await view(slow));
        },
      ),
      { numRuns: 60 },
    );
  });

  it("open, messages() and appends do not decode the history before the checkpoint; loadHistory() does, once", async () => {
    const log = await open(store, "lazy", false);
    for (let i = 0; i < 50; i++) log.append(user(`m${i}`));
    await log.close();
    const { store: s, counter } = counting(store);
    const reopened = await open(s, "lazy");
    expect(reopened.messages().length).toBe(50);
    reopened.append(user("new"));
    expect(reopened.messages().length).toBe(51);
    expect(counter.prefixLoads).toBe(0);
    expect(() => reopened.entries()).toThrow(/await log.loadHistory\(\)/);
    await reopened.loadHistory();
    await reopened.loadHistory();
    expect(reopened.entries().length).toBe(51);
    expect(reopened.path().length).toBe(51);
    expect(counter.prefixLoads).toBe(1);
  });

  it("readSession (keel show) reads every entry of a checkpointed session over a store that loads history only asynchronously, as PostgreSQL", async () => {
    const log = await open(store, "read-ckpt", false);
    for (let i = 0; i < 40; i++) log.append(user(`m${i}`));
    await log.close();
    const { store: s } = counting(store);
    const read = await readSession(s, "read-ckpt");
    expect(read.entries.map((e) => e.seq)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(read.messages.length).toBe(40);
  });

  it("over a store that reads synchronously, entries() loads the history on first need, once", async () => {
    const log = await open(store, "lazy-sync", false);
    for (let i = 0; i < 30; i++) log.append(user(`m${i}`));
    await log.close();
    const reopened = await open(store, "lazy-sync");
    expect(reopened.historyLoaded).toBe(true); // nothing to await: the store can read now
    reopened.append(user("new"));
    expect(reopened.entries().map((e) => e.seq)).toEqual(
      Array.from({ length: 31 }, (_, i) => i + 1),
    );
  });

  it("after it writes a checkpoint, a log keeps only the entries since in memory, and behaves exactly as before", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { maxLength: 30 }),
        fc.array(opArb, { maxLength: 15 }),
        async (before, after) => {
          const sessionId = `r${++n}`;
          const { store: s, counter } = countingUpTo(store);
          const log = await open(s, sessionId, false);
          await play(log, before);
          await log.flush();
          await log.checkpoint(); // releases what it covers
          await play(log, after);
          const work = log.openWork();
          const messages = log.messages().slice();
          // Appending, messages() and openWork() need no history; edits, compactions and leaf
          // moves pick their targets from it, and a committed attempt failing rebuilds.
          if (after.every((op) => LOCAL.includes(op.k))) expect(counter.loads).toBe(0);
          await log.flush();
          const slow = await open(plain(store), sessionId, false, 7);
          expect({ ...(await view(log)), messages, work }).toEqual(await view(slow));
          expect(counter.loads).toBeLessThanOrEqual(1);
        },
      ),
      { numRuns: 60 },
    );
  });

  it("a leaf move whose history reload fails changes nothing: no seq used, nothing half-placed", async () => {
    const { store: s, counter } = countingUpTo(store);
    let fail = true;
    const flaky = Object.create(s) as CheckpointedStore;
    flaky.loadUpTo = async (id, seq) => {
      if (fail) {
        fail = false;
        throw new Error("disk I/O error");
      }
      return s.loadUpTo!(id, seq);
    };
    const log = await open(flaky, `flaky${++n}`, false);
    for (let i = 0; i < 4; i++) log.append(user(`m${i}`));
    await log.flush();
    await log.checkpoint(); // m0..m3 leave memory
    const kept = log.append(user("m4"));
    await expect(log.loadHistory()).rejects.toThrow(/disk I\/O error/);
    expect(() => log.append({ type: "leaf", leafId: kept.id, reason: "switch" })).toThrow(
      /not loaded/,
    );
    expect(log.lastSeq).toBe(5);
    log.append(user("m5"));
    await log.flush();
    const stored = await store.load(log.sessionId);
    expect(stored.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    await log.loadHistory();
    expect(log.entries().map((e) => e.id)).toEqual(stored.map((e) => e.id));
    expect(counter.loads).toBe(1);
  });

  it("loadHistory() after a release reloads the history once; a later checkpoint releases it again", async () => {
    const { store: s, counter } = countingUpTo(store);
    const log = await open(s, "release", false);
    for (let i = 0; i < 20; i++) log.append(user(`m${i}`));
    await log.flush();
    await log.checkpoint();
    log.append(user("after"));
    expect(log.messages().length).toBe(21);
    expect(counter.loads).toBe(0);
    await log.loadHistory();
    expect(log.entries().map((e) => e.seq)).toEqual(Array.from({ length: 21 }, (_, i) => i + 1));
    expect(log.path().length).toBe(21);
    expect(counter.loads).toBe(1);
    await log.flush();
    await log.checkpoint();
    await log.loadHistory();
    expect(log.entries().length).toBe(21);
    expect(counter.loads).toBe(2);
    // Checkpoints in a row, the history never asked for: each releases up to its own seq.
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 5; i++) log.append(user(`r${round}.${i}`));
      await log.flush();
      await log.checkpoint();
    }
    log.append(user("last"));
    await log.loadHistory();
    expect(log.entries().length).toBe(32);
    expect(counter.seqs).toEqual([20, 21, 31]);
  });

  /** Random inbox traffic: inputs received (some twice), some consumed, some still queued. */
  const inboxOpArb = fc.oneof(
    fc.record({ kind: fc.constant("in" as const), id: fc.integer({ min: 0, max: 6 }) }),
    fc.record({ kind: fc.constant("used" as const), id: fc.integer({ min: 0, max: 6 }) }),
    fc.record({ kind: fc.constant("msg" as const), id: fc.constant(0) }),
  );
  const playInbox = (log: SessionLog, ops: { kind: "in" | "used" | "msg"; id: number }[]) => {
    for (const op of ops) {
      const entry: EntryInput =
        op.kind === "in"
          ? { type: "inbox", inboxId: `in${op.id}`, source: "user", lane: "next-turn", body: "b" }
          : op.kind === "used"
            ? { type: "inbox_consumed", inboxId: `in${op.id}` }
            : user("talk");
      log.append(entry);
    }
  };

  it("the inbox is kept in the checkpoint: reopening restores it (queue and every id seen) without decoding the history", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(inboxOpArb, { maxLength: 25 }),
        fc.array(inboxOpArb, { maxLength: 10 }),
        fc.array(inboxOpArb, { maxLength: 6 }),
        async (before, after, more) => {
          const sessionId = `inbox${++n}`;
          const log = await open(store, sessionId, false);
          playInbox(log, before);
          await log.flush();
          await log.checkpoint();
          playInbox(log, after);
          await log.flush();
          const { store: s, counter } = counting(store);
          const fast = await open(s, sessionId, false, 7);
          playInbox(fast, more);
          const restored = inboxSnapshot(fast.inbox());
          expect(counter.prefixLoads).toBe(0);
          await fast.loadHistory();
          expect(restored).toEqual(inboxSnapshot(inboxFromEntries(fast.entries())));
        },
      ),
      { numRuns: 60 },
    );
  });

  it("agent.session(id) opens a checkpointed session without decoding its history (recovery and inbox included), and it works", async () => {
    const log = await open(store, "resume", false);
    for (let i = 0; i < 30; i++) {
      log.append({ type: "inbox", inboxId: `p${i}`, source: "user", lane: "next-turn", body: "b" });
      log.append({ type: "inbox_consumed", inboxId: `p${i}` });
      log.append(user(`prompt ${i}`));
    }
    // One input still queued when the process stopped: it must survive the reopen.
    log.append({ type: "inbox", inboxId: "left", source: "user", lane: "next-turn", body: "b" });
    await log.close();
    const { store: s, counter } = counting(store);
    const agent = createAgent({
      model: scriptedModel([{ text: "resumed" }]),
      store: s,
      logger: pino({ level: "silent" }),
    });
    const session = agent.session("resume");
    await session.ready;
    expect(counter.prefixLoads).toBe(0);
    expect(session.queued().map((e) => e.id)).toEqual(["left"]);
    expect(await session.followUp("again", { id: "p3" })).toBe("p3"); // a replay: dropped
    expect(session.queued().map((e) => e.id)).toEqual(["left"]);
    expect(counter.prefixLoads).toBe(0);
    await agent.close();
  });
});

describe("projection checkpoints (SQLite specifics)", () => {
  it("flush writes checkpoints automatically by the policy: at minEntries, then after geometric growth", async () => {
    const log = await SessionLog.open({
      sessionId: "auto",
      store,
      clock: countingClock(),
      ids: seededIds(99),
      checkpoints: { minEntries: 10, growth: 0.5 },
    });
    const seqOf = () =>
      sqliteDatabase(store)
        .prepare("SELECT seq FROM checkpoints WHERE session_id = 'auto'")
        .pluck()
        .get();
    for (let i = 0; i < 9; i++) log.append(user(`${i}`));
    await log.flush();
    expect(seqOf()).toBeUndefined();
    log.append(user("10"));
    await log.flush();
    expect(seqOf()).toBe(10);
    for (let i = 0; i < 10; i++) log.append(user(`x${i}`));
    await log.flush();
    expect(seqOf()).toBe(20);
    expect(checkpointDue({ minEntries: 10, growth: 0.5 }, 29, 20)).toBe(false);
    expect(checkpointDue({ minEntries: 10, growth: 0.5 }, 30, 20)).toBe(true);
  });

  it("a checkpoint written without an inbox (before it was kept there) still opens right: the inbox is folded from the history", async () => {
    const log = await open(store, "old-ckpt", false);
    log.append({ type: "inbox", inboxId: "q1", source: "user", lane: "next-turn", body: "x" });
    log.append({ type: "inbox", inboxId: "q2", source: "user", lane: "next-turn", body: "y" });
    log.append({ type: "inbox_consumed", inboxId: "q1" });
    await log.close();
    const row = sqliteDatabase(store)
      .prepare<[], string>("SELECT body FROM checkpoints WHERE session_id = 'old-ckpt'")
      .pluck()
      .get()!;
    const { inbox: _, ...old } = JSON.parse(row);
    sqliteDatabase(store)
      .prepare("UPDATE checkpoints SET body = ? WHERE session_id = 'old-ckpt'")
      .run(JSON.stringify(old));
    const reopened = await open(store, "old-ckpt");
    reopened.append({ type: "inbox", inboxId: "q3", source: "user", lane: "next-turn", body: "z" });
    expect(reopened.inbox().queue.map((e) => e.id)).toEqual(["q2", "q3"]);
    expect(inboxSnapshot(reopened.inbox()).ids).toEqual(["q1", "q2", "q3"]);
  });

  it("a checkpoint of an older projection format (v1, without lastAsk) is ignored: the log replays instead", async () => {
    const log = await open(store, "v1-ckpt", false);
    log.append(user("kept"));
    log.append({ type: "note", text: "x", audience: "model" });
    await log.close();
    const row = sqliteDatabase(store)
      .prepare<[], string>("SELECT body FROM checkpoints WHERE session_id = 'v1-ckpt'")
      .pluck()
      .get()!;
    const body = JSON.parse(row);
    body.projection.v = 1;
    delete body.projection.lastAsk;
    sqliteDatabase(store)
      .prepare("UPDATE checkpoints SET body = ? WHERE session_id = 'v1-ckpt'")
      .run(JSON.stringify(body));
    const { store: s, counter } = counting(store);
    const reopened = await open(s, "v1-ckpt");
    expect(counter.prefixLoads).toBe(0); // not opened from the checkpoint at all
    expect(reopened.messages()).toEqual([
      { role: "user", content: "kept" },
      { role: "user", content: "[Note: x]" },
    ]);
  });

  it("an unreadable checkpoint is ignored: the log replays every entry instead", async () => {
    const log = await open(store, "corrupt", false);
    log.append(user("kept"));
    await log.close();
    sqliteDatabase(store)
      .prepare("UPDATE checkpoints SET body = '{not json' WHERE session_id = 'corrupt'")
      .run();
    const reopened = await open(store, "corrupt");
    expect(reopened.messages()).toEqual([{ role: "user", content: "kept" }]);
  });
});
