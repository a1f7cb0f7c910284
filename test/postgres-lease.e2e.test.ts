import { afterAll, describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { type PostgresSessionStore, postgresStore } from "../session/stores/postgres-store.ts";
import { type Proc, sleep, startChild, until } from "./support/pg-procs.ts";
import { freshSchema } from "./support/postgres-server.ts";
import { usePostgres } from "./support/use-postgres.ts";

const db = usePostgres();
const { mode, stores } = db;
const procs: Proc[] = [];
afterAll(async () => {
  for (const p of procs) {
    p.child.kill("SIGCONT");
    p.child.kill("SIGKILL");
  }
});

const open = async (schema: string) => {
  const store = await postgresStore(db.url(), { schema, max: 4 });
  stores.push(store);
  return store;
};
const runner = (schema: string, session: string) => {
  const p = startChild(["runner", db.url(), schema, session], { KEEL_TEST_SESSION: session });
  procs.push(p);
  return p;
};
const input = (id: string, body: string) => ({
  id,
  lane: "next-turn" as const,
  source: "user" as const,
  body,
});
const effectsOf = async (store: PostgresSessionStore) =>
  (await store.pool.query(`SELECT call_id, label, pid FROM ${store.schema}.effects ORDER BY at`))
    .rows as {
    call_id: string;
    label: string;
    pid: number;
  }[];
const results = (entries: LogEntry[]) =>
  entries.filter((e) => e.type === "call_result") as (LogEntry & {
    callId: string;
    outcome: string;
  })[];

describe.skipIf(!mode.run)("one runner per session across processes (PostgreSQL)", () => {
  it("two processes open one session: only the lease holder runs turns; SIGKILL mid tool call → the other takes over after the lease ends, marks the call unknown (not re-run) and runs the next input", async () => {
    const schema = freshSchema("lease");
    const store = await open(schema);
    const a = runner(schema, "L");
    await a.waitFor((l) => l.ev === "role" && l.role === "owner");
    const b = runner(schema, "L");
    await b.waitFor((l) => l.ev === "role" && l.role === "follower");
    await store.postInput("L", input("i1", "do first hang!"));
    await a.waitFor((l) => l.ev === "effect" && l.label === "hang!");
    await store.postInput("L", input("i2", "say hi"));
    await sleep(300);
    expect(b.lines.filter((l) => l.ev === "request")).toEqual([]); // the follower runs nothing
    const killedAt = Date.now();
    a.child.kill("SIGKILL");
    await b.waitFor((l) => l.ev === "role" && l.role === "owner", 20_000);
    const tookMs = Date.now() - killedAt;
    // The cut turn is continued first (docs/crashes.md), then the queued input runs.
    const second = await b.waitFor((l) => l.ev === "request");
    expect(JSON.stringify(second.messages)).toContain("OUTCOME_UNKNOWN");
    expect(JSON.stringify(second.messages)).not.toContain("say hi");
    const third = await b.waitFor(
      (l) => l.ev === "request" && JSON.stringify(l.messages).includes("say hi"),
    );
    expect(JSON.stringify(third.messages)).toContain("OUTCOME_UNKNOWN");
    await until(async () => {
      const e = await store.load("L");
      const consumed = e.findIndex((x) => x.type === "inbox_consumed" && x.inboxId === "i2");
      return consumed >= 0 && e.slice(consumed).some((x) => x.type === "turn_end")
        ? true
        : undefined;
    });
    const effects = await effectsOf(store);
    expect(effects.map((e) => [e.label, e.pid])).toEqual([
      ["first", a.pid],
      ["hang!", a.pid],
    ]); // nothing ran twice, nothing ran in B
    const all = await store.load("L");
    const res = results(all);
    expect(res.filter((r) => r.outcome === "unknown")).toHaveLength(1);
    expect(new Set(res.map((r) => r.callId)).size).toBe(res.length); // one result per call
    expect(
      all.filter((e) => e.type === "inbox_consumed").map((e) => (e as { inboxId: string }).inboxId),
    ).toEqual(["i1", "i2"]);
    console.log(`lease takeover after SIGKILL: ${tookMs} ms (ttl 1500 ms)`);
  }, 60_000);

  it("a runner paused past its lease (SIGSTOP, then SIGCONT) cannot write: its late tool result is refused, the call keeps the one result the new owner wrote", async () => {
    const schema = freshSchema("pause");
    const store = await open(schema);
    const a = runner(schema, "P");
    await a.waitFor((l) => l.ev === "role" && l.role === "owner");
    const b = runner(schema, "P");
    await b.waitFor((l) => l.ev === "role" && l.role === "follower");
    await store.postInput("P", input("i1", "do wait800"));
    await a.waitFor((l) => l.ev === "waiting");
    a.child.kill("SIGSTOP");
    await b.waitFor((l) => l.ev === "role" && l.role === "owner", 20_000);
    const before = await store.load("P");
    a.child.kill("SIGCONT");
    await a.waitFor((l) => l.ev === "waited");
    await a.waitFor((l) => l.ev === "role" && l.role === "follower", 10_000);
    await sleep(500);
    const after = await store.load("P");
    const res = results(after);
    expect(res).toHaveLength(1);
    expect(res[0].outcome).toBe("unknown");
    // Nothing A did after waking reached the log: every entry after the takeover is B's.
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.some((e) => JSON.stringify(e).includes("waited 800"))).toBe(false);
  }, 60_000);

  it("a steer written by another process reaches the owner's next model request", async () => {
    const schema = freshSchema("steer");
    const store = await open(schema);
    const a = runner(schema, "S");
    await a.waitFor((l) => l.ev === "role" && l.role === "owner");
    await store.postInput("S", input("i1", "do wait700"));
    await a.waitFor((l) => l.ev === "waiting");
    // This test process is the other process: an agent on the same store follows the session.
    const roles: string[] = [];
    const web = createAgent({
      model: scriptedModel([]),
      store: await open(schema),
      lease: { ttlMs: 1500, pollMs: 150, onRole: (_id, r) => roles.push(r) },
    });
    const session = web.session("S");
    await session.ready;
    expect(session.role).toBe("follower");
    await session.steer("STEER-FROM-WEB");
    const next = await a.waitFor(
      (l) => l.ev === "request" && JSON.stringify(l.messages).includes("waited 700"),
    );
    expect(JSON.stringify(next.messages)).toContain("STEER-FROM-WEB");
    const messages = next.messages as unknown[];
    // After the tool result, never between a call and its result.
    expect(JSON.stringify(messages.at(-1))).toContain("STEER-FROM-WEB");
    await web.close();
    expect(roles).toEqual(["follower", "closed"]);
  }, 60_000);

  it("the ledger: two processes race the same 1 000 keys; each effect happens exactly once", async () => {
    const schema = freshSchema("ledger");
    const store = await open(schema);
    await store.pool.query(
      `CREATE TABLE IF NOT EXISTS ${store.schema}.effects (session_id text, call_id text, label text, pid int, at timestamptz DEFAULT clock_timestamp())`,
    );
    await store.pool.query(`CREATE TABLE ${store.schema}.barrier (pid int)`);
    // Both start racing at the same moment, whatever their start-up times (a barrier table).
    const env = { KEEL_TEST_BARRIER: "2" };
    const p1 = startChild(["ledger", db.url(), schema, "1000"], env);
    const p2 = startChild(["ledger", db.url(), schema, "1000"], env);
    procs.push(p1, p2);
    const [d1, d2] = await Promise.all([
      p1.waitFor((l) => l.ev === "ledger-done", 50_000),
      p2.waitFor((l) => l.ev === "ledger-done", 50_000),
    ]);
    const counts = await store.pool.query(
      `SELECT call_id, count(*)::int AS n FROM ${store.schema}.effects WHERE session_id = 'ledger' GROUP BY call_id`,
    );
    expect(counts.rows).toHaveLength(1000);
    expect(counts.rows.every((r) => r.n === 1)).toBe(true);
    expect(Number(d1.ran) + Number(d2.ran)).toBe(1000);
    expect(Number(d1.ran)).toBeGreaterThan(0); // both really raced
    expect(Number(d2.ran)).toBeGreaterThan(0);
  }, 60_000);
});
