import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { type PostgresSessionStore, postgresStore } from "../session/postgres-store.ts";
import { sleep } from "./support/pg-procs.ts";
import {
  freshSchema,
  type PostgresServer,
  postgresTestMode,
  startPostgres,
} from "./support/postgres-server.ts";

// A session whose owner was paused past its lease (a starved process: issue 19's soak) follows,
// and its follower timer takes the lease back when nobody else did. If that takeover was still in
// flight when the session was closed (a worker closes a session it lost), it used to finish
// anyway: a closed session, which runs no turn, renewing the lease for ever and moving posted
// inputs into a log nobody runs, while every worker found the lease live and left. A gate in the
// store call the takeover is waiting on stands for the scheduling a loaded machine produces by chance.

const mode = postgresTestMode();
let server: PostgresServer;
const stores: PostgresSessionStore[] = [];
beforeAll(async () => {
  if (mode.run) server = await startPostgres();
}, 60_000);
afterAll(async () => {
  for (const s of stores) await s.close().catch(() => {});
  await server?.stop();
});

const open = async (schema: string) => {
  const store = await postgresStore(server.url, { schema, max: 6 });
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
