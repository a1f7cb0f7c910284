import { createAnthropic } from "@ai-sdk/anthropic";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { AgentOptions } from "../actors/agent-options.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { ModelError } from "../contracts/model.ts";
import { classifyModelError } from "../machines/policies/retry-classify.ts";
import { aiSdkModel } from "../providers/ai-sdk-model.ts";
import type { EntryOf, LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";
import {
  anthropicError,
  anthropicMessage,
  blockEvents,
  messageStart,
} from "./support/anthropic-wire.ts";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "./support/fake-openai-server.ts";
import {
  anthropicWire,
  geminiWire,
  openaiResponsesWire,
  WIRES,
  type Wire,
} from "./support/provider-wires.ts";

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
    expect(await s.prompt("read a.txt and b.txt")).toMatchObject({
      status: "completed",
      text: "a and b read",
      steps: 2,
    });
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
    expect(await s.prompt("hi")).toMatchObject({ status: "completed", text: "after the wait" });
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
    expect(await s.prompt("read a.txt")).toMatchObject({ status: "completed", text: "done" });
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

  it("sends the session's instructions as the provider's system prompt, ahead of the history and on every request", async () => {
    server.enqueue(wire.calls([A], REASONING), wire.text("read"));
    const instructions = "You read files for the user. Answer in one line.";
    const { agent, session: s } = session(wire, { instructions });
    expect((await s.prompt("read a.txt")).status).toBe("completed");
    expect(server.requests).toHaveLength(2);
    for (const r of server.requests) {
      expect(wire.instructionsSent(r.body)).toBe(instructions);
      // Not repeated as a message of the conversation.
      expect(JSON.stringify(r.body).split(instructions)).toHaveLength(2);
    }
    expect(s.history().some((m) => m.role === "system")).toBe(false);
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
    expect(await s.prompt("hi")).toMatchObject({ status: "completed", text: "back", steps: 2 });
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

describe("aiSdkModel in the context budget", () => {
  it("publishes its window, reserve and a chars count, and refuses a reserve that does not fit the window", () => {
    const model = anthropicWire.model(server.baseURL, {
      contextWindow: 1000,
      maxOutputTokens: 100,
    });
    expect([model.contextWindow, model.maxOutputTokens]).toEqual([1000, 100]);
    expect(model.countTokens?.("abcdefgh")).toBe(2); // ⌈8 / 4⌉
    const defaults = anthropicWire.model(server.baseURL, { contextWindow: 8000 });
    expect(defaults.maxOutputTokens).toBe(2000); // min(4 096, a quarter of the window)
    expect(anthropicWire.model(server.baseURL).contextWindow).toBeUndefined();
    expect(() =>
      anthropicWire.model(server.baseURL, { contextWindow: 1000, maxOutputTokens: 1000 }),
    ).toThrow(/maxOutputTokens \(1000\) must be smaller than contextWindow \(1000\)/);
    expect(() => anthropicWire.model(server.baseURL, { contextWindow: 0 })).toThrow(
      /contextWindow must be a positive integer/,
    );
  });

  it("compacts automatically before a request over the threshold: the summary request has no tools, the next request carries the instructions, the summary and the new prompt", async () => {
    const long = "x".repeat(2400); // 600 tokens by the chars estimate
    server.enqueue(
      anthropicMessage([{ type: "text", text: long }], {
        usage: { input_tokens: 30, output_tokens: 600 },
      }),
      anthropicMessage([{ type: "text", text: "The user asked for a long note; it was written." }]),
      anthropicMessage([{ type: "text", text: "done" }]),
    );
    const instructions = "You write notes.";
    const agent = createAgent({
      model: anthropicWire.model(server.baseURL, { contextWindow: 1000, maxOutputTokens: 100 }),
      tools: tools(),
      instructions,
      context: { keepRecentTokens: 0 },
    });
    const s = agent.session("budget");
    const events: AgentEvent[] = [];
    s.subscribe((e) => {
      if (e.type === "context.compacted" || e.type === "context.measured") events.push(e);
    });
    expect(await s.prompt("write a long note")).toMatchObject({ status: "completed", text: long });
    // Trusted provider usage (630) + the reserve stays under 0.85 of the window: no compaction.
    expect(s.contextUsage()).toMatchObject({
      used: 630,
      window: 1000,
      reserve: 100,
      trusted: true,
    });
    expect(events.filter((e) => e.type === "context.compacted")).toEqual([]);
    const out = await s.prompt(`now this: ${"y".repeat(600)}`);
    expect(out).toMatchObject({ status: "completed", text: "done" });
    expect(server.requests).toHaveLength(3);
    const [, summary, next] = server.requests.map((r) => r.body);
    // The summarizer's request: the history to summarise, no tools.
    expect(summary.tools).toBeUndefined();
    expect(JSON.stringify(summary.messages)).toContain(long);
    // The next request: instructions, the summary and the new prompt, not the replaced text.
    // The summary is a system note (the harness's, not the user's): Anthropic's `system` holds
    // it after the instructions.
    expect((next.system as unknown[])[0]).toEqual({ type: "text", text: instructions });
    expect(JSON.stringify(next.system)).toContain(
      "The user asked for a long note; it was written.",
    );
    expect(next.max_tokens).toBe(100); // the reserve is what the request asks for
    const sent = JSON.stringify(next.messages);
    expect(sent).not.toContain("The user asked for a long note");
    expect(sent).not.toContain(long);
    expect(events.find((e) => e.type === "context.compacted")).toMatchObject({
      mode: "auto",
      ok: true,
    });
    // Measured over the threshold before the second turn's request (630 trusted + the prompt).
    expect(events.filter((e) => e.type === "context.measured").at(-1)).toMatchObject({
      trusted: true,
      used: 630 + 3 + Math.ceil(610 / 4),
    });
    const compacted = events.find((e) => e.type === "context.compacted") as {
      tokensBefore: number;
      tokensAfter: number;
    };
    expect(compacted.tokensAfter).toBeLessThan(compacted.tokensBefore);
    expect(s.entries().filter((e) => e.type === "compaction")).toHaveLength(1);
    await agent.close();
  });
});

const of = <K extends LogEntry["type"]>(entries: readonly LogEntry[], type: K) =>
  entries.filter((e): e is EntryOf<K> => e.type === type);

describe("aiSdkModel and image URLs: the model's own supportedUrls decide", () => {
  it("an image URL the model does not take is refused by prompt(), steer() and followUp() before any request, logging nothing, and the error says to send the bytes", async () => {
    // @ai-sdk/google takes its Files API URLs, YouTube, and https URLs of listed media types.
    const { agent, session: s } = session(geminiWire);
    await s.ready;
    const text = { type: "text" as const, text: "what is this?" };
    const untyped = { type: "image" as const, image: "https://example.com/cat.png" };
    await expect(s.prompt([text, untyped])).rejects.toThrow(
      'session.prompt: part 1: the model "google.generative-ai:gemini-loopback" does not take the image URL "https://example.com/cat.png": google.generative-ai takes image/* URLs matching',
    );
    // Without a media type, only the Files API pattern applies; the error says what would work.
    await expect(s.prompt([text, untyped])).rejects.toThrow(
      /only \(with its mediaType given, image\/png or image\/jpeg or image\/webp, it would take this one\); send the image's bytes instead/,
    );
    const plainHttp = {
      type: "image" as const,
      image: new URL("http://example.com/cat.png"),
      mediaType: "image/png",
    };
    await expect(s.steer([plainHttp])).rejects.toThrow(
      /session\.steer: part 0: .*"http:\/\/example\.com\/cat\.png": google\.generative-ai takes image\/png URLs matching .*\^https:.* only; send the image's bytes/,
    );
    await expect(s.followUp([text, plainHttp])).rejects.toThrow(/session\.followUp: part 1: /);
    await new Promise((r) => setTimeout(r, 50));
    expect(server.requests).toHaveLength(0);
    expect(s.entries()).toHaveLength(0);
    await agent.close();
  });

  it.each([
    {
      wire: anthropicWire,
      image: { type: "image" as const, image: "https://example.com/cat.png" },
      sent: [{ type: "image", source: { type: "url", url: "https://example.com/cat.png" } }],
    },
    {
      wire: openaiResponsesWire,
      image: { type: "image" as const, image: "http://example.com/cat.png" },
      sent: [{ type: "input_image", image_url: "http://example.com/cat.png" }],
    },
    {
      wire: geminiWire,
      image: {
        type: "image" as const,
        image: "https://example.com/cat.png",
        mediaType: "image/png",
      },
      sent: [{ fileData: { mimeType: "image/png", fileUri: "https://example.com/cat.png" } }],
    },
  ])(
    "an image URL $wire.kind takes is sent as that URL, not downloaded",
    async ({ wire, image, sent }) => {
      server.enqueue(wire.text("a cat"));
      const { agent, session: s } = session(wire);
      expect(await s.prompt([{ type: "text", text: "what is this?" }, image])).toMatchObject({
        status: "completed",
        text: "a cat",
      });
      expect(server.requests).toHaveLength(1);
      expect(wire.imagesSent(server.requests[0].body)).toMatchObject(sent);
      await agent.close();
    },
  );

  it("Gemini takes its own Files API URL whatever the media type", async () => {
    server.enqueue(geminiWire.text("a file"));
    const { agent, session: s } = session(geminiWire);
    const fileUri = `${server.baseURL}/files/abc-123`;
    const out = await s.prompt([
      { type: "text", text: "and this?" },
      { type: "image", image: fileUri },
    ]);
    expect(out.status).toBe("completed");
    expect(geminiWire.imagesSent(server.requests[0].body)).toMatchObject([
      { fileData: { fileUri } },
    ]);
    await agent.close();
  });

  it("a request whose history holds an image URL the model does not take fails before it is sent, and is not retried", async () => {
    // E.g. a session logged with a model that took the URL, reopened with one that does not.
    const model = geminiWire.model(server.baseURL);
    const stream = model.stream({
      messages: [
        { role: "user", content: [{ type: "image", url: "https://example.com/cat.png" }] },
      ],
      tools: [],
      signal: new AbortController().signal,
      attemptId: "t1:a1",
    });
    const error = await (async () => {
      try {
        for await (const _ of stream);
      } catch (err) {
        return err;
      }
    })();
    expect(error).toBeInstanceOf(ModelError);
    expect((error as Error).message).toMatch(
      /history holds an image URL the model cannot take \("https:\/\/example\.com\/cat\.png": .*\); nothing was sent\. Send the image's bytes instead/,
    );
    expect(classifyModelError(error)).toMatchObject({ retryable: false, category: "bad_request" });
    expect(server.requests).toHaveLength(0);
  });
  it("with supportedUrls as a promise, an image URL accepted before it settles still never reaches the server, and once settled prompt() refuses it", async () => {
    const base = createAnthropic({ baseURL: server.baseURL, apiKey: "test-key" })(
      "claude-loopback",
    );
    let settle!: (urls: Record<string, RegExp[]>) => void;
    const promised = new Promise<Record<string, RegExp[]>>((r) => {
      settle = r;
    });
    // The real model, with a supportedUrls the spec allows: a promise (here: no URL at all).
    const languageModel = Object.create(base, { supportedUrls: { value: promised } });
    const { agent, session: s } = session(anthropicWire, { model: aiSdkModel(languageModel) });
    const image = [{ type: "image" as const, image: "https://example.com/cat.png" }];
    const turn = s.prompt(image);
    setTimeout(() => settle({}), 20);
    expect(await turn).toMatchObject({
      status: "failed",
      reason: expect.stringMatching(/image URL the model cannot take .*nothing was sent/),
    });
    expect(server.requests).toHaveLength(0);
    await expect(s.prompt(image)).rejects.toThrow(/anthropic\.messages takes no image\/\* URL/);
    await agent.close();
  });
});

describe("aiSdkModel over anthropic: Continue from the text received (assistant prefill)", () => {
  it("a stream cut mid-answer is continued: the next request ends with the received text as the assistant's message, without its trailing space, and the committed message is that text plus the continuation", async () => {
    const answer = { type: "text" as const, text: "The answer is 42, as computed." };
    server.enqueue(
      // start, then "The ans" + "wer is " (7-char deltas): a cut after a space
      [messageStart(), ...blockEvents(0, answer, 7).slice(0, 3), { type: "destroy" }],
      anthropicMessage([{ type: "text", text: " 42, as computed." }]),
    );
    const { agent, session: s, events } = session(anthropicWire);
    expect(await s.prompt("what is it?")).toMatchObject({
      status: "completed",
      text: "The answer is 42, as computed.",
    });
    expect(server.requests).toHaveLength(2);
    const [first, second] = server.requests.map((r) => r.body.messages as unknown[]);
    expect(second.slice(0, -1)).toEqual(first);
    expect(second.at(-1)).toEqual({
      role: "assistant",
      content: [{ type: "text", text: "The answer is" }],
    });
    const entries = s.entries();
    const [a1, a2] = of(entries, "attempt_start");
    expect(of(entries, "attempt_end")[0]).toMatchObject({ partialText: "The answer is " });
    expect(a2.recovery).toEqual({ mode: "continue", from: a1.attemptId, prefixChars: 14 });
    expect(of(entries, "assistant_message")).toMatchObject([
      {
        content: [{ type: "text", text: "The answer is 42, as computed." }],
        continuation: { from: a1.attemptId, prefixChars: 14 },
      },
    ]);
    expect(s.messages().at(-1)).toEqual({
      role: "assistant",
      content: "The answer is 42, as computed.",
    });
    // What was streamed reads as what was committed: the continuation's leading space dropped.
    const streamed = events.filter((e) => e.type === "text.streamed").map((e) => e.text);
    expect(streamed.join("")).toBe("The answer is 42, as computed.");
    expect(events.find((e) => e.type === "retry.scheduled")).toMatchObject({ mode: "continue" });
    await agent.close();
  });

  it("a cut after whitespace only sends no empty prefill (Anthropic refuses an empty text block): the same messages again, and the whitespace is kept", async () => {
    const answer = { type: "text" as const, text: "\n\nHere it is." };
    server.enqueue(
      [messageStart(), ...blockEvents(0, answer, 2).slice(0, 2), { type: "destroy" }], // "\n\n"
      anthropicMessage([{ type: "text", text: "\n\nHere it is." }]),
    );
    const { agent, session: s } = session(anthropicWire);
    expect(await s.prompt("and?")).toMatchObject({ status: "completed", text: "\n\nHere it is." });
    expect(server.requests).toHaveLength(2);
    expect(server.requests[1].body.messages).toEqual(server.requests[0].body.messages);
    expect(of(s.entries(), "assistant_message")[0].continuation).toMatchObject({ prefixChars: 2 });
    await agent.close();
  });

  it("declares the capability for Anthropic only: not with extended thinking, not when turned off, not for the Responses API or Gemini unless asked", () => {
    const cap = (m: { capabilities?: { continueFromPartial?: boolean } }) =>
      m.capabilities?.continueFromPartial === true;
    const url = server.baseURL;
    expect(cap(anthropicWire.model(url))).toBe(true);
    const thinking = { anthropic: { thinking: { type: "enabled", budgetTokens: 2048 } } };
    expect(cap(anthropicWire.model(url, { providerOptions: thinking }))).toBe(false);
    expect(cap(anthropicWire.model(url, { continueFromPartial: false }))).toBe(false);
    expect(cap(openaiResponsesWire.model(url))).toBe(false);
    expect(cap(geminiWire.model(url))).toBe(false);
    expect(cap(geminiWire.model(url, { continueFromPartial: true }))).toBe(true);
  });

  it("without the capability a cut answer falls back to Retry as before: the same request again, the partial text dropped, and the event says why", async () => {
    const answer = { type: "text" as const, text: "The answer is 42, as computed." };
    server.enqueue(
      [messageStart(), ...blockEvents(0, answer, 7).slice(0, 3), { type: "destroy" }],
      anthropicMessage([{ type: "text", text: "It is 42." }]),
    );
    const {
      agent,
      session: s,
      events,
    } = session(anthropicWire, {
      model: anthropicWire.model(server.baseURL, { continueFromPartial: false }),
    });
    expect(await s.prompt("what is it?")).toMatchObject({ status: "completed", text: "It is 42." });
    expect(server.requests).toHaveLength(2);
    expect(server.requests[1].body.messages).toEqual(server.requests[0].body.messages);
    expect(events.find((e) => e.type === "retry.scheduled")).toMatchObject({
      mode: "retry",
      fallback: expect.stringMatching(/cannot continue from a partial answer/),
    });
    expect(of(s.entries(), "assistant_message")[0].continuation).toBeUndefined();
    await agent.close();
  });
});
