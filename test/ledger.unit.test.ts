import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Database from "better-sqlite3";
import { afterAll, describe, expect, it, vi } from "vitest";
import type { Clock } from "../contracts/clock.ts";
import { fingerprint, type Ledger, memoryLedger } from "../session/stores/ledger.ts";
import { sqliteDatabase } from "../session/stores/sqlite-handle.ts";
import { sqliteLedger } from "../session/stores/sqlite-ledger.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function manualClock(t = 1_000_000): Clock & { advance(ms: number): void } {
  return {
    now: () => t,
    setTimeout: () => 0,
    clearTimeout: () => {},
    advance: (ms) => {
      t += ms;
    },
  };
}

function sqliteHarness() {
  const dir = mkdtempSync(join(tmpdir(), "keel-ledger-"));
  dirs.push(dir);
  const path = join(dir, "keel.db");
  return {
    path,
    make: (clock: Clock, retentionMs?: number) =>
      sqliteLedger(sqliteStore(path), { clock, retentionMs }),
  };
}

const kinds = [
  {
    name: "memory",
    make: (clock: Clock, retentionMs?: number) => memoryLedger({ clock, retentionMs }),
  },
  {
    name: "sqlite",
    make: (clock: Clock, retentionMs?: number) => sqliteHarness().make(clock, retentionMs),
  },
];

describe.each(kinds)("idempotency ledger: $name", ({ make }) => {
  it("the same key and payload runs fn once, then replays the stored result without calling fn", async () => {
    const ledger: Ledger = make(manualClock());
    let calls = 0;
    const fn = () => ({ ok: true, content: `ran ${++calls}` });
    expect(await ledger.run("tool:write", "k1", { path: "a", text: "x" }, fn)).toEqual({
      type: "ran",
      result: { ok: true, content: "ran 1" },
    });
    expect(await ledger.run("tool:write", "k1", { text: "x", path: "a" }, fn)).toEqual({
      type: "replayed",
      result: { ok: true, content: "ran 1" },
    });
    expect(calls).toBe(1);
    expect(await ledger.get("tool:write", "k1")).toMatchObject({
      status: "done",
      fingerprint: fingerprint({ path: "a", text: "x" }),
    });
  });

  it("the same key with a different payload fails with PARAMETER_MISMATCH and does not call fn", async () => {
    const ledger = make(manualClock());
    await ledger.run("c", "k", { n: 1 }, () => "one");
    let called = false;
    const out = await ledger.run("c", "k", { n: 2 }, () => {
      called = true;
      return "two";
    });
    expect(out).toMatchObject({
      type: "failed",
      failure: { ok: false, code: "PARAMETER_MISMATCH", retryable: false },
    });
    expect(called).toBe(false);
  });

  it("keys are scoped by caller", async () => {
    const ledger = make(manualClock());
    expect((await ledger.run("a", "k", 1, () => "a")).type).toBe("ran");
    expect((await ledger.run("b", "k", 2, () => "b")).type).toBe("ran");
  });

  it("two concurrent runs of one key call fn once and both get its result", async () => {
    const ledger = make(manualClock());
    let calls = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const fn = async () => {
      calls++;
      await gate;
      return "done";
    };
    const first = ledger.run("c", "k", {}, fn);
    const second = ledger.run("c", "k", {}, fn);
    release();
    expect(await first).toEqual({ type: "ran", result: "done" });
    expect(await second).toEqual({ type: "replayed", result: "done" });
    expect(calls).toBe(1);
  });

  it("an effect that threw leaves the key started: a retry reports OUTCOME_UNKNOWN and does not run it again", async () => {
    const ledger = make(manualClock());
    await expect(
      ledger.run("c", "k", {}, () => {
        throw new Error("half done");
      }),
    ).rejects.toThrow("half done");
    expect((await ledger.get("c", "k"))?.status).toBe("started");
    let called = false;
    const out = await ledger.run("c", "k", {}, () => {
      called = true;
    });
    expect(out).toMatchObject({ type: "failed", failure: { code: "OUTCOME_UNKNOWN" } });
    expect(called).toBe(false);
  });

  it("rows older than the retention window are purged and the key runs again", async () => {
    const clock = manualClock();
    const ledger = make(clock, 60_000);
    await ledger.run("c", "k", {}, () => "first");
    clock.advance(59_999);
    expect((await ledger.run("c", "k", {}, () => "second")).type).toBe("replayed");
    clock.advance(2);
    expect(await ledger.get("c", "k")).toBeUndefined();
    expect(await ledger.purge()).toBe(1);
    expect(await ledger.run("c", "k", { other: true }, () => "third")).toEqual({
      type: "ran",
      result: "third",
    });
  });
});

describe("sqlite ledger", () => {
  it("a done key survives reopening the store: the result is replayed by a new process", async () => {
    const h = sqliteHarness();
    const clock = manualClock();
    await h.make(clock).run("c", "k", { a: 1 }, () => ({ n: 42 }));
    expect(await h.make(clock).run("c", "k", { a: 1 }, () => ({ n: 0 }))).toEqual({
      type: "replayed",
      result: { n: 42 },
    });
  });

  it("a key left started by a crashed process is reported as OUTCOME_UNKNOWN after reopening", async () => {
    const h = sqliteHarness();
    const clock = manualClock();
    const first = h.make(clock);
    let observed: string | undefined;
    // the effect is in progress: the started row is already committed when it runs
    const never = first.run("c", "k", {}, async () => {
      observed = (await first.get("c", "k"))?.status;
      return new Promise(() => {});
    });
    void never;
    await vi.waitFor(() => expect(observed).toBe("started"));
    const out = await h.make(clock).run("c", "k", {}, () => "again");
    expect(out).toMatchObject({ type: "failed", failure: { code: "OUTCOME_UNKNOWN" } });
  });

  it("atomic: the effect and the ledger row commit together; a repeat replays without a second effect", async () => {
    const h = sqliteHarness();
    const ledger = h.make(manualClock());
    const store = sqliteStore(h.path);
    sqliteDatabase(store).exec(
      "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT)",
    );
    const place = (item: string) =>
      ledger.run(
        "orders",
        "order-1",
        { item },
        ({ transact }) =>
          transact(
            (db) =>
              (db as Database.Database).prepare("INSERT INTO orders (item) VALUES (?)").run(item)
                .lastInsertRowid as number,
          ),
        { atomic: true },
      );
    expect(await place("book")).toEqual({ type: "ran", result: 1 });
    expect(await place("book")).toEqual({ type: "replayed", result: 1 });
    expect(await place("pen")).toMatchObject({
      type: "failed",
      failure: { code: "PARAMETER_MISMATCH" },
    });
    expect(sqliteDatabase(store).prepare("SELECT count(*) FROM orders").pluck().get()).toBe(1);
  });

  it("atomic: an effect that fails before commit leaves neither the change nor a ledger row, so a retry runs it", async () => {
    const h = sqliteHarness();
    const ledger = h.make(manualClock());
    const store = sqliteStore(h.path);
    sqliteDatabase(store).exec(
      "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT)",
    );
    const attempt = (crash: boolean) =>
      ledger.run(
        "orders",
        "o",
        {},
        ({ transact }) =>
          transact((db) => {
            (db as Database.Database).prepare("INSERT INTO orders (item) VALUES ('x')").run();
            if (crash) throw new Error("crash before commit");
            return "placed";
          }),
        { atomic: true },
      );
    await expect(attempt(true)).rejects.toThrow("crash before commit");
    expect(sqliteDatabase(store).prepare("SELECT count(*) FROM orders").pluck().get()).toBe(0);
    expect(await ledger.get("orders", "o")).toBeUndefined();
    expect(await attempt(false)).toEqual({ type: "ran", result: "placed" });
  });

  it("atomic runs on a memory ledger are refused with a clear error", async () => {
    const ledger = memoryLedger({ clock: manualClock() });
    await expect(ledger.run("c", "k", {}, () => 1, { atomic: true })).rejects.toThrow(
      /needs a store ledger \(sqliteLedger or postgresLedger\)/,
    );
  });
});
