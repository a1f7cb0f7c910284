// Durations of 2^31 ms or more fire at once in Node (issue 27, finding 6): every duration option
// is checked at the API and the protocol, and Infinity means "no timer".
import { PassThrough } from "node:stream";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { serve } from "../cli/serve/server.ts";
import { checkDuration, MAX_TIMER_MS, systemClock } from "../contracts/clock.ts";
import type { ServerFrame } from "../contracts/protocol.ts";
import { memoryStore, scriptedModel } from "../index.ts";
import { resolveRetryPolicy } from "../machines/policies/retry-policy.ts";
import { openaiModel } from "../providers/openai-model.ts";

const TOO_LONG = 2 ** 31;

describe("every duration is at most 2^31 − 1 ms, or Infinity for none", () => {
  it("limits.deadlineMs of Infinity means no deadline: the turn completes (it ended budget_exhausted at once)", async () => {
    const agent = createAgent({
      model: scriptedModel([{ text: "done", delayMs: 30 }]),
      limits: { deadlineMs: Number.POSITIVE_INFINITY },
    });
    const session = await agent.openSession();
    expect((await session.prompt("go")).status).toBe("completed");
    await agent.close();
  });

  it("retry.operationDeadlineMs of Infinity means no deadline: the request runs (it was aborted at once as budget_exhausted)", async () => {
    const agent = createAgent({
      model: scriptedModel([{ text: "done", delayMs: 30 }]),
      retry: { operationDeadlineMs: Number.POSITIVE_INFINITY },
    });
    const session = await agent.openSession();
    expect((await session.prompt("go")).status).toBe("completed");
    await agent.close();
  });

  it("2^31 ms is refused at createAgent, the retry policy and the providers with an error that names the option and the limit", () => {
    const model = scriptedModel([]);
    expect(() => createAgent({ model, limits: { deadlineMs: TOO_LONG } })).toThrow(
      /limits\.deadlineMs.*2147483647.*got 2147483648/,
    );
    expect(() => createAgent({ model, stopDeadlineMs: TOO_LONG })).toThrow(/stopDeadlineMs/);
    expect(() => createAgent({ model, finalizeDeadlineMs: TOO_LONG })).toThrow(
      /finalizeDeadlineMs/,
    );
    expect(() => resolveRetryPolicy({ operationDeadlineMs: TOO_LONG })).toThrow(
      /operationDeadlineMs.*2147483647/,
    );
    expect(
      resolveRetryPolicy({ operationDeadlineMs: Number.POSITIVE_INFINITY }).operationDeadlineMs,
    ).toBeUndefined();
    expect(resolveRetryPolicy({ maxDelayMs: Number.POSITIVE_INFINITY }).maxDelayMs).toBe(
      MAX_TIMER_MS,
    );
    expect(() => openaiModel({ model: "gpt-4o", apiKey: "k", idleTimeoutMs: TOO_LONG })).toThrow(
      /idleTimeoutMs/,
    );
    expect(checkDuration("x", MAX_TIMER_MS)).toBe(MAX_TIMER_MS);
  });

  it("the system clock never fires a longer timer at once", async () => {
    let fired = false;
    const handle = systemClock.setTimeout(() => {
      fired = true;
    }, Number.POSITIVE_INFINITY);
    await new Promise((r) => setTimeout(r, 30));
    systemClock.clearTimeout(handle);
    expect(fired).toBe(false);
  });

  it("serve refuses a permission or client-tool timeoutMs of 2^31 ms (they denied and failed at once)", async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    const frames: ServerFrame[] = [];
    let buffer = "";
    output.on("data", (c: Buffer) => {
      buffer += c.toString("utf8");
      const lines = buffer.split("\n");
      buffer = lines.pop() ?? "";
      for (const l of lines) frames.push(JSON.parse(l));
    });
    const server = serve({
      input,
      output,
      store: memoryStore(),
      model: () => scriptedModel([]),
      logger: pino({ level: "silent" }),
      version: "t",
    });
    const send = (f: object) => input.write(`${JSON.stringify(f)}\n`);
    send({ type: "hello", protocol: "1.0" });
    send({ type: "session.open", id: 1, permissions: { timeoutMs: TOO_LONG } });
    send({
      type: "session.open",
      id: 2,
      tools: [
        {
          name: "t",
          description: "t",
          parameters: { type: "object", properties: {} },
          timeoutMs: TOO_LONG,
        },
      ],
    });
    await new Promise((r) => setTimeout(r, 200));
    expect(frames.find((f) => "id" in f && f.id === 1)).toMatchObject({
      type: "error",
      code: "INVALID_FRAME",
      message: expect.stringMatching(/timeoutMs must be an integer from 1 to 2147483647/),
    });
    expect(frames.find((f) => "id" in f && f.id === 2)).toMatchObject({
      type: "error",
      code: "INVALID_TOOL",
      message: expect.stringMatching(/2147483647/),
    });
    expect(() =>
      serve({
        input,
        output,
        store: memoryStore(),
        model: () => scriptedModel([]),
        logger: pino({ level: "silent" }),
        version: "t",
        controlTimeoutMs: TOO_LONG,
      }),
    ).toThrow(/controlTimeoutMs/);
    await server.shutdown("test over");
  });
});
