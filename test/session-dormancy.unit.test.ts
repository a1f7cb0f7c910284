import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { Session } from "../actors/session.ts";
import type { Model, ModelRequest } from "../contracts/model.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { SessionStore } from "../session/store.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { defineTool } from "../tools/define-tool.ts";
import { echo } from "./session-fixtures.ts";

/** One tool step, then text; every request the model got is kept. */
function oneStep() {
  const requests: ModelRequest[] = [];
  const model = scriptedModel(
    (request) => {
      requests.push(request);
      return request.messages.at(-1)?.role === "tool"
        ? { text: `done ${requests.length}` }
        : { toolCalls: [{ name: "echo", arguments: '{"text":"hi"}' }] };
    },
    { record: "none" },
  );
  return { model, requests };
}

/** One tool step, then text with the provider's usage (what the context budget trusts). */
const measuredStep = () =>
  scriptedModel(
    (request) =>
      request.messages.at(-1)?.role === "tool"
        ? { text: "done", usage: { inputTokens: 50, outputTokens: 5 } }
        : { toolCalls: [{ name: "echo", arguments: '{"text":"hi"}' }] },
    { record: "none" },
  );

/** Lets the dormancy timer fire and the sleep's checkpoint write settle. */
const settle = async (ms = 20) => {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setTimeout(resolve, ms));
};

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("an idle session sleeps: its log goes, and comes back from the store at its next use", () => {
  it("after dormantAfterMs idle it sleeps; reads, then a prompt, reopen it and the conversation goes on where it was", async () => {
    const { model, requests } = oneStep();
    const agent = createAgent({ model, tools: [echo], dormantAfterMs: 0 });
    const session = await agent.openSession("s1");
    expect((await session.prompt("first")).status).toBe("completed");
    const before = { messages: session.messages(), entries: session.entries() };
    const log = session.sessionLog;
    await settle();
    expect(session.asleep).toBe(true);

    // A read reopens it: the same history, from a new log object.
    expect(session.messages()).toEqual(before.messages);
    expect(session.asleep).toBe(false);
    expect(session.sessionLog).not.toBe(log);
    expect(session.entries()).toEqual(before.entries);

    await settle();
    expect(session.asleep).toBe(true);
    // An input reopens it: the model sees the whole conversation, and nothing was written twice.
    const r = await session.prompt("second");
    expect(r.status).toBe("completed");
    const last = requests.at(-1)!;
    expect(
      last.messages.some((m) => m.role === "user" && JSON.stringify(m).includes("first")),
    ).toBe(true);
    const ids = session.entries().map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    const seqs = session.entries().map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    await agent.close();
    // Closed (asleep or not), its log is not edited: reopening it is the way, and it says so.
    await expect(session.compact()).rejects.toThrow(/session s1 is closed.*openSession\("s1"\)/);
  });

  it("a session opened and never prompted sleeps too, and its first prompt runs", async () => {
    const { model } = oneStep();
    const agent = createAgent({ model, tools: [echo], dormantAfterMs: 0 });
    const session = await agent.openSession("new");
    await settle();
    expect(session.asleep).toBe(true);
    expect((await session.prompt("go")).status).toBe("completed");
    await agent.close();
  });

  it("never while a turn runs or an input waits; not before dormantAfterMs", async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const slow = defineTool({
      name: "echo",
      description: "Waits.",
      parameters: z.object({ text: z.string() }),
      traits: { concurrencySafe: true, risk: "low" },
      execute: async ({ text }) => {
        await gate;
        return text;
      },
    });
    const { model } = oneStep();
    const agent = createAgent({ model, tools: [slow], dormantAfterMs: 10 });
    const session = await agent.openSession("busy");
    // A follow-up: no prompt waits on its result, so only the running turn keeps it awake.
    await session.followUp("go");
    await settle();
    expect(session.currentTurn).toBeDefined();
    expect(session.asleep).toBe(false);
    const queued = session.prompt("then this");
    await settle();
    expect(session.asleep).toBe(false); // mid-turn, with a prompt queued
    open();
    expect((await queued).status).toBe("completed");
    await session.awaitIdle();
    expect(session.asleep).toBe(false); // idle, but not for 10 ms yet
    await settle();
    expect(session.asleep).toBe(true);
    await agent.close();
  });

  it("with Infinity, or over a store that cannot reopen a log synchronously, sessions stay in memory", async () => {
    // The same wait puts a session of an agent with dormantAfterMs 0 to sleep (the control).
    const control = createAgent({ model: oneStep().model, tools: [echo], dormantAfterMs: 0 });
    const c = await control.openSession("c");
    await c.prompt("go");
    const never = createAgent({ model: oneStep().model, tools: [echo], dormantAfterMs: Infinity });
    const a = await never.openSession("a");
    await a.prompt("go");
    // The store without synchronous checkpoint reads (like PostgreSQL's): async methods only.
    const base = memoryStore();
    const asyncOnly = Object.fromEntries(
      Object.entries(base).filter(([k]) => k !== "loadFromCheckpointSync"),
    ) as unknown as SessionStore;
    const other = createAgent({
      model: oneStep().model,
      tools: [echo],
      store: asyncOnly,
      dormantAfterMs: 0,
    });
    const b = await other.openSession("b");
    await b.prompt("go");
    await settle();
    expect(c.asleep).toBe(true);
    expect(a.asleep).toBe(false);
    expect(b.asleep).toBe(false);
    await control.close();
    await never.close();
    await other.close();
  });

  it("an input that arrives while the sleep's checkpoint is being written keeps the session awake, and its turn runs", async () => {
    const base = memoryStore();
    let release!: () => void;
    let writing!: () => void;
    const written = new Promise<void>((resolve) => {
      writing = resolve;
    });
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let hold = false;
    const store = {
      ...base,
      async saveCheckpoint(id: string, seq: number, body: string) {
        if (hold) {
          writing();
          await held;
        }
        return base.saveCheckpoint(id, seq, body);
      },
    } as typeof base;
    const agent = createAgent({ model: oneStep().model, tools: [echo], store, dormantAfterMs: 0 });
    const session = await agent.openSession("racy");
    await session.prompt("first");
    hold = true;
    await written; // the sleep is writing its checkpoint
    const second = session.prompt("second");
    release();
    expect((await second).status).toBe("completed");
    expect(session.messages().filter((m) => m.role === "user")).toHaveLength(2);
    hold = false;
    await settle();
    expect(session.asleep).toBe(true); // once idle again
    await agent.close();
  });

  it("a manual compaction waiting on its summary keeps the session awake: the compaction is written to the live log, then the session sleeps", async () => {
    let release!: () => void;
    const summaryHeld = new Promise<void>((resolve) => {
      release = resolve;
    });
    let summaryAsked!: () => void;
    const asked = new Promise<void>((resolve) => {
      summaryAsked = resolve;
    });
    const inner = scriptedModel(
      (request) => {
        if (request.tools.length === 0) return { text: "the summary" };
        return request.messages.at(-1)?.role === "tool"
          ? { text: "done" }
          : { toolCalls: [{ name: "echo", arguments: '{"text":"hi"}' }] };
      },
      { record: "none" },
    );
    // The summary request (no tools) waits until the test lets it answer.
    const model: Model = {
      name: inner.name,
      async *stream(request) {
        if (request.tools.length === 0) {
          summaryAsked();
          await summaryHeld;
        }
        yield* inner.stream(request);
      },
    };
    const agent = createAgent({ model, tools: [echo], dormantAfterMs: 0 });
    const session = await agent.openSession("compacting");
    for (const text of ["one", "two", "three"]) await session.prompt(text);
    const compaction = session.compact({ keepRecentTokens: 1 });
    await asked;
    await settle(); // the dormancy timer fires while the summary is awaited
    expect(session.asleep).toBe(false);
    release();
    const result = await compaction;
    expect(result.ok).toBe(true);
    expect(result.ok && result.durable).toBe(true);
    await settle();
    expect(session.asleep).toBe(true);
    // Reopened, the log holds the compaction; a prompt after it runs.
    expect(session.entries().some((e) => e.type === "compaction")).toBe(true);
    expect((await session.prompt("four")).status).toBe("completed");
    await agent.close();
  });

  it("what a session learned outlives its sleep: a permission granted always is not asked again, the provider's measured usage stays trusted", async () => {
    const asks: string[] = [];
    const model = measuredStep();
    const agent = createAgent({
      model,
      tools: [echo],
      dormantAfterMs: 0,
      permissions: {
        rules: [{ tool: "echo", action: "ask" }],
        ask: async (request) => {
          asks.push(request.requestId);
          return { type: "allow_always" };
        },
      },
    });
    const session = await agent.openSession("granted");
    expect((await session.prompt("go")).status).toBe("completed");
    expect(asks).toHaveLength(1);
    const usage = session.contextUsage();
    expect(usage.trusted).toBe(true);
    await settle();
    expect(session.asleep).toBe(true);
    expect(session.contextUsage()).toEqual(usage); // woken by the read: the same, still trusted
    await settle();
    expect(session.asleep).toBe(true);
    expect((await session.prompt("again")).status).toBe("completed");
    expect(asks).toHaveLength(1); // granted always, before the sleep
    await agent.close();
  });

  it("an edit before the sleep (a rollback, a compaction) is counted after it: the context usage is what a session that never slept reports", async () => {
    const model = () =>
      scriptedModel(
        (request) =>
          request.tools.length === 0
            ? { text: "the summary" }
            : request.messages.at(-1)?.role === "tool"
              ? { text: "done", usage: { inputTokens: 5000, outputTokens: 5 } }
              : { toolCalls: [{ name: "echo", arguments: '{"text":"hi"}' }] },
        { record: "none" },
      );
    const edits = {
      rollback: async (session: Session) => {
        // Back to the end of the first turn (its final text).
        const first = session.entries().filter((e) => e.type === "assistant_message")[1];
        expect((await session.rollback(first.id)).ok).toBe(true);
      },
      compact: async (session: Session) => {
        expect((await session.compact({ keepRecentTokens: 1 })).ok).toBe(true);
      },
    };
    for (const [name, run] of Object.entries(edits)) {
      const usage: Record<string, unknown> = {};
      for (const dormantAfterMs of [0, Number.POSITIVE_INFINITY]) {
        const agent = createAgent({ model: model(), tools: [echo], dormantAfterMs });
        const session = await agent.openSession(`edit-${name}`);
        for (const text of ["one", "two", "three"]) await session.prompt(text);
        expect(session.contextUsage().trusted).toBe(true);
        await run(session);
        await settle();
        expect(session.asleep).toBe(dormantAfterMs === 0);
        usage[String(dormantAfterMs)] = session.contextUsage();
        await agent.close();
      }
      expect({ name, usage: usage["0"] }).toEqual({ name, usage: usage.Infinity });
    }
  });

  it("what a sleep kept is dropped when another writer appended meanwhile: the session wakes on that log as a fresh one would", async () => {
    for (const external of [false, true]) {
      const store = memoryStore();
      const agent = createAgent({ model: measuredStep(), tools: [echo], store, dormantAfterMs: 0 });
      const session = await agent.openSession("shared");
      await session.prompt("go");
      expect(session.contextUsage().trusted).toBe(true);
      await settle();
      expect(session.asleep).toBe(true);
      if (external) {
        // Another runner's entry (as after a lost lease and a takeover elsewhere).
        const last = await store.load("shared");
        const tip = last.at(-1)!;
        await store.append("shared", [
          {
            id: "other",
            parentId: tip.id,
            seq: tip.seq + 1,
            at: tip.at + 1,
            type: "settings",
            settings: {},
          },
        ]);
      }
      // Its measured usage holds for its own log only.
      expect(session.contextUsage().trusted).toBe(!external);
      await agent.close();
    }
  });

  it("the log a session let go is garbage-collected: nothing it keeps across the sleep holds it", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const model = measuredStep();
    // A session budget and permissions: the context, the spend and the broker are carried.
    const agent = createAgent({
      model,
      tools: [echo],
      dormantAfterMs: 0,
      permissions: { rules: [{ tool: "echo", action: "allow" }] },
    });
    const session = agent.session("leak", { budget: { maxSteps: 100 } });
    await session.prompt("go");
    const ref = new WeakRef(session.sessionLog);
    await settle();
    expect(session.asleep).toBe(true);
    for (let i = 0; i < 10 && ref.deref(); i++) {
      await new Promise((r) => setTimeout(r, 10));
      gc();
    }
    expect(ref.deref()).toBeUndefined();
    expect((await session.prompt("again")).status).toBe("completed");
    await agent.close();
  });

  it("rejects a dormantAfterMs that is not a duration, saying what it takes", () => {
    expect(() => createAgent({ model: oneStep().model, dormantAfterMs: -1 })).toThrow(
      /dormantAfterMs.*from 0 to/,
    );
    expect(() => createAgent({ model: oneStep().model, dormantAfterMs: Number.NaN })).toThrow(
      /dormantAfterMs/,
    );
  });

  it("on SQLite, a session that slept keeps its lease and writes with its fencing token after it wakes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keel-dormant-"));
    dirs.push(dir);
    const store = sqliteStore(join(dir, "s.db"));
    const agent = createAgent({ model: oneStep().model, tools: [echo], store, dormantAfterMs: 0 });
    const session = await agent.openSession("leased");
    expect(session.role).toBe("owner");
    await session.prompt("go");
    await settle();
    expect(session.asleep).toBe(true);
    expect(session.role).toBe("owner");
    expect((await session.prompt("again")).status).toBe("completed");
    expect(session.sessionLog.heldLease).toBeDefined();
    // Another agent on the file: the session is this process's, its history whole.
    await agent.close();
    const reader = createAgent({ model: oneStep().model, store: sqliteStore(join(dir, "s.db")) });
    const reopened = await reader.openSession("leased");
    expect(reopened.entries().filter((e) => e.type === "inbox").length).toBe(2);
    await reader.close();
    store.close?.();
  });
});
