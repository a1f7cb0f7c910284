import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, defineTool, memoryStore } from "../index.ts";
import {
  faultyModel,
  faultyTool,
  killableStore,
  scheduledModel,
  scheduledTool,
  scriptedModel,
} from "../testing.ts";

describe("keel/testing's fault injector", () => {
  it("faultyModel fails the requests its plan names: 429 with Retry-After in seconds and as a date, network, a stream cut after N chunks", async () => {
    const at = new Date("2030-01-01T00:00:00Z");
    const model = faultyModel(
      scriptedModel(() => ({ text: "abc" })),
      [
        { type: "http", status: 429, retryAfter: 1.5 },
        { type: "http", status: 503, retryAfter: at, retryAfterMs: 20 },
        { type: "network" },
        { type: "stream_cut", afterChunks: 2 },
        undefined,
      ],
    );
    const request = {
      attemptId: "a",
      messages: [],
      tools: [],
      signal: new AbortController().signal,
    };
    const read = async () => {
      const events: string[] = [];
      try {
        for await (const e of model.stream(request)) events.push(e.type);
        return { events };
      } catch (err) {
        return {
          events,
          err: err as { kind: string; status?: number; headers: Record<string, string> },
        };
      }
    };
    const first = await read();
    expect(first.err).toMatchObject({
      kind: "http",
      status: 429,
      headers: { "retry-after": "1.5" },
    });
    expect(first.events).toEqual([]);
    expect((await read()).err).toMatchObject({
      status: 503,
      headers: { "retry-after": at.toUTCString(), "retry-after-ms": "20" },
    });
    expect((await read()).err).toMatchObject({ kind: "network" });
    const cut = await read();
    expect(cut.err).toMatchObject({ kind: "stream_cut" });
    expect(cut.events).toHaveLength(2);
    const clean = await read();
    expect(clean.err).toBeUndefined();
    expect(clean.events.at(-1)).toBe("finish");
    expect(model.requests).toBe(5);
  });

  it("faultyTool crashes an execution (the call fails with the message) and passes the others through", async () => {
    const tool = faultyTool(
      defineTool({ name: "t", description: "d", parameters: z.object({}), execute: () => "fine" }),
      { faults: (_a, _c, n) => (n === 0 ? { type: "crash", message: "disk on fire" } : undefined) },
    );
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "t", arguments: "{}" }] },
      { toolCalls: [{ id: "c2", name: "t", arguments: "{}" }] },
      { text: "ok" },
    ]);
    const session = createAgent({ model, tools: [tool] }).session("f");
    await session.prompt("go");
    const results = session.entries().filter((e) => e.type === "call_result");
    expect(results.map((e) => [e.callId, e.outcome])).toEqual([
      ["c1", "failed"],
      ["c2", "completed"],
    ]);
    expect(JSON.stringify(results[0])).toContain("disk on fire");
  });

  it("a kill point after the side effect: the store keeps what was durable, and recovery does not re-run the call (the example in docs/testing-your-tools.md)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), async (s) => {
        let runs = 0;
        const charge = scheduledTool(
          defineTool({
            name: "charge",
            description: "Charge a card.",
            parameters: z.object({}),
            execute: () => `charged ${++runs}`,
          }),
          s,
        );
        const model = scheduledModel(
          scriptedModel([{ toolCalls: [{ name: "charge", arguments: "{}" }] }, { text: "done" }]),
          s,
        );
        const durable = memoryStore();
        const dying = killableStore(durable);
        const done = createAgent({ model, tools: [charge], store: dying.store })
          .session("s")
          .prompt("pay");
        const killed = s.schedule(Promise.resolve(), "kill").then(() => dying.kill());
        await s.waitFor(Promise.race([done, killed]));
        await s.waitFor(killed);
        const reopened = createAgent({ model, tools: [charge], store: durable }).session("s");
        await s.waitFor(reopened.ready);
        if (runs > 1) throw new Error(`charged ${runs} times`);
        expect(dying.killed).toBe(true);
      }),
      { numRuns: 50, seed: 3 },
    );
  });

  it("faultyTool's kill point runs onKill after the side effect and never returns", async () => {
    const effects: string[] = [];
    const durable = memoryStore();
    const dying = killableStore(durable);
    const tool = faultyTool(
      defineTool({
        name: "w",
        description: "d",
        parameters: z.object({}),
        execute: () => {
          effects.push("written");
          return "ok";
        },
      }),
      { faults: () => ({ type: "kill", afterEffect: true }), onKill: dying.kill },
    );
    const model = scriptedModel([{ toolCalls: [{ id: "c1", name: "w", arguments: "{}" }] }]);
    void createAgent({ model, tools: [tool], store: dying.store })
      .session("k")
      .prompt("go");
    await new Promise((r) => setTimeout(r, 50));
    expect(effects).toEqual(["written"]);
    expect(dying.killed).toBe(true);
    const entries = await durable.load("k");
    expect(entries.some((e) => e.type === "call_started")).toBe(true);
    expect(entries.some((e) => e.type === "call_result")).toBe(false);
    const reopened = createAgent({ model, tools: [tool], store: durable }).session("k");
    await reopened.ready;
    const result = reopened.entries().find((e) => e.type === "call_result");
    expect(result).toMatchObject({ callId: "c1", outcome: "unknown" });
    expect(effects).toEqual(["written"]);
  });

  it("faultyTool's hang never returns, even when its signal is aborted", async () => {
    const tool = faultyTool(
      defineTool({ name: "h", description: "d", parameters: z.object({}), execute: () => "ok" }),
      { faults: () => ({ type: "hang" }) },
    );
    const ctl = new AbortController();
    const ctx = { callId: "c", signal: ctl.signal, idempotencyKey: "k", onUpdate: () => {} };
    const out = Promise.resolve(tool.execute({}, ctx as never)).then(() => "returned");
    ctl.abort();
    const timer = new Promise((r) => setTimeout(() => r("still hanging"), 30));
    expect(await Promise.race([out, timer])).toBe("still hanging");
  });
});
