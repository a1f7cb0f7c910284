// Invariant 21 of docs/architecture.md, by example (issue 40): results that are over the window
// only together share its room, and a model's input limit below its window is never exceeded.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { Message } from "../contracts/messages.ts";
import type { ModelRequest } from "../contracts/model.ts";
import { estimateTextTokens, requestTokens } from "../contracts/tokens.ts";
import { type RecordedRequest, scriptedModel } from "../providers/scripted-model.ts";
import { defineTool } from "../tools/define-tool.ts";

const asksSummary = (messages: readonly Message[]) => {
  const last = messages.at(-1);
  return (
    last?.role === "user" &&
    last.content.some((p) => p.type === "text" && p.text.startsWith("Summarise the conversation"))
  );
};
const isSummary = (r: ModelRequest) => asksSummary(r.messages);
const sentTokens = (r: RecordedRequest) =>
  requestTokens(
    { instructions: r.instructions, messages: r.history, tools: r.tools },
    estimateTextTokens,
  );

/** The first request (not a summary's) that carries the tool results. */
const withResults = (requests: readonly RecordedRequest[]) =>
  requests.find((r) => !asksSummary(r.history) && r.history.some((m) => m.role === "tool"))!;

const read = defineTool({
  name: "read",
  description: "reads a part",
  parameters: z.object({ n: z.number() }),
  traits: { readOnly: true },
  execute: ({ n }) => `${n}`.repeat(3500),
});

/** A model that reads six parts of ~875 tokens at once, then answers. */
function sixReads(options: { contextWindow: number; maxInputTokens?: number }) {
  let step = 0;
  return scriptedModel(
    (request) =>
      isSummary(request)
        ? { text: "short summary" }
        : step++ === 0
          ? {
              toolCalls: [1, 2, 3, 4, 5, 6].map((n) => ({
                id: `c${n}`,
                name: "read",
                arguments: JSON.stringify({ n }),
              })),
            }
          : { text: "done" },
    options,
  );
}

describe("results of one batch share the room", () => {
  it("six results of ~875 tokens in a 4 000-token window: the prompt completes, and so does the next (both failed with an overflow)", async () => {
    const model = sixReads({ contextWindow: 4000 });
    const agent = createAgent({ model, tools: [read] });
    const session = await agent.openSession("six");
    const first = await session.prompt("read all six");
    expect(first.status, first.reason).toBe("completed");
    const second = await session.prompt("and now?");
    expect(second.status, second.reason).toBe("completed");
    const room = 4000 - 500;
    for (const r of model.requests) expect(sentTokens(r)).toBeLessThanOrEqual(room);
    // The largest were offloaded, not all: the model is told which, and how many of the step.
    const results = withResults(model.requests).history.filter((m) => m.role === "tool");
    const texts = results.map((m) => (m.role === "tool" ? m.content[0].content : ""));
    const cut = texts.filter((t) => t.startsWith("[result offloaded"));
    expect(cut.length).toBeGreaterThan(0);
    expect(cut.length).toBeLessThan(6);
    for (const t of cut) expect(t).toContain(`(${cut.length} of 6 results of this step)`);
    // The log keeps every whole result.
    const logged = session.entries().filter((e) => e.type === "call_result");
    expect(logged).toHaveLength(6);
    await agent.close();
  });

  it("with read_result on, an offloaded result names the call that reads it whole", async () => {
    const model = sixReads({ contextWindow: 4000 });
    const agent = createAgent({ model, tools: [read], context: { readResultTool: true } });
    const session = await agent.openSession("six-read");
    expect((await session.prompt("read all six")).status).toBe("completed");
    const tool = withResults(model.requests).history.find(
      (m) => m.role === "tool" && m.content[0].content.startsWith("[result offloaded"),
    );
    expect(tool && tool.role === "tool" ? tool.content[0].content : "").toMatch(
      /read_result \{"id":"[^"]+"\} reads the whole/,
    );
    await agent.close();
  });
});

describe("an input limit below the window", () => {
  it("a model that takes 1 500 input tokens of an 8 000 window never gets a request over 1 500 (it refused them)", async () => {
    const model = sixReads({ contextWindow: 8000, maxInputTokens: 1500 });
    expect(model.maxInputTokens).toBe(1500);
    const agent = createAgent({ model, tools: [read] });
    const session = await agent.openSession("input-limit");
    const first = await session.prompt("read all six");
    expect(first.status, first.reason).toBe("completed");
    expect((await session.prompt("and now?")).status).toBe("completed");
    for (const r of model.requests) {
      if (!asksSummary(r.history)) expect(sentTokens(r)).toBeLessThanOrEqual(1500);
    }
    await agent.close();
  });
});
