import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import { openaiModel } from "../providers/openai-model.ts";
import {
  type FakeOpenAIServer,
  neverAnswer,
  stallAfterText,
  startFakeOpenAIServer,
} from "./support/fake-openai-server.ts";

let server: FakeOpenAIServer;
beforeEach(async () => {
  server = await startFakeOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

describe("the operation deadline bounds the request in flight (real timers, real HTTP)", () => {
  for (const [name, reply] of [
    ["a server that never answers", neverAnswer()],
    ["a stream that stalls after some text", stallAfterText("let me think ")],
  ] as const) {
    it(`${name}: the request is aborted at operationDeadlineMs and the turn ends budget_exhausted`, async () => {
      server.enqueue(reply);
      const model = openaiModel({
        model: "fake-model",
        contextWindow: 32_768,
        baseURL: server.baseURL,
        // The transport's own timeouts are far away: only the operation deadline can end this.
        firstChunkTimeoutMs: 60_000,
        idleTimeoutMs: 60_000,
      });
      const session = createAgent({ model, retry: { operationDeadlineMs: 400 } }).session();
      const started = performance.now();
      const out = await session.prompt("hi");
      const took = performance.now() - started;
      expect(out.status).toBe("budget_exhausted");
      expect(out.reason).toMatch(/operationDeadlineMs 400.*in flight/);
      expect(took).toBeGreaterThanOrEqual(390);
      expect(took).toBeLessThan(10_000);
      expect(server.requests).toHaveLength(1);
      // Whatever text arrived is not an answer: nothing reached the model's history.
      expect(session.messages().filter((m) => m.role === "assistant")).toEqual([]);
    }, 15_000);
  }
});
