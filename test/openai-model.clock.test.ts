import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SimulatedClock } from "xstate";
import type { Clock } from "../contracts/clock.ts";
import { userText } from "../contracts/messages.ts";
import type { ModelRequest } from "../contracts/model.ts";
import { openaiModel } from "../providers/openai-model.ts";
import {
  type FakeOpenAIServer,
  neverAnswer,
  stallAfterText,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";

/** A SimulatedClock that also tells which timers are armed. */
function spyClock() {
  const sim = new SimulatedClock();
  const armed = new Map<unknown, number>();
  const history: number[] = [];
  const clock: Clock = {
    now: () => sim.now(),
    setTimeout: (fn, ms) => {
      history.push(ms);
      const h = sim.setTimeout(() => {
        armed.delete(h);
        fn();
      }, ms);
      armed.set(h, ms);
      return h;
    },
    clearTimeout: (h) => {
      armed.delete(h);
      sim.clearTimeout(h);
    },
  };
  return { sim, clock, armed, history };
}

let server: FakeOpenAIServer;
beforeEach(async () => {
  server = await startFakeOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

const request = (signal = new AbortController().signal): ModelRequest => ({
  messages: [userText("hi")],
  tools: [],
  signal,
  attemptId: "att_1",
});

describe("openaiModel timeouts on an injected clock", () => {
  it("the first-chunk timeout is armed at send and aborts the request when the clock reaches it", async () => {
    const { sim, clock, history } = spyClock();
    const m = openaiModel({
      contextWindow: 8192,
      model: "m",
      baseURL: server.baseURL,
      clock,
      firstChunkTimeoutMs: 5000,
      requestTimeoutMs: Number.POSITIVE_INFINITY, // this test lists the other timers exactly
    });
    server.enqueue(neverAnswer());
    const it = m.stream(request())[Symbol.asyncIterator]();
    const next = it.next();
    await server.waitForRequests(1);
    expect(history).toEqual([5000]);
    sim.increment(5000);
    await expect(next).rejects.toMatchObject({ kind: "first_chunk_timeout" });
  });

  it("an idle timeout fires after a stall once the clock passes idleTimeoutMs", async () => {
    const { sim, clock, armed } = spyClock();
    const m = openaiModel({
      contextWindow: 8192,
      model: "m",
      baseURL: server.baseURL,
      clock,
      idleTimeoutMs: 7000,
      requestTimeoutMs: Number.POSITIVE_INFINITY, // this test lists the other timers exactly
    });
    server.enqueue(stallAfterText("so far"));
    const it = m.stream(request())[Symbol.asyncIterator]();
    expect((await it.next()).value).toEqual({ type: "text.delta", text: "so far" });
    const next = it.next();
    // The idle timer is armed only once the adapter waits for the next chunk.
    await server.waitForRequests(1);
    for (let i = 0; i < 1000 && ![...armed.values()].includes(7000); i++) await Promise.resolve();
    expect([...armed.values()]).toEqual([7000]);
    sim.increment(7000);
    await expect(next).rejects.toMatchObject({ kind: "idle_timeout" });
    expect(armed.size).toBe(0);
  });

  it("no timeout runs while the consumer holds the stream: a slow consumer is not an idle provider", async () => {
    const { sim, clock, armed } = spyClock();
    const m = openaiModel({
      contextWindow: 8192,
      model: "m",
      baseURL: server.baseURL,
      clock,
      firstChunkTimeoutMs: 1000,
      idleTimeoutMs: 1000,
    });
    server.enqueue(streamReply({ text: ["a", "b", "c"] }));
    const it = m.stream(request())[Symbol.asyncIterator]();
    expect((await it.next()).value).toEqual({ type: "text.delta", text: "a" });
    expect(armed.size).toBe(0);
    sim.increment(60_000);
    const rest = [];
    for (let r = await it.next(); !r.done; r = await it.next()) rest.push(r.value);
    expect(rest.map((e) => e.type)).toEqual(["text.delta", "text.delta", "usage", "finish"]);
  });

  it("no timer is left armed after completion, failure, or an early break by the consumer", async () => {
    const { clock, armed } = spyClock();
    const m = openaiModel({ contextWindow: 8192, model: "m", baseURL: server.baseURL, clock });
    server.enqueue(
      streamReply({ text: "x" }),
      [{ type: "destroy" }],
      streamReply({ text: ["1", "2"] }),
    );
    for await (const _ of m.stream(request())) {
    }
    expect(armed.size).toBe(0);
    await expect(
      (async () => {
        for await (const _ of m.stream(request())) {
        }
      })(),
    ).rejects.toMatchObject({ kind: "network" });
    expect(armed.size).toBe(0);
    for await (const e of m.stream(request())) {
      if (e.type === "text.delta") break;
    }
    expect(armed.size).toBe(0);
  });
});
