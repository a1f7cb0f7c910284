import { describe, expect, it } from "vitest";
import type { LogEntry } from "../session/entries.ts";
import type { SessionStore } from "../session/store.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { call, openLog, result, started, step, user } from "./session-fixtures.ts";

/** A store whose appends can be held open or failed, to observe flush semantics. */
function controllableStore(inner: SessionStore = memoryStore()) {
  const calls: number[] = [];
  let gate: { release: () => void; fail: (e: Error) => void } | null = null;
  let holding = false;
  const store: SessionStore = {
    kind: "controlled",
    async append(sessionId, entries) {
      calls.push(entries.length);
      if (holding) {
        await new Promise<void>((resolve, reject) => {
          gate = { release: resolve, fail: reject };
        });
      }
      return inner.append(sessionId, entries);
    },
    load: (id) => inner.load(id),
    list: () => inner.list(),
    close: () => inner.close(),
  };
  return {
    store,
    calls,
    hold: () => {
      holding = true;
    },
    release: () => {
      holding = false;
      gate?.release();
    },
    fail: (e: Error) => {
      holding = false;
      gate?.fail(e);
    },
  };
}

describe("SessionLog", () => {
  it("append stamps id, parentId (the previous leaf), seq and at, synchronously, and freezes the entry", async () => {
    const log = await openLog();
    const a = log.append(user("one"));
    const b = log.append(user("two"));
    expect(a.parentId).toBeNull();
    expect(b.parentId).toBe(a.id);
    expect([a.seq, b.seq]).toEqual([1, 2]);
    expect(b.at).toBeGreaterThan(a.at);
    expect(log.leafId).toBe(b.id);
    expect(Object.isFrozen(a)).toBe(true);
    expect(log.pendingCount()).toBe(2);
  });

  it("entry ids sort like their seq (SQLite's id index appends at its edge) and stay unique", async () => {
    const log = await openLog();
    const ids = Array.from({ length: 1200 }, (_, i) => log.append(user(`m${i}`)).id);
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("flush writes the queue in one store append and reopening restores entries, leaf and messages", async () => {
    const c = controllableStore();
    const log = await openLog(c.store);
    log.append(user("hello"));
    step(log, "a1", "", [call("c1")]);
    log.append(started("c1"));
    log.append(result("c1", "ok"));
    await log.flush();
    expect(c.calls).toEqual([6]);
    expect(log.pendingCount()).toBe(0);
    const again = await openLog(c.store, "s1", 2);
    expect(again.entries()).toEqual(log.entries());
    expect(again.leafId).toBe(log.leafId);
    expect(again.messages()).toEqual(log.messages());
  });

  it("concurrent flushes coalesce: callers during an in-flight write share one follow-up write", async () => {
    const c = controllableStore();
    const log = await openLog(c.store);
    log.append(user("1"));
    c.hold();
    const first = log.flush();
    log.append(user("2"));
    const second = log.flush();
    log.append(user("3"));
    const third = log.flush();
    c.release();
    await Promise.all([first, second, third]);
    expect(c.calls).toEqual([1, 2]);
    expect((await c.store.load("s1")).map((e) => (e as { text: string }).text)).toEqual([
      "1",
      "2",
      "3",
    ]);
  });

  it("a rejected flush propagates the store error and keeps the entries queued for the next flush", async () => {
    const c = controllableStore();
    const log = await openLog(c.store);
    log.append(user("a"));
    log.append(user("b"));
    c.hold();
    const failing = log.flush();
    const waiting = log.flush();
    c.fail(new Error("disk full"));
    await expect(failing).rejects.toThrow("disk full");
    await waiting; // the waiting flush retried the still-queued entries
    expect(log.pendingCount()).toBe(0);
    expect((await c.store.load("s1")).length).toBe(2);
  });

  it("entries appended after a failed flush are written after the failed ones, in order", async () => {
    const c = controllableStore();
    const log = await openLog(c.store);
    log.append(user("a"));
    c.hold();
    const failing = log.flush();
    c.fail(new Error("io"));
    await expect(failing).rejects.toThrow("io");
    log.append(user("b"));
    expect(log.pendingCount()).toBe(2);
    await log.flush();
    const stored = (await c.store.load("s1")) as (LogEntry & { text: string })[];
    expect(stored.map((e) => [e.seq, e.text])).toEqual([
      [1, "a"],
      [2, "b"],
    ]);
  });

  it("two logs writing one session: the second writer's flush is rejected with SEQ_CONFLICT", async () => {
    const store = memoryStore();
    const a = await openLog(store);
    const b = await openLog(store, "s1", 2);
    a.append(user("from a"));
    b.append(user("from b"));
    await a.flush();
    await expect(b.flush()).rejects.toMatchObject({ name: "StoreError", code: "SEQ_CONFLICT" });
  });

  it("history() is a live cached array: appends and text edits update it in place, an omission rebuilds it", async () => {
    const log = await openLog();
    const m = log.history();
    const x = log.append(user("x"));
    log.append(user("z"));
    expect(log.history()).toBe(m);
    expect(m.length).toBe(2);
    log.append({ type: "context_edit", targetId: x.id, replacement: "y" });
    expect(log.history()).toBe(m);
    expect(m[0]).toEqual({ role: "user", content: [{ type: "text", text: "y" }] });
    expect(Object.isFrozen(m[0])).toBe(true);
    log.append({ type: "context_edit", targetId: x.id, replacement: null });
    expect(log.history()).not.toBe(m);
    expect(log.messages()).toEqual([{ role: "user", content: "z" }]);
  });

  it("messages() renders each neutral message to the Chat shape once: the same object until it changes", async () => {
    const log = await openLog();
    const x = log.append(user("x"));
    log.append(user("z"));
    const first = log.messages();
    expect(first).toEqual([
      { role: "user", content: "x" },
      { role: "user", content: "z" },
    ]);
    log.append({ type: "context_edit", targetId: x.id, replacement: "y" });
    const second = log.messages();
    expect(second[0]).toEqual({ role: "user", content: "y" });
    expect(second[1]).toBe(first[1]);
  });

  it("settings are the last settings entry on the path, and survive reopening", async () => {
    const store = memoryStore();
    const log = await openLog(store);
    expect(log.settings()).toEqual({});
    log.append({ type: "settings", settings: { model: "a" } });
    log.append(user("x"));
    log.append({ type: "settings", settings: { model: "b" } });
    expect(log.settings()).toEqual({ model: "b" });
    await log.flush();
    expect((await openLog(store, "s1", 3)).settings()).toEqual({ model: "b" });
  });

  it("openWork lists started calls without results, open attempts and the open turn", async () => {
    const log = await openLog();
    log.append({ type: "turn_start", turnId: "t1" });
    step(log, "a1", "", [call("c1"), call("c2")]);
    log.append(started("c1"));
    log.append(started("c2"));
    log.append(result("c1", "ok"));
    log.append({ type: "attempt_start", turnId: "t1", attemptId: "a2", step: 1 });
    const work = log.openWork();
    expect(work.calls.map((c) => c.callId)).toEqual(["c2"]);
    expect(work.attempts).toEqual([{ attemptId: "a2", turnId: "t1", committed: false }]);
    expect(work.turnId).toBe("t1");
    log.append({ type: "turn_end", turnId: "t1", status: "completed" });
    expect(log.openWork().turnId).toBeNull();
  });

  it("append rejects edits of unknown entries and compactions keeping an entry off the path, naming the id", async () => {
    const log = await openLog();
    expect(() => log.append({ type: "context_edit", targetId: "nope", replacement: null })).toThrow(
      /targetId "nope"/,
    );
    expect(() => log.append({ type: "compaction", summary: "s", firstKeptId: "nope" })).toThrow(
      /firstKeptId "nope"/,
    );
    expect(() => log.append({ type: "leaf", leafId: "nope", reason: "x" })).toThrow(
      /leafId "nope"/,
    );
    expect(log.entries().length).toBe(0);
  });
});
