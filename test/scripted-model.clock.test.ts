import { describe, expect, it } from "vitest";
import { SimulatedClock } from "xstate";
import { systemClock } from "../contracts/clock.ts";
import { ModelError, type ModelEvent, type ModelRequest } from "../contracts/model.ts";
import { type ScriptStep, scriptedModel } from "../providers/scripted-model.ts";

const request = (signal: AbortSignal): ModelRequest => ({
  messages: [],
  tools: [],
  signal,
  attemptId: "att_1",
});
/** Lets pending promise callbacks run (no timers involved). */
const flush = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};
function start(step: ScriptStep, options: { realClock?: boolean } = {}) {
  const clock = new SimulatedClock();
  const controller = new AbortController();
  const model = scriptedModel([step], { clock: options.realClock ? systemClock : clock });
  const iterator = model.stream(request(controller.signal))[Symbol.asyncIterator]();
  return { clock, controller, iterator };
}
/** Tracks a promise's state without awaiting it. */
function track<T>(p: Promise<T>) {
  const state: { settled: boolean; value?: T; error?: unknown } = { settled: false };
  p.then(
    (value) => Object.assign(state, { settled: true, value }),
    (error) => Object.assign(state, { settled: true, error }),
  );
  return state;
}

describe("scripted model on a clock", () => {
  it("waits delayMs on the injected clock before the first chunk", async () => {
    const { clock, iterator } = start({ text: "hi", delayMs: 1000 });
    const first = track(iterator.next());
    await flush();
    clock.increment(999);
    await flush();
    expect(first.settled).toBe(false);
    clock.increment(1);
    await flush();
    expect(first.value).toEqual({ done: false, value: { type: "text.delta", text: "hi" } });
  });

  it("waits chunkDelayMs between chunks but not before the first", async () => {
    const { clock, iterator } = start({ text: "abc", chunkSize: 1, chunkDelayMs: 50 });
    expect((await iterator.next()).value).toEqual({ type: "text.delta", text: "a" });
    const second = track(iterator.next());
    await flush();
    expect(second.settled).toBe(false);
    clock.increment(50);
    await flush();
    expect((second.value as IteratorResult<ModelEvent>).value).toEqual({
      type: "text.delta",
      text: "b",
    });
  });

  it("throws a delayed error step only after its delay", async () => {
    const { clock, iterator } = start({ error: { status: 503 }, delayMs: 200 });
    const first = track(iterator.next());
    await flush();
    expect(first.settled).toBe(false);
    clock.increment(200);
    await flush();
    expect(first.error).toMatchObject({ kind: "http", status: 503 });
  });

  it("rejects with an aborted ModelError when aborted during a delay, and cancels the timer", async () => {
    const { clock, controller, iterator } = start({ text: "hi", delayMs: 10_000 });
    const first = track(iterator.next());
    await flush();
    controller.abort(new Error("user interrupt"));
    await flush();
    expect(first.error).toBeInstanceOf(ModelError);
    expect(first.error).toMatchObject({ kind: "aborted" });
    clock.increment(10_000); // the cancelled timer must not fire into a finished generator
    await flush();
  });

  it("a hanging step produces nothing, whatever the time, until aborted (simulated clock)", async () => {
    const { clock, controller, iterator } = start({ text: "never", hang: true });
    const first = track(iterator.next());
    await flush();
    clock.increment(3_600_000);
    await flush();
    expect(first.settled).toBe(false);
    controller.abort();
    await flush();
    expect(first.error).toMatchObject({
      kind: "aborted",
      message: expect.stringContaining("aborted"),
    });
  });

  it("a hanging step rejects promptly when aborted (real clock)", async () => {
    const { controller, iterator } = start({ text: "never", hang: true }, { realClock: true });
    const first = iterator.next();
    await flush();
    controller.abort();
    await expect(first).rejects.toMatchObject({ name: "ModelError", kind: "aborted" });
  });

  it("a real-clock delay is abortable before it elapses", async () => {
    const { controller, iterator } = start({ text: "x", delayMs: 60_000 }, { realClock: true });
    const first = iterator.next();
    await flush();
    controller.abort();
    await expect(first).rejects.toMatchObject({ kind: "aborted" });
  });

  it("hangAfter streams that many chunks and then idles until aborted", async () => {
    const { clock, controller, iterator } = start({ text: "abcd", chunkSize: 1, hangAfter: 2 });
    expect((await iterator.next()).value).toEqual({ type: "text.delta", text: "a" });
    expect((await iterator.next()).value).toEqual({ type: "text.delta", text: "b" });
    const third = track(iterator.next());
    clock.increment(60_000);
    await flush();
    expect(third.settled).toBe(false);
    controller.abort();
    await flush();
    expect(third.error).toMatchObject({ kind: "aborted" });
  });

  it("an already-aborted signal fails the request before any step is consumed", async () => {
    const controller = new AbortController();
    controller.abort();
    const model = scriptedModel([{ text: "a" }]);
    const it = model.stream(request(controller.signal))[Symbol.asyncIterator]();
    await expect(it.next()).rejects.toMatchObject({ kind: "aborted" });
  });

  it("an abort between chunks stops the stream at the next chunk", async () => {
    const { controller, iterator } = start({ text: "abc", chunkSize: 1 });
    await iterator.next();
    controller.abort();
    await expect(iterator.next()).rejects.toMatchObject({ kind: "aborted" });
  });
});
