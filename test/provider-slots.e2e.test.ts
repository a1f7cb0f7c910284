import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { processSlots } from "../actors/provider-slots.ts";
import { createTrace } from "../cli/trace.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { openaiModel } from "../providers/openai-model.ts";
import {
  errorReply,
  type FakeOpenAIServer,
  type FakeReply,
  neverAnswer,
  stallAfterText,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";

let server: FakeOpenAIServer;
beforeEach(async () => {
  server = await startFakeOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

const model = (idleTimeoutMs = 60_000) =>
  openaiModel({
    model: "fake-model",
    contextWindow: 32_768,
    baseURL: server.baseURL,
    apiKey: "k",
    firstChunkTimeoutMs: idleTimeoutMs,
    idleTimeoutMs,
  });

/** A normal answer that stays in flight for `ms` after its first chunk (the server sleeps). */
const slowAnswer = (text: string, ms: number): FakeReply => {
  const [first, ...rest] = streamReply({ text });
  return [first!, { type: "sleep", ms }, ...rest];
};

/** A promise and its resolve (Node 20 has no Promise.withResolvers). */
const gateOpen = () => {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
};

const watch = (events: AgentEvent[]) => (e: AgentEvent) => events.push(e);

describe("provider concurrency in one process (real HTTP, openaiModel)", () => {
  it("300 sessions that start together never have more than `concurrency` requests in flight, and every one is answered", async () => {
    const N = 300;
    const LIMIT = 8;
    for (let i = 0; i < N; i++) server.enqueue(slowAnswer(`answer ${i}`, 100));
    const agent = createAgent({ model: model(), concurrency: { openai: LIMIT } });
    const events: AgentEvent[] = [];
    const sessions = Array.from({ length: N }, (_, i) => agent.session(`s${i}`));
    for (const s of sessions) s.subscribe(watch(events));
    const results = await Promise.all(sessions.map((s, i) => s.prompt(`question ${i}`)));
    expect(results.filter((r) => r.status === "completed")).toHaveLength(N);
    expect(server.requests).toHaveLength(N);
    expect(server.maxInFlight).toBeLessThanOrEqual(LIMIT);
    expect(server.maxInFlight).toBeGreaterThan(0);
    const queued = events.filter((e) => e.type === "attempt.queued");
    const admitted = events.filter((e) => e.type === "attempt.admitted");
    expect(queued.length).toBeGreaterThan(0);
    // Every request that waited was admitted once, and said which provider and bound it waited on.
    expect(admitted).toHaveLength(queued.length);
    for (const q of queued) {
      expect(q).toMatchObject({ provider: "openai", limit: LIMIT });
      expect(q.type === "attempt.queued" && q.position).toBeGreaterThan(0);
    }
    await agent.close();
  }, 60_000);

  it("a key without a limit is not bounded: the model's provider key is what the map names", async () => {
    const N = 12;
    const gate = gateOpen();
    for (let i = 0; i < N; i++)
      server.enqueue([
        ...streamReply({ text: "x" }).slice(0, 1),
        { type: "gate", until: gate.promise },
        ...streamReply({ text: "x" }).slice(1),
      ]);
    const agent = createAgent({ model: model(), concurrency: { anthropic: 1 } });
    const runs = Array.from({ length: N }, (_, i) => agent.session(`u${i}`).prompt("go"));
    await server.waitForRequests(N);
    expect(server.inFlight).toBe(N);
    gate.resolve();
    expect((await Promise.all(runs)).every((r) => r.status === "completed")).toBe(true);
    await agent.close();
  });

  it("an interrupt takes a queued request out of the queue at once: it is never sent, and no slot leaks", async () => {
    const gate = gateOpen();
    server.enqueue([{ type: "gate", until: gate.promise }, ...streamReply({ text: "first" })]);
    const agent = createAgent({ model: model(), concurrency: { openai: 1 } });
    const holder = agent.session("holder");
    const first = holder.prompt("hold the slot");
    await server.waitForRequests(1);
    const waiter = agent.session("waiter");
    const events: AgentEvent[] = [];
    waiter.subscribe(watch(events));
    const queuedSeen = new Promise<void>((resolve) =>
      waiter.subscribe((e) => e.type === "attempt.queued" && resolve()),
    );
    const second = waiter.prompt("wait for it");
    await queuedSeen;
    await waiter.interrupt("changed my mind");
    const out = await second;
    expect(out.status).toBe("cancelled");
    expect(events.some((e) => e.type === "attempt.admitted")).toBe(false);
    expect(server.requests).toHaveLength(1);
    // The trace says what the turn waited for, and the interrupt says where it was.
    const printed: string[] = [];
    const trace = createTrace({ out: { write: (c) => printed.push(c) }, color: false });
    for (const e of events) trace.onEvent(e);
    expect(printed.join("")).toContain(
      "waiting for a openai slot: 1 request in flight at most, #1 in the queue",
    );
    // The log's turn_aborted entry says where the turn was when it was cut.
    const aborted = waiter.entries().find((e) => e.type === "turn_aborted");
    expect(aborted && "where" in aborted && aborted.where).toMatch(
      /while waiting for a openai slot/,
    );
    // The holder finishes; its slot and the cancelled waiter's place are both free: the next
    // request goes at once.
    gate.resolve();
    expect((await first).status).toBe("completed");
    server.enqueue(streamReply({ text: "third" }));
    const third = agent.session("third");
    const thirdEvents: AgentEvent[] = [];
    third.subscribe(watch(thirdEvents));
    expect((await third.prompt("go")).status).toBe("completed");
    expect(thirdEvents.some((e) => e.type === "attempt.queued")).toBe(false);
    expect(server.requests).toHaveLength(2);
    await agent.close();
  });

  for (const [name, options, reason] of [
    ["the turn's deadline (limits.deadlineMs)", { limits: { deadlineMs: 300 } }, /deadline/],
    [
      "the operation deadline (retry.operationDeadlineMs)",
      { retry: { operationDeadlineMs: 300 } },
      /operationDeadlineMs 300/,
    ],
  ] as const) {
    it(`a wait for a slot counts against ${name}: a wait that outlives it ends the turn budget_exhausted, nothing sent`, async () => {
      server.enqueue(neverAnswer());
      const slots = processSlots({ openai: 1 });
      const holding = createAgent({ model: model(), concurrency: slots });
      const holder = holding.session("holder");
      const held = holder.prompt("hold the slot");
      await server.waitForRequests(1);
      const agent = createAgent({ model: model(), concurrency: slots, ...options });
      const session = agent.session("late");
      const started = performance.now();
      const out = await session.prompt("too late");
      const took = performance.now() - started;
      expect(out.status).toBe("budget_exhausted");
      expect(out.reason).toMatch(reason);
      expect(took).toBeGreaterThanOrEqual(290);
      expect(took).toBeLessThan(10_000); // generous: the bound is the deadline, not this figure
      expect(server.requests).toHaveLength(1);
      await holder.interrupt();
      expect((await held).status).toBe("cancelled");
      await Promise.all([holding.close(), agent.close()]);
    }, 15_000);
  }
});

/** How one request of the release-path property ends. */
type Path =
  | "completed"
  | "http-error"
  | "cut"
  | "idle-timeout"
  | "interrupt"
  | "turn-deadline"
  | "operation-deadline";

describe("a slot is released exactly once on every path", () => {
  it("after any sequence of requests ending by success, error, cut, idle timeout, interrupt or a deadline, the slot is free (limit 1: the next request is not queued)", async () => {
    const paths: Path[] = [
      "completed",
      "http-error",
      "cut",
      "idle-timeout",
      "interrupt",
      "turn-deadline",
      "operation-deadline",
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...paths), { minLength: 1, maxLength: 5 }),
        async (seq) => {
          const slots = processSlots({ openai: 1 });
          const m = model(150);
          const plain = createAgent({ model: m, concurrency: slots, retry: { maxRetries: 0 } });
          const timed = createAgent({
            model: m,
            concurrency: slots,
            retry: { maxRetries: 0 },
            limits: { deadlineMs: 150 },
          });
          const bounded = createAgent({
            model: m,
            concurrency: slots,
            retry: { maxRetries: 0, operationDeadlineMs: 150 },
          });
          let n = 0;
          for (const path of seq) {
            const id = `p${n++}`;
            const sent = server.requests.length;
            if (path === "completed") server.enqueue(streamReply({ text: "ok" }));
            else if (path === "http-error")
              server.enqueue(
                errorReply(400, { message: "bad request", type: "invalid_request_error" }),
              );
            else if (path === "cut")
              server.enqueue([...streamReply({ text: "cut" }).slice(0, 2), { type: "destroy" }]);
            else if (path === "idle-timeout") server.enqueue(stallAfterText("thinking "));
            else server.enqueue(neverAnswer());
            const agent =
              path === "turn-deadline" ? timed : path === "operation-deadline" ? bounded : plain;
            const session = agent.session(id);
            const events: AgentEvent[] = [];
            session.subscribe(watch(events));
            // A leaked slot (limit 1) queues this request: end it at once so the property fails fast.
            session.subscribe((e) => {
              if (e.type === "attempt.queued") void session.interrupt("a slot leaked");
            });
            const run = session.prompt("go");
            if (path === "interrupt") {
              await server.waitForRequests(sent + 1);
              await session.interrupt();
            }
            const out = await run;
            expect(
              events.some((e) => e.type === "attempt.queued"),
              `${path} after ${seq.join(",")}`,
            ).toBe(false);
            expect(server.requests.length, path).toBe(sent + 1);
            expect(out.status === "completed", path).toBe(path === "completed");
          }
          await Promise.all([plain.close(), timed.close(), bounded.close()]);
        },
      ),
      { numRuns: 12 },
    );
  }, 60_000);
});
