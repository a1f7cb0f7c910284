import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { type AgentOptions, createAgent } from "../actors/agent.ts";
import type { AgentEvent } from "../contracts/events.ts";
import type { LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";
import { anthropicError, anthropicMessage } from "./support/anthropic-wire.ts";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "./support/fake-openai-server.ts";
import { anthropicWire, WIRES, type Wire } from "./support/provider-wires.ts";

// Every scenario runs the real provider package (@ai-sdk/anthropic, @ai-sdk/openai Responses,
// @ai-sdk/google) against a loopback server speaking its documented wire format, and checks
// what the server received. Expectations come from the replies the test wrote, not from Keel.

let server: FakeOpenAIServer;
beforeEach(async () => {
  server = await startFakeOpenAIServer();
});
afterEach(async () => {
  await server.close();
});

/** `slow` settles after `fast` (completion order B, A), both safe to run in parallel. */
function tools() {
  return [
    defineTool({
      name: "slow",
      description: "Reads a file slowly.",
      parameters: z.object({ path: z.string() }),
      traits: { concurrencySafe: true, readOnly: true },
      execute: async ({ path }) => {
        await new Promise((r) => setTimeout(r, 80));
        return `slow read ${path}`;
      },
    }),
    defineTool({
      name: "fast",
      description: "Reads a file fast.",
      parameters: z.object({ path: z.string() }),
      traits: { concurrencySafe: true, readOnly: true },
      execute: async ({ path }) => `fast read ${path}`,
    }),
  ];
}

function session(wire: Wire, options: Partial<AgentOptions> = {}) {
  const agent = createAgent({
    model: wire.model(server.baseURL),
    tools: tools(),
    retry: { baseDelayMs: 5, maxDelayMs: 10 },
    ...options,
  });
  const s = agent.session("s");
  const events: AgentEvent[] = [];
  s.subscribe((e) => events.push(e));
  return { agent, session: s, events };
}

const A = { id: "call_slow_1", name: "slow", args: '{"path":"a.txt"}' };
const B = { id: "call_fast_2", name: "fast", args: '{"path":"b.txt"}' };
// Opaque provider tokens with characters a careless re-encoding would change.
const REASONING = {
  text: "Both files are independent — read them in parallel.\n  (ünïcode ✓)",
  token: 'EqQBCkYIARgCKkD+/=sig\\u00e9 "quoted" ✓ end==',
};

describe.each(WIRES)("aiSdkModel over $kind", (wire) => {
  it("runs parallel calls, commits their results in call order paired with their ids, and sends the reasoning back byte for byte", async () => {
    server.enqueue(wire.calls([A, B], REASONING), wire.text("a and b read"));
    const { agent, session: s, events } = session(wire);
    expect(await s.prompt("read a.txt and b.txt")).toEqual({ status: "completed" });
    expect(server.requests).toHaveLength(2);
    const settled = events.filter((e) => e.type === "call.settled").map((e) => e.name);
    expect(settled).toEqual(["fast", "slow"]); // completion order
    const second = server.requests[1].body;
    expect(wire.toolResults(second)).toEqual([
      { ref: wire.ref(A), content: "slow read a.txt" },
      { ref: wire.ref(B), content: "fast read b.txt" },
    ]);
    expect(wire.reasoningSent(second)).toEqual(wire.reasoningExpected(REASONING));
    const assistant = s.history()[1];
    expect(assistant.role).toBe("assistant");
    expect(assistant.content[0]).toMatchObject({ type: "reasoning", text: REASONING.text });
    expect(s.messages().at(-1)).toEqual({ role: "assistant", content: "a and b read" });
    await agent.close();
  });

  it("waits for a 429's retry-after, then retries once", async () => {
    server.enqueue(wire.rateLimited(1), wire.text("after the wait"));
    const { agent, session: s, events } = session(wire);
    expect(await s.prompt("hi")).toEqual({ status: "completed" });
    expect(server.requests).toHaveLength(2);
    const gap = server.requests[1].at - server.requests[0].at;
    expect(gap).toBeGreaterThanOrEqual(950); // the local backoff is 5–10 ms
    const retry = events.find((e) => e.type === "retry.scheduled");
    // The header's 1 s, less the time since it was read (the wait is converted to a deadline once).
    expect(retry).toMatchObject({ mode: "retry", delayMs: expect.any(Number) });
    const delay = (retry as { delayMs: number }).delayMs;
    expect(delay).toBeGreaterThan(900);
    expect(delay).toBeLessThanOrEqual(1000);
    await agent.close();
  });

  it("classifies the provider's 400 context-length error as overflow and does not retry it", async () => {
    server.enqueue(wire.overflow(), wire.text("never sent"));
    const { agent, session: s } = session(wire);
    const out = await s.prompt("a very long prompt");
    expect(out.status).toBe("failed");
    expect(out.reason).toMatch(/context overflow/);
    await new Promise((r) => setTimeout(r, 50));
    expect(server.requests).toHaveLength(1);
    await agent.close();
  });

  it("a stream cut mid tool input keeps the partial call out of the conversation and continues with a new request", async () => {
    server.enqueue(wire.cutMidToolInput(A, 9), wire.calls([A], REASONING), wire.text("done"));
    const { agent, session: s } = session(wire);
    expect(await s.prompt("read a.txt")).toEqual({ status: "completed" });
    expect(server.requests).toHaveLength(3);
    const ends = s.entries().filter((e) => e.type === "attempt_end") as Extract<
      LogEntry,
      { type: "attempt_end" }
    >[];
    expect(ends[0].status).toBe("interrupted");
    expect(ends[0].error).toMatch(/cut|terminated|closed|socket/i);
    // What the second request sent: the user's message only, nothing of the cut attempt.
    expect(wire.toolResults(server.requests[1].body)).toEqual([]);
    expect(wire.toolResults(server.requests[2].body)).toEqual([
      { ref: wire.ref(A), content: "slow read a.txt" },
    ]);
    await agent.close();
  });

  it("an interrupt mid stream aborts the request (the server sees the connection close) and sends nothing more", async () => {
    server.enqueue(wire.hangAfterText("Thinking about it"));
    const { agent, session: s } = session(wire);
    s.subscribe((e) => {
      if (e.type === "text.streamed") s.interrupt("the user pressed stop");
    });
    const out = await s.prompt("start");
    expect(out.status).toBe("cancelled");
    await new Promise((r) => setTimeout(r, 50));
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0].aborted).toBe(true);
    await agent.close();
  });

  it("sends a user image given as bytes in the provider's image format", async () => {
    server.enqueue(wire.text("a red pixel"));
    const { agent, session: s } = session(wire);
    const png = Buffer.from(
      "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==",
      "base64",
    );
    const out = await s.prompt([
      { type: "text", text: "What is this?" },
      { type: "image", image: png },
    ]);
    expect(out.status).toBe("completed");
    const images = JSON.stringify(wire.imagesSent(server.requests[0].body));
    expect(images).toContain(png.toString("base64"));
    expect(images).toContain("image/png");
    await agent.close();
  });
});

describe("aiSdkModel over anthropic: overload", () => {
  it("retries Anthropic's 529 overloaded_error (one layer of retries: two requests in all)", async () => {
    server.enqueue(
      anthropicError(529, "overloaded_error", "Overloaded"),
      anthropicMessage([{ type: "text", text: "back" }]),
    );
    const { agent, session: s, events } = session(anthropicWire);
    expect(await s.prompt("hi")).toEqual({ status: "completed" });
    expect(server.requests).toHaveLength(2);
    expect(events.find((e) => e.type === "retry.scheduled")).toMatchObject({
      reason: expect.stringMatching(/overloaded.*HTTP 529/),
    });
    await agent.close();
  });

  it("reports usage with cached input tokens", async () => {
    server.enqueue(
      anthropicMessage([{ type: "text", text: "hi" }], {
        usage: { input_tokens: 40, output_tokens: 7, cache_read_input_tokens: 960 },
      }),
    );
    const { agent, session: s } = session(anthropicWire);
    await s.prompt("hi");
    const message = s.entries().find((e) => e.type === "assistant_message");
    expect(message).toMatchObject({
      usage: { inputTokens: 1000, outputTokens: 7, cachedInputTokens: 960 },
    });
    await agent.close();
  });
});
