import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { AnyActorRef } from "xstate";
import { createAgent } from "../actors/agent.ts";
import type { InspectSink } from "../actors/events.ts";
import { PermissionBroker, type PermissionOptions } from "../actors/permissions.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { echo } from "./session-fixtures.ts";

/** Every actor a session's runtime created, and those still running. */
function actorsSeen() {
  const actors: AnyActorRef[] = [];
  const sink: InspectSink = {
    observe: (event) => {
      if (event.type === "@xstate.actor") actors.push(event.actorRef as AnyActorRef);
    },
    publish: () => {},
  };
  const live = () => actors.filter((a) => a.getSnapshot().status === "active");
  return { sink, live, actors };
}

const oneStep = () =>
  scriptedModel(
    (request) =>
      request.messages.at(-1)?.role === "tool"
        ? { text: "done" }
        : { toolCalls: [{ name: "echo", arguments: '{"text":"hi"}' }] },
    { record: "none" },
  );

describe("an idle session holds no running actor", () => {
  it("after a turn ends, every actor the session started is stopped, its session chart included (at rest it is made again by the next event); the next prompt starts a new one and completes", async () => {
    const seen = actorsSeen();
    const agent = createAgent({ model: oneStep(), tools: [echo], inspect: seen.sink });
    const session = await agent.openSession("s1");
    await Promise.resolve(); // the chart is let go on the microtask after it came to rest
    expect(seen.actors.map((a) => a.getSnapshot().machine?.id)).toEqual(["session"]);
    expect(seen.live()).toEqual([]); // opened, no input: at rest, no actor

    expect((await session.prompt("go")).status).toBe("completed");
    await session.awaitIdle();
    await Promise.resolve();
    expect(seen.actors.length).toBeGreaterThanOrEqual(5); // session (open, then the run's), turn, batch, call
    expect(seen.live().map((a) => a.id)).toEqual([]);

    const before = seen.actors.length;
    expect((await session.prompt("again")).status).toBe("completed");
    await session.awaitIdle();
    await Promise.resolve();
    expect(seen.actors.length).toBeGreaterThan(before);
    expect(seen.live().map((a) => a.id)).toEqual([]);
    await agent.close();
  });

  it("prompts queued behind a turn, and one sent as it ends, all complete; then no actor of the session is left running", async () => {
    const seen = actorsSeen();
    const agent = createAgent({ model: oneStep(), tools: [echo], inspect: seen.sink });
    const session = await agent.openSession("s2");
    const first = session.prompt("go");
    // Queued behind the first turn: its handover starts a successor without going idle between.
    const second = session.prompt("again");
    const third = first.then(() => session.prompt("third"));
    expect((await first).status).toBe("completed");
    expect((await second).status).toBe("completed");
    expect((await third).status).toBe("completed");
    await session.awaitIdle();
    await Promise.resolve();
    expect(seen.live().map((a) => a.id)).toEqual([]);
    await agent.close();
  });
});

describe("an opened session that was never prompted holds no turn dependencies", () => {
  it("its turn dependencies (here the permission broker) are built at its first prompt, once, not when it opens", async () => {
    const built: string[] = [];
    let opening = "";
    const agent = createAgent({
      model: oneStep(),
      tools: [echo],
      permissions: { rules: [{ tool: "echo", action: "allow" }] },
      permissionBroker: (options: PermissionOptions) => {
        built.push(opening);
        return new PermissionBroker(options);
      },
    });
    const sessions = [];
    for (const id of ["a", "b", "c"]) {
      opening = id;
      sessions.push(await agent.openSession(id));
    }
    expect(built).toEqual([]);
    opening = "b";
    expect((await sessions[1].prompt("go")).status).toBe("completed");
    expect((await sessions[1].prompt("again")).status).toBe("completed");
    expect(built).toEqual(["b"]);
    await agent.close();
  });
});

describe("an idle session gives its entries back to the store", () => {
  /** A store whose synchronous and asynchronous history reads are counted (or removed). */
  function countedStore(base: ReturnType<typeof memoryStore>, sync: boolean) {
    const reads = { sync: 0, async: 0 };
    const loadUpTo = base.loadUpTo!.bind(base);
    const loadUpToSync = base.loadUpToSync!.bind(base);
    base.loadUpTo = (id, seq) => {
      reads.async++;
      return loadUpTo(id, seq);
    };
    base.loadUpToSync = sync
      ? (id, seq) => {
          reads.sync++;
          return loadUpToSync(id, seq);
        }
      : undefined;
    return { store: base, reads };
  }

  for (const kind of ["memory", "sqlite"] as const) {
    it(`${kind}: the entries leave memory at rest and are read back once, on the first read that needs them; prompts in between read none`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "keel-rest-"));
      const base = kind === "memory" ? memoryStore() : sqliteStore(join(dir, "s.db"));
      let agent: ReturnType<typeof createAgent> | undefined;
      try {
        const { store, reads } = countedStore(base as ReturnType<typeof memoryStore>, true);
        agent = createAgent({ model: oneStep(), tools: [echo], store });
        const session = await agent.openSession("rest");
        for (const text of ["one", "two", "three"]) {
          expect((await session.prompt(text)).status).toBe("completed");
          await session.awaitIdle();
          await Promise.resolve();
        }
        // Three turns went by at rest: the projection built every request, no history was read.
        expect(reads).toEqual({ sync: 0, async: 0 });
        const messages = session.messages().map((m) => m.role);
        expect(messages).toEqual(
          Array.from({ length: 3 }, () => ["user", "assistant", "tool", "assistant"]).flat(),
        );
        const entries = session.entries();
        expect(reads.sync).toBe(1);
        expect(entries.map((e) => e.seq)).toEqual(entries.map((_, i) => i + 1));
        expect(entries.filter((e) => e.type === "turn_end")).toHaveLength(3);
        expect(entries).toEqual(await store.load("rest"));
        session.entries();
        expect(reads.sync).toBe(1);
        // Its history is read now (a client following it): later rests keep it in memory, so a
        // reader after each turn does not decode the whole history again every turn.
        expect((await session.prompt("four")).status).toBe("completed");
        await session.awaitIdle();
        await Promise.resolve();
        expect(session.entries().filter((e) => e.type === "turn_end")).toHaveLength(4);
        expect(reads.sync).toBe(1);
      } finally {
        await agent?.close();
        if ("close" in base) await (base as { close: () => unknown }).close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  it("a store that reads only asynchronously (PostgreSQL) keeps the entries: entries() needs no loadHistory()", async () => {
    const { store, reads } = countedStore(memoryStore(), false);
    const agent = createAgent({ model: oneStep(), tools: [echo], store });
    const session = await agent.openSession("keep");
    expect((await session.prompt("go")).status).toBe("completed");
    await session.awaitIdle();
    await Promise.resolve();
    expect(session.entries().filter((e) => e.type === "turn_end")).toHaveLength(1);
    expect(reads).toEqual({ sync: 0, async: 0 });
    await agent.close();
  });

  it("entries the store refused stay in memory at rest (they are in no store yet) and are written by the next flush", async () => {
    const base = memoryStore();
    const { store } = countedStore(base, true);
    const append = base.append.bind(base);
    // The input of the second prompt is stored; every write of its turn after that is refused.
    let writes = 0;
    let refuseFrom = Number.POSITIVE_INFINITY;
    let refuse = true;
    store.append = (id, entries, options) =>
      ++writes >= refuseFrom && refuse
        ? Promise.reject(new Error("disk full"))
        : append(id, entries, options);
    const agent = createAgent({ model: oneStep(), tools: [echo], store });
    const session = await agent.openSession("refused");
    expect((await session.prompt("go")).status).toBe("completed");
    await session.awaitIdle();
    refuseFrom = writes + 2;
    const failed = await session.prompt("again");
    expect(failed.status).toBe("failed");
    await session.awaitIdle();
    await Promise.resolve();
    const held = session.entries();
    expect(held.length).toBeGreaterThan((await store.load("refused")).length);
    refuse = false;
    await agent.close();
    expect((await store.load("refused")).map((e) => e.id)).toEqual(held.map((e) => e.id));
  });
});
