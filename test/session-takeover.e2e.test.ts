import { describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { type PostgresSessionStore, postgresStore } from "../session/stores/postgres-store.ts";
import { sleep } from "./support/pg-procs.ts";
import { freshSchema } from "./support/postgres-server.ts";
import { usePostgres } from "./support/use-postgres.ts";

// A session whose owner was paused past its lease (a starved process: issue 19's soak) follows,
// and its follower timer takes the lease back when nobody else did. If that takeover was still in
// flight when the session was closed (a worker closes a session it lost), it used to finish
// anyway: a closed session, which runs no turn, renewing the lease for ever and moving posted
// inputs into a log nobody runs, while every worker found the lease live and left. A gate in the
// store call the takeover is waiting on stands for the scheduling a loaded machine produces by chance.

const db = usePostgres();
const { mode, stores } = db;

const open = async (schema: string) => {
  const store = await postgresStore(db.url(), { schema, max: 6 });
  stores.push(store);
  return store;
};
const model = () => scriptedModel(() => ({ text: "done" }));

describe.skipIf(!mode.run)("a takeover never ends in a closed session (PostgreSQL)", () => {
  const cases = [
    {
      gate: "the log",
      title:
        "a takeover still loading the log when its session closes: close() waits for it and releases the lease; the closed session does not become its owner and renew it for ever",
    },
    {
      gate: "the lease",
      title:
        "a takeover still taking the lease when its session closes gives it back at once (pending), not held unreleased for a lease's length",
    },
  ] as const;
  for (const { gate, title } of cases) {
    it(title, async () => {
      const schema = freshSchema("zombie");
      const store = await open(schema);
      let armed = false;
      let hit: () => void = () => {};
      const reached = new Promise<void>((r) => {
        hit = r;
      });
      let open_: () => void = () => {};
      const gateOpen = new Promise<void>((r) => {
        open_ = r;
      });
      const gated =
        <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
        async (...args: A): Promise<R> => {
          if (armed) {
            armed = false;
            hit();
            await gateOpen;
          }
          return fn(...args);
        };
      const wrapped: PostgresSessionStore =
        gate === "the lease"
          ? { ...store, acquireLease: gated(store.acquireLease) }
          : {
              ...store,
              loadFromCheckpoint: gated(store.loadFromCheckpoint),
              load: gated(store.load),
            };
      const ttlMs = 600;
      const agent = createAgent({
        model: model(),
        store: wrapped,
        lease: { owner: "closing:1", ttlMs, pollMs: 50 },
      });
      const session = agent.session("z");
      await session.ready;
      expect(session.role).toBe("owner");
      // The owner is paused past its lease (what a starved process is): its heartbeat is refused,
      // it follows, and its follower timer takes the expired lease back: the takeover stops at the gate.
      armed = true;
      await store.pool.query(
        `UPDATE ${store.schema}.leases SET expires_at = clock_timestamp() - interval '1 second' WHERE session_id = 'z'`,
      );
      await reached;
      expect(session.role).toBe("follower");
      const closed = session.close(); // the worker's run ends: it closes the session it lost
      await sleep(100);
      open_();
      await closed;
      await sleep(3 * ttlMs); // a closed session that held the lease would have renewed it by now
      expect(session.role).toBe("closed");
      const lease = await store.readLease("z");
      expect(lease?.owner).toBe("closing:1");
      expect(lease?.released).toBe(true); // given back, not renewed nor left to expire
      // Taken back from an expired lease without a look at the log: a worker is to look.
      if (gate === "the lease") expect(lease?.pending).toBe(true);
      // Another runner (another process's agent) takes the session.
      const other = createAgent({
        model: model(),
        store,
        lease: { owner: "other:2", ttlMs, pollMs: 50 },
      });
      const again = other.session("z");
      await again.ready;
      expect(again.role).toBe("owner");
      await other.close();
      await agent.close();
    }, 30_000);
  }
});

describe.skipIf(!mode.run)("the lease heartbeat (PostgreSQL)", () => {
  it("a slow renewal is not joined by more: one renewal in flight at a time", async () => {
    // A renewal stuck in a busy pool's queue used to be joined by one more every beat, each
    // waiting in the same queue: more load where the pool was already the bottleneck.
    const store = await open(freshSchema("beat"));
    let inFlight = 0;
    let maxInFlight = 0;
    let renewals = 0;
    const slow: PostgresSessionStore = {
      ...store,
      async renewLease(lease, ttlMs) {
        renewals++;
        maxInFlight = Math.max(maxInFlight, ++inFlight);
        try {
          await sleep(1300); // longer than a beat (ttl / 3 = 1 s), shorter than the lease
          return await store.renewLease(lease, ttlMs);
        } finally {
          inFlight--;
        }
      },
    };
    const agent = createAgent({
      model: model(),
      store: slow,
      lease: { owner: "beating:1", ttlMs: 3000, pollMs: 1000 },
    });
    await agent.openSession("b");
    await sleep(4500); // beats at 1, 2, 3 and 4 s: the renewals of 1 s and 3 s each span the next beat
    expect(renewals).toBeGreaterThanOrEqual(2);
    expect(maxInFlight).toBe(1);
    await agent.close();
  }, 30_000);
});
