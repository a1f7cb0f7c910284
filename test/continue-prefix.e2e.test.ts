import { afterEach, describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { openaiModel } from "../providers/openai-model.ts";
import type { EntryOf, LogEntry } from "../session/entries.ts";
import {
  chunk,
  cutAfterText,
  type FakeOpenAIServer,
  type RecordedRequest,
  startFakeOpenAIServer,
  streamReply,
} from "./support/fake-openai-server.ts";

const of = <K extends LogEntry["type"]>(entries: readonly LogEntry[], type: K) =>
  entries.filter((e): e is EntryOf<K> => e.type === type);

type Msg = { role: string; content?: unknown; prefix?: unknown };
const messagesOf = (r: RecordedRequest) => (r.body.messages ?? []) as Msg[];
const endsWithAssistant = (r: RecordedRequest) => messagesOf(r).at(-1)?.role === "assistant";

/**
 * vLLM's OpenAI-compatible server, as its protocol documents it: `continue_final_message` and
 * `add_generation_prompt` (default true) cannot both be true; a final assistant message is
 * continued only with `continue_final_message` (otherwise the template opens a new message,
 * which this strict copy refuses so that a wrong request cannot pass for a continuation).
 */
function vllmWire(r: RecordedRequest): string | undefined {
  const cont = r.body.continue_final_message === true;
  const gen = r.body.add_generation_prompt !== false;
  if (cont && gen) return "continue_final_message and add_generation_prompt cannot both be true";
  if (cont && !endsWithAssistant(r))
    return "continue_final_message is set but the last message is not the assistant's";
  if (endsWithAssistant(r) && !cont)
    return "the last message is the assistant's but continue_final_message is not set";
  return undefined;
}

/**
 * DeepSeek's chat prefix completion (beta), as its guide documents it: the base URL ends with
 * `/beta`, the last message is the assistant's and carries `prefix: true`; no other message does.
 */
function deepseekWire(r: RecordedRequest): string | undefined {
  const msgs = messagesOf(r);
  if (msgs.slice(0, -1).some((m) => "prefix" in m))
    return "prefix is only valid on the last message";
  if (!endsWithAssistant(r)) return undefined;
  if (msgs.at(-1)?.prefix !== true)
    return "the last message is the assistant's without prefix: true";
  if (!r.url.startsWith("/beta/")) return "prefix completion needs the beta endpoint (/beta)";
  return undefined;
}

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const fast = { retry: { baseDelayMs: 0, maxDelayMs: 0 } };
const model = (baseURL: string, continueFromPartial?: "vllm" | "deepseek") =>
  openaiModel({
    model: "served-model",
    baseURL,
    contextWindow: 32_768,
    maxOutputTokens: 1024,
    ...(continueFromPartial ? { continueFromPartial } : {}),
  });

describe("Continue on OpenAI-compatible servers that take an assistant prefix", () => {
  it("vLLM: the request after a cut ends with the partial text, with continue_final_message and add_generation_prompt: false; the answer is the text plus its continuation", async () => {
    server = await startFakeOpenAIServer({ check: vllmWire });
    server.enqueue(cutAfterText("The answ"), streamReply({ text: "er is 42." }));
    const session = createAgent({ model: model(server.baseURL, "vllm"), ...fast }).session();
    expect(await session.prompt("what is it?")).toMatchObject({
      status: "completed",
      text: "The answer is 42.",
    });
    expect(server.requests).toHaveLength(2);
    const [first, second] = server.requests;
    // The first request is an ordinary one: no continuation fields.
    expect(first.body).not.toHaveProperty("continue_final_message");
    expect(first.body).not.toHaveProperty("add_generation_prompt");
    expect(second.body).toMatchObject({
      continue_final_message: true,
      add_generation_prompt: false,
    });
    expect(messagesOf(second).at(-1)).toEqual({ role: "assistant", content: "The answ" });
    expect(messagesOf(second).slice(0, -1)).toEqual(messagesOf(first));
    const [a1, a2] = of(session.entries(), "attempt_start");
    expect(a2.recovery).toEqual({ mode: "continue", from: a1.attemptId, prefixChars: 8 });
  });

  it("DeepSeek: the continuation's last message carries prefix: true, sent to the beta endpoint; later requests carry no prefix", async () => {
    server = await startFakeOpenAIServer({ check: deepseekWire });
    server.enqueue(
      cutAfterText("Quick sort: "),
      streamReply({ text: "pick a pivot." }),
      streamReply({ text: "You are welcome." }),
    );
    const beta = server.baseURL.replace(/\/v1$/, "/beta");
    const session = createAgent({ model: model(beta, "deepseek"), ...fast }).session();
    expect(await session.prompt("explain")).toMatchObject({
      status: "completed",
      text: "Quick sort: pick a pivot.",
    });
    expect(await session.prompt("thanks")).toMatchObject({ status: "completed" });
    const [, second, third] = server.requests;
    expect(messagesOf(second).at(-1)).toEqual({
      role: "assistant",
      content: "Quick sort: ",
      prefix: true,
    });
    expect(second.url).toBe("/beta/chat/completions");
    // The next turn's history holds the whole answer, as a plain message.
    expect(messagesOf(third).some((m) => "prefix" in m)).toBe(false);
    expect(messagesOf(third).at(-2)).toEqual({
      role: "assistant",
      content: "Quick sort: pick a pivot.",
    });
  });

  it("without continueFromPartial the same cut is retried from scratch: the strict server is never sent a prefix", async () => {
    server = await startFakeOpenAIServer({ check: vllmWire });
    server.enqueue(cutAfterText("The answ"), streamReply({ text: "The answer is 42." }));
    const session = createAgent({ model: model(server.baseURL), ...fast }).session();
    const events: AgentEvent[] = [];
    session.subscribe((e) => events.push(e));
    expect((await session.prompt("what is it?")).text).toBe("The answer is 42.");
    expect(endsWithAssistant(server.requests[1])).toBe(false);
    const retry = events.find((e) => e.type === "retry.scheduled");
    expect(retry).toMatchObject({ mode: "retry" });
    expect(retry && "fallback" in retry ? retry.fallback : "").toMatch(/cannot continue/);
  });

  it("partial reasoning is output: a stream cut after reasoning only ends the attempt interrupted (its reasoning kept) and the decision is Continue, which falls back to Retry for want of text", async () => {
    server = await startFakeOpenAIServer({ check: deepseekWire });
    server.enqueue(
      [
        { type: "sse", data: chunk({ role: "assistant", content: "" }) },
        { type: "sse", data: chunk({ reasoning_content: "The user wants " }) },
        { type: "destroy" },
      ],
      streamReply({ text: "Done." }),
    );
    const beta = server.baseURL.replace(/\/v1$/, "/beta");
    const session = createAgent({ model: model(beta, "deepseek"), ...fast }).session();
    const events: AgentEvent[] = [];
    session.subscribe((e) => events.push(e));
    expect(await session.prompt("go")).toMatchObject({ status: "completed", text: "Done." });
    const [ended] = of(session.entries(), "attempt_end");
    expect(ended.status).toBe("interrupted");
    expect(ended.partialReasoning?.map((p) => p.text)).toEqual(["The user wants "]);
    const retry = events.find((e) => e.type === "retry.scheduled");
    expect(retry && "fallback" in retry ? retry.fallback : "").toMatch(
      /Continue fell back to Retry: no text was received to continue from/,
    );
    expect(endsWithAssistant(server.requests[1])).toBe(false);
  });

  it("a bad continueFromPartial is refused when the model is made, saying what is expected", () => {
    const url = "http://127.0.0.1:1/v1";
    const make = (v: unknown, baseURL = url) =>
      openaiModel({
        model: "m",
        baseURL,
        contextWindow: 8192,
        continueFromPartial: v as "vllm",
      });
    expect(() => make("sglang")).toThrow(
      /continueFromPartial must be "vllm", "deepseek" or \{ body\?, message\? \}.*got "sglang"/,
    );
    expect(() => make({})).toThrow(/needs at least one field in body or message/);
    expect(() => make({ body: { model: "x" } })).toThrow(/body may not set "model"/);
    expect(() => make({ message: { role: "user" } })).toThrow(/message may not set "role"/);
    expect(() => make({ prefix: true })).toThrow(/takes only "body" and "message", got "prefix"/);
    expect(() => make("deepseek", "https://api.deepseek.com/v1")).toThrow(
      /needs DeepSeek's beta endpoint.*https:\/\/api\.deepseek\.com\/beta/,
    );
    expect(make("deepseek", "https://api.deepseek.com/beta").capabilities).toEqual({
      continueFromPartial: true,
    });
    expect(make({ message: { prefix: true } }).capabilities?.continueFromPartial).toBe(true);
    expect(make(undefined).capabilities).toBeUndefined();
  });

  it("an object names another server's fields: a Mistral-style prefix message", async () => {
    const mistralWire = (r: RecordedRequest) =>
      endsWithAssistant(r) && messagesOf(r).at(-1)?.prefix !== true
        ? "the last assistant message needs prefix: true"
        : undefined;
    server = await startFakeOpenAIServer({ check: mistralWire });
    server.enqueue(cutAfterText("Bonjour, "), streamReply({ text: "le monde." }));
    const m = openaiModel({
      model: "mistral-small",
      baseURL: server.baseURL,
      contextWindow: 32_768,
      continueFromPartial: { message: { prefix: true } },
    });
    const session = createAgent({ model: m, ...fast }).session();
    expect((await session.prompt("salut")).text).toBe("Bonjour, le monde.");
    expect(messagesOf(server.requests[1]).at(-1)).toEqual({
      role: "assistant",
      content: "Bonjour, ",
      prefix: true,
    });
  });
});
