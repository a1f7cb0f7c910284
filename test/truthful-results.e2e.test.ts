import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { faultyModel } from "../actors/fault-injection.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { textOf } from "../contracts/messages.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import type { LeaseStore, SessionStore } from "../session/store.ts";
import { StoreError } from "../session/store-error.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { postgresStore } from "../session/stores/postgres-store.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { defineTool } from "../tools/define-tool.ts";
import { deferred } from "./support/harness.ts";
import {
  ignoresRefusedFinalizeTurnMachine,
  sendsBeforeRecordedTurnMachine,
} from "./support/mutants/turn.mutants.ts";
import { freshSchema } from "./support/postgres-server.ts";
import { usePostgres } from "./support/use-postgres.ts";

// Invariant 15 of docs/architecture.md: nothing is reported that the log does not hold. A store refuses every append
// from the k-th on (a full disk), for every k a turn reaches; whatever the prompt's result and
// the turn.ended event say `completed` must be in the store, and once the store takes writes
// again, the log tells the caller's story. Invariant 13: a runner whose write was fenced asks
// the model nothing more.

const db = usePostgres();

type Store = SessionStore & Partial<LeaseStore>;

/** `inner`, refusing every `append` from call number `from` (1-based) on, until `heal()`. */
function refusing(inner: Store, from: number) {
  let calls = 0;
  let refusals = 0;
  let healed = false;
  const store: Store = Object.assign(Object.create(null), inner, {
    kind: `${inner.kind}+refusing`,
    append: (id: string, entries: readonly LogEntry[], options?: unknown) => {
      calls++;
      if (!healed && calls >= from) {
        refusals++;
        return Promise.reject(new StoreError("IO", "disk full (injected)"));
      }
      return (inner.append as (...a: unknown[]) => Promise<void>)(id, entries, options);
    },
  });
  return {
    store,
    get refusals() {
      return refusals;
    },
    heal: () => {
      healed = true;
    },
  };
}

const ping = defineTool({
  name: "ping",
  description: "Answers pong.",
  parameters: z.object({ n: z.number() }),
  traits: { readOnly: true, concurrencySafe: true, idempotent: true },
  execute: async ({ n }) => `pong ${n}`,
});

const scenarios = {
  "a text-only turn": () => [{ text: "the answer" }],
  "a turn with one tool call": () => [
    { toolCalls: [{ id: "a", name: "ping", arguments: '{"n":1}' }] },
    { text: "the answer" },
  ],
  "a turn with two parallel calls": () => [
    {
      toolCalls: [
        { id: "a", name: "ping", arguments: '{"n":1}' },
        { id: "b", name: "ping", arguments: '{"n":2}' },
      ],
    },
    { text: "the answer" },
  ],
} as const;

/** What the durable log says of the turn that consumed input `inboxId`: its last end and answer. */
function durableTurn(entries: readonly LogEntry[], inboxId: string) {
  let turnId: string | undefined;
  for (const e of entries)
    if (e.type === "user_message" && e.inboxId === inboxId) turnId = e.turnId;
  if (!turnId) return undefined;
  let end: { status: string; code?: string } | undefined;
  let text = "";
  for (const e of entries) {
    if (e.type === "turn_end" && e.turnId === turnId) end = { status: e.status, code: e.code };
    if (e.type === "assistant_message" && e.turnId === turnId) text = textOf(e.content);
  }
  return { end, text };
}

interface RunReport {
  problems: string[];
  refused: boolean;
}

/**
 * One run: a prompt whose store refuses from append `from` on. Checks what the caller and the
 * listeners were told against what the inner store holds, then heals the store and checks that
 * the log ends up telling the same story.
 */
async function run(
  make: () => Promise<Store>,
  script: () => readonly unknown[],
  from: number,
  turnMachine?: typeof ignoresRefusedFinalizeTurnMachine,
): Promise<RunReport> {
  const inner = await make();
  const faulty = refusing(inner, from);
  const model = scriptedModel([...script(), { text: "after healing" }] as never);
  const agent = createAgent({
    model,
    tools: [ping],
    store: faulty.store,
    lease: false,
    ...(turnMachine ? { turnMachine } : {}),
  });
  const problems: string[] = [];
  const session = await agent.openSession("s");
  const ended: AgentEvent[] = [];
  session.subscribe((e) => {
    if (e.type === "turn.ended") ended.push(e);
  });
  const id = `in-${from}`;
  let result: Awaited<ReturnType<typeof session.prompt>> | undefined;
  try {
    result = await session.prompt("the question", { id });
  } catch (err) {
    // Not acknowledged: the inbox entry was refused. Nothing was promised.
    if (!String(err).includes("disk full")) problems.push(`prompt rejected with ${String(err)}`);
  }
  const durable = durableTurn(await inner.load("s"), id);
  const held = durable?.end?.status === "completed" && durable.text === result?.text;
  if (result?.status === "completed" && !held) {
    problems.push(
      `prompt() said completed (${result.text}) but the store holds ${JSON.stringify(durable)}`,
    );
  }
  for (const e of ended) {
    if (e.type === "turn.ended" && e.status === "completed" && durable?.end?.status !== "completed")
      problems.push(`turn.ended said completed but the store holds ${JSON.stringify(durable)}`);
  }
  if (result && result.status === "failed" && result.code === "STORE_FAILED") {
    if (!result.reason?.includes("disk full (injected)"))
      problems.push(`a STORE_FAILED result does not name the store's error: ${result.reason}`);
  }
  // The store takes writes again: the next input completes, and the log's end of the first turn
  // is what its caller was told.
  faulty.heal();
  const after = await session.prompt("again");
  if (after.status !== "completed") problems.push(`after healing: ${JSON.stringify(after)}`);
  await agent.close();
  const healed = durableTurn(await inner.load("s"), id);
  if (
    result &&
    healed?.end &&
    (healed.end.status !== result.status || healed.end.code !== result.code)
  ) {
    problems.push(
      `the log ends the first turn ${JSON.stringify(healed.end)}, its caller was told ${result.status}/${result.code}`,
    );
  }
  await inner.close();
  return { problems, refused: faulty.refusals > 0 };
}

/** Every refusal point: k = 1, 2, … until a run in which the store refused nothing. */
async function search(
  make: () => Promise<Store>,
  turnMachine?: typeof ignoresRefusedFinalizeTurnMachine,
): Promise<string[]> {
  const found: string[] = [];
  for (const [name, script] of Object.entries(scenarios)) {
    for (let from = 1; from < 40; from++) {
      const report = await run(make, script, from, turnMachine);
      for (const p of report.problems) found.push(`${name}, refused from append ${from}: ${p}`);
      if (!report.refused) break;
    }
  }
  return found;
}

const sqlite = async () =>
  sqliteStore(join(mkdtempSync(join(tmpdir(), "keel-truth-")), "s.db")) as Store;

describe("invariant 15: nothing is reported that the log does not hold", () => {
  it("memory: at every append a store starts refusing, no result or turn.ended says completed for an answer the store lacks", async () => {
    expect(await search(async () => memoryStore())).toEqual([]);
  });

  it("SQLite: at every append a store starts refusing, no result or turn.ended says completed for an answer the store lacks", async () => {
    expect(await search(sqlite)).toEqual([]);
  }, 60_000);

  it.skipIf(!db.mode.run)(
    "PostgreSQL: at every append a store starts refusing, no result or turn.ended says completed for an answer the store lacks",
    async () => {
      const pg = async () => {
        const store = await postgresStore(db.url(), { schema: freshSchema("truth"), max: 2 });
        return store as Store;
      };
      expect(await search(pg)).toEqual([]);
    },
    120_000,
  );

  it("the search catches a turn that reports its planned end when the store refused it", async () => {
    const found = await search(async () => memoryStore(), ignoresRefusedFinalizeTurnMachine);
    expect(found.some((p) => p.includes("prompt() said completed"))).toBe(true);
  });
});

/**
 * A session owned by this runner on a store with leases; its one tool call runs while another
 * runner takes the session over (the lease's token moves on), then completes.
 */
async function fencedRun(
  store: Store & LeaseStore,
  turnMachine?: typeof sendsBeforeRecordedTurnMachine,
) {
  const started = deferred();
  const finish = deferred();
  const slow = defineTool({
    name: "slow",
    description: "Waits.",
    parameters: z.object({}),
    traits: { readOnly: true, concurrencySafe: true },
    execute: async () => {
      started.resolve();
      await finish.promise;
      return "done";
    },
  });
  const model = scriptedModel([
    { toolCalls: [{ id: "a", name: "slow", arguments: "{}" }] },
    { text: "an answer no log holds" },
  ]);
  const agent = createAgent({
    model,
    tools: [slow],
    store,
    lease: { owner: "runner-a:1", ttlMs: 60_000, pollMs: 60_000 },
    ...(turnMachine ? { turnMachine } : {}),
  });
  const session = await agent.openSession("fenced");
  expect(session.role).toBe("owner");
  const ended: AgentEvent[] = [];
  session.subscribe((e) => {
    if (e.type === "turn.ended") ended.push(e);
  });
  const prompt = session.prompt("go");
  await started.promise;
  // Another runner takes the session over: compare-and-set on the live lease's token.
  const lease = await store.readLease("fenced");
  const taken = await store.acquireLease("fenced", "runner-b:2", 60_000, { ifToken: lease!.token });
  expect(taken).not.toBeNull();
  finish.resolve();
  const result = await prompt;
  const entries = await store.load("fenced");
  await agent.close();
  return { result, requests: model.requests.length, role: session.role, ended, entries };
}

/**
 * The first model request fails with a 503; during the retry's wait another runner takes the
 * session over. The retry's attempt must not go out.
 */
async function fencedDuringRetry(
  store: Store & LeaseStore,
  turnMachine?: typeof sendsBeforeRecordedTurnMachine,
) {
  const inner = scriptedModel([{ text: "an answer no log holds" }]);
  const waiting = deferred();
  const model = faultyModel(inner, (_req, i) =>
    i === 0 ? { type: "http", status: 503 } : undefined,
  );
  const agent = createAgent({
    model,
    store,
    retry: { baseDelayMs: 200, jitter: 0 },
    lease: { owner: "runner-a:1", ttlMs: 60_000, pollMs: 60_000 },
    ...(turnMachine ? { turnMachine } : {}),
  });
  const session = await agent.openSession("fenced-retry");
  const ended = deferred<AgentEvent>();
  session.subscribe((e) => {
    if (e.type === "retry.scheduled") waiting.resolve();
    if (e.type === "turn.ended") ended.resolve(e);
  });
  const prompt = session.prompt("go");
  await waiting.promise;
  // The first attempt's start is in the store (a broken runner writes it after its request).
  while (!(await store.load("fenced-retry")).some((e) => e.type === "attempt_start")) {
    await new Promise((r) => setTimeout(r, 5));
  }
  const lease = await store.readLease("fenced-retry");
  expect(
    await store.acquireLease("fenced-retry", "runner-b:2", 60_000, { ifToken: lease!.token }),
  ).not.toBeNull();
  const end = await ended.promise;
  // A broken runner may leave its prompt to a new owner that never comes: read the event.
  const result = turnMachine ? end : await prompt;
  await agent.close();
  return { result, requests: model.requests };
}

describe("invariant 13: a runner whose write was fenced stops at once", () => {
  const check = (r: Awaited<ReturnType<typeof fencedRun>>) => {
    expect(r.requests).toBe(1); // no request after the fence
    expect(r.result).toMatchObject({ status: "failed", code: "LEASE_LOST" });
    expect(r.result.text).not.toBe("an answer no log holds");
    expect(r.result.reason).toMatch(/lease lost/);
    expect(r.ended).toEqual([
      expect.objectContaining({ type: "turn.ended", status: "failed", code: "LEASE_LOST" }),
    ]);
    expect(r.entries.some((e) => e.type === "call_result")).toBe(false); // fencing held
  };

  it("SQLite: the call's result is refused, no further model request is sent, prompt() says LEASE_LOST and the session follows", async () => {
    const r = await fencedRun((await sqlite()) as Store & LeaseStore);
    check(r);
  });

  it.skipIf(!db.mode.run)(
    "PostgreSQL: the call's result is refused, no further model request is sent, prompt() says LEASE_LOST and the session follows",
    async () => {
      const store = await postgresStore(db.url(), { schema: freshSchema("fenced"), max: 4 });
      db.stores.push(store);
      check(await fencedRun(store));
    },
  );

  it("SQLite: a runner taken over during a retry wait sends no retry: the attempt's start is refused first", async () => {
    const r = await fencedDuringRetry((await sqlite()) as Store & LeaseStore);
    expect(r.requests).toBe(1);
    expect(r.result).toMatchObject({ status: "failed", code: "LEASE_LOST" });
  });

  it("the check catches a runner that sends its request before the attempt is durable", async () => {
    const r = await fencedDuringRetry(
      (await sqlite()) as Store & LeaseStore,
      sendsBeforeRecordedTurnMachine,
    );
    expect(r.requests).toBe(2);
  });
});

/** A store that takes every write but the one holding a call's result, which never settles (a partitioned network store). */
function partitionedStore(): Store {
  const inner = memoryStore();
  return Object.assign(Object.create(null), inner, {
    kind: "memory+partitioned",
    append: (id: string, entries: readonly LogEntry[], options?: unknown) =>
      entries.some((e) => e.type === "call_result")
        ? new Promise<void>(() => {})
        : (inner.append as (...a: unknown[]) => Promise<void>)(id, entries, options),
  });
}

describe("invariant 13: a compaction's summary request waits for what the turn wrote", () => {
  const isSummary = (r: { tools: readonly unknown[] }) => r.tools.length === 0;
  const bulky = defineTool({
    name: "bulky",
    description: "Returns a long text.",
    parameters: z.object({ n: z.number() }),
    traits: { readOnly: true, concurrencySafe: true, idempotent: true },
    execute: async ({ n }) => `page ${n}: ${"lorem ipsum dolor sit amet ".repeat(100)}`,
  });
  /** Four pages in one step (half a 4 000-token window: a compaction is due), then the answer. */
  const pagesModel = () =>
    scriptedModel(
      (request, index) =>
        isSummary(request)
          ? { text: "a summary" }
          : index === 0
            ? {
                toolCalls: [1, 2, 3, 4].map((n) => ({
                  id: `b${n}`,
                  name: "bulky",
                  arguments: `{"n":${n}}`,
                })),
              }
            : { text: "done" },
      { contextWindow: 4000, maxOutputTokens: 500 },
    );

  it("a step's results that the store refuses (late, as a network store does) are never sent in a summary request", async () => {
    // Every append holding a call_result is refused 5 ms after it was asked, so the refusal
    // lands after the chart has found a compaction due for the next step.
    const inner = memoryStore();
    let refused = 0;
    let healed = false;
    const store: Store = Object.assign(Object.create(null), inner, {
      kind: "memory+late-refusal",
      append: (id: string, entries: readonly LogEntry[], options?: unknown) => {
        if (!healed && entries.some((e) => e.type === "call_result")) {
          refused++;
          return new Promise<void>((_, reject) =>
            setTimeout(() => reject(new StoreError("IO", "disk full (injected)")), 5),
          );
        }
        return (inner.append as (...a: unknown[]) => Promise<void>)(id, entries, options);
      },
    });
    const model = pagesModel();
    // A compaction is due once the step's results are in (half the window).
    const agent = createAgent({ model, tools: [bulky], store, context: { compactAt: 0.5 } });
    const session = agent.session("late-refusal");
    const compactions: AgentEvent[] = [];
    session.subscribe((e) => {
      if (e.type === "context.compacted") compactions.push(e);
    });
    const result = await session.prompt("read page 1");
    healed = true; // the queued entries are written at close
    await agent.close();
    expect(refused).toBeGreaterThan(0);
    expect(result).toMatchObject({ status: "failed", code: "STORE_FAILED" });
    // One request (the first step's); the summary of the refused result was never asked for.
    expect(model.requests.filter(isSummary)).toEqual([]);
    expect(model.requests).toHaveLength(1);
    expect(compactions).toEqual([]);
  });

  it("the turn's deadline while the compaction waits on a store that never answers ends the turn (the finalizer's deadline), asking nothing", async () => {
    const store = partitionedStore();
    const model = pagesModel();
    const agent = createAgent({
      model,
      tools: [bulky],
      store,
      context: { compactAt: 0.5 },
      // The deadline interrupts the turn while its compaction waits for the flush (an
      // interrupt from the caller is written to the same stuck store first).
      limits: { maxSteps: 10, deadlineMs: 300 },
      finalizeDeadlineMs: 300,
    });
    const result = await agent.session("partitioned").prompt("read page 1");
    expect(result).toMatchObject({ status: "failed", code: "STORE_FAILED" });
    expect(model.requests.filter(isSummary)).toEqual([]);
    expect(model.requests).toHaveLength(1);
  });

  it("with a store that takes the writes, the same step is compacted before the next request", async () => {
    const model = pagesModel();
    const agent = createAgent({
      model,
      tools: [bulky],
      store: memoryStore(),
      context: { compactAt: 0.5 },
    });
    const result = await agent.session("compacts").prompt("read page 1");
    await agent.close();
    expect(result.status).toBe("completed");
    expect(model.requests.filter(isSummary)).toHaveLength(1);
  });
});

/** A model that calls `ping` once, then answers "the answer". */
const pingThenAnswer = () =>
  scriptedModel([
    { toolCalls: [{ id: "a", name: "ping", arguments: '{"n":1}' }] },
    { text: "the answer" },
  ]);

describe("invariant 13: the next request waits for the step's results to be durable", () => {
  /** Requests sent while the append of the step's results is held, and the prompt's result. */
  async function heldResults(turnMachine?: typeof sendsBeforeRecordedTurnMachine) {
    const inner = memoryStore();
    const held = deferred();
    const release = deferred();
    const store: Store = Object.assign(Object.create(null), inner, {
      kind: "memory+held",
      append: async (id: string, entries: readonly LogEntry[], options?: unknown) => {
        if (entries.some((e) => e.type === "call_result")) {
          held.resolve();
          await release.promise;
        }
        return (inner.append as (...a: unknown[]) => Promise<void>)(id, entries, options);
      },
    });
    const model = pingThenAnswer();
    const agent = createAgent({
      model,
      tools: [ping],
      store,
      ...(turnMachine ? { turnMachine } : {}),
    });
    const prompt = agent.session("held").prompt("go");
    await held.promise;
    await new Promise((r) => setTimeout(r, 50));
    const whileHeld = model.requests.length;
    release.resolve();
    const result = await prompt;
    await agent.close();
    return { whileHeld, after: model.requests.length, result };
  }

  it("while the store holds the append of a step's results, no further model request goes out", async () => {
    const r = await heldResults();
    expect(r.whileHeld).toBe(1);
    expect(r.result).toMatchObject({ status: "completed", text: "the answer" });
    expect(r.after).toBe(2);
  });

  it("the check catches a turn that sends before its write-ahead is durable", async () => {
    expect((await heldResults(sendsBeforeRecordedTurnMachine)).whileHeld).toBe(2);
  });

  it("an interrupt while the next attempt waits on a store that never answers ends the turn (the finalizer's deadline), asking nothing", async () => {
    const model = pingThenAnswer();
    // The turn's deadline interrupts it while the second attempt's write-ahead waits.
    const limits = { maxSteps: 10, deadlineMs: 300 };
    const agent = createAgent({
      model,
      tools: [ping],
      store: partitionedStore(),
      limits,
      finalizeDeadlineMs: 300,
    });
    const ended: string[] = [];
    const session = agent.session("partitioned-attempt");
    session.subscribe((e) => {
      if (e.type === "turn.ended") ended.push(e.status);
    });
    const result = await session.prompt("go");
    expect(result).toMatchObject({ status: "failed", code: "STORE_FAILED" });
    expect(ended).toEqual(["failed"]);
    expect(model.requests).toHaveLength(1);
  });
});
