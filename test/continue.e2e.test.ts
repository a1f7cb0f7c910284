import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createAgent } from "../actors/agent.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { textOf, toolCallsOf } from "../contracts/messages.ts";
import type { ModelRequest } from "../contracts/model.ts";
import { type ScriptStep, scriptedModel } from "../providers/scripted-model.ts";
import type { EntryOf, LogEntry } from "../session/entries.ts";

const of = <K extends LogEntry["type"]>(entries: readonly LogEntry[], type: K) =>
  entries.filter((e): e is EntryOf<K> => e.type === type);

/** The text the request asks the model to continue: its last message, if it is the assistant's. */
const prefill = (req: ModelRequest) => {
  const last = req.messages.at(-1);
  return last?.role === "assistant" && toolCallsOf(last.content).length === 0
    ? textOf(last.content)
    : undefined;
};

const fast = { retry: { baseDelayMs: 0, maxDelayMs: 0, maxRetries: 3 } };

describe("Continue is not Retry: a cut answer is continued from the text received", () => {
  it("with a model that continues a partial message, the next request ends with the received text and the committed message is that text plus the continuation", async () => {
    const model = scriptedModel(
      [
        { text: "The answer is 4", chunkSize: 4, cutAfter: 2 }, // "The answ", then a cut
        (req) => {
          expect(prefill(req)).toBe("The answ");
          return { text: "er is 42." };
        },
      ],
      { capabilities: { continueFromPartial: true } },
    );
    const session = createAgent({ model, ...fast }).session();
    const events: AgentEvent[] = [];
    session.subscribe((e) => events.push(e));
    // The turn's result is the whole message too, not only the continuation's own text.
    expect(await session.prompt("what is it?")).toMatchObject({
      status: "completed",
      text: "The answer is 42.",
    });
    expect(model.requests).toHaveLength(2);
    // The first request had no prefill; the user's message is still the one before it.
    const [first, second] = model.requests;
    expect(prefill({ ...first, messages: first.history })).toBeUndefined();
    expect(second.history.slice(0, -1)).toEqual(first.history);
    expect(second.history.at(-1)).toEqual({
      role: "assistant",
      content: [{ type: "text", text: "The answ" }],
    });

    const entries = session.entries();
    const [a1, a2] = of(entries, "attempt_start");
    expect(of(entries, "attempt_end")[0]).toMatchObject({
      attemptId: a1.attemptId,
      status: "interrupted",
      partialText: "The answ",
    });
    expect(a2.recovery).toEqual({ mode: "continue", from: a1.attemptId, prefixChars: 8 });
    const [message] = of(entries, "assistant_message");
    expect(message).toMatchObject({
      attemptId: a2.attemptId,
      content: [{ type: "text", text: "The answer is 42." }],
      continuation: { from: a1.attemptId, prefixChars: 8 },
    });
    expect(session.messages().filter((m) => m.role === "assistant")).toEqual([
      { role: "assistant", content: "The answer is 42." },
    ]);
    const retry = events.find((e) => e.type === "retry.scheduled");
    expect(retry).toMatchObject({ mode: "continue" });
    expect(retry && "fallback" in retry ? retry.fallback : undefined).toBeUndefined();
    const committed = events.find((e) => e.type === "message.committed");
    expect(committed).toMatchObject({ text: "The answer is 42." });
  });

  it("a second cut continues from everything received; a continuation that fails before any output is retried with the same prefix", async () => {
    const model = scriptedModel(
      [
        { text: "abcdef", chunkSize: 1, cutAfter: 3 }, // "abc"
        (req) => {
          expect(prefill(req)).toBe("abc");
          return { text: "defgh", chunkSize: 1, cutAfter: 2 }; // "de"
        },
        (req) => {
          expect(prefill(req)).toBe("abcde");
          return { error: { status: 503 } };
        },
        (req) => {
          expect(prefill(req)).toBe("abcde");
          return { text: "fghij" };
        },
      ],
      { capabilities: { continueFromPartial: true } },
    );
    const session = createAgent({ model, ...fast }).session();
    expect((await session.prompt("go")).status).toBe("completed");
    expect(model.requests).toHaveLength(4);
    const [message] = of(session.entries(), "assistant_message");
    expect(textOf(message.content)).toBe("abcdefghij");
    expect(message.continuation?.prefixChars).toBe(5);
    expect(of(session.entries(), "attempt_start").map((a) => a.recovery?.mode)).toEqual([
      undefined,
      "continue",
      "continue",
      "continue",
    ]);
  });

  it("a model without the capability falls back to Retry: same request, partial dropped, and the log and the event say why", async () => {
    const model = scriptedModel([
      { text: "half an ans", chunkSize: 1, cutAfter: 4 },
      (req) => {
        expect(prefill(req)).toBeUndefined();
        return { text: "a whole answer" };
      },
    ]);
    const session = createAgent({ model, ...fast }).session();
    const events: AgentEvent[] = [];
    session.subscribe((e) => events.push(e));
    expect((await session.prompt("go")).status).toBe("completed");
    expect(model.requests[1].messages).toEqual(model.requests[0].messages);
    const retry = events.find((e) => e.type === "retry.scheduled");
    expect(retry).toMatchObject({
      mode: "retry",
      fallback: expect.stringMatching(/fell back to Retry: model scripted cannot continue/),
    });
    const a2 = of(session.entries(), "attempt_start")[1];
    expect(a2.recovery).toMatchObject({
      mode: "retry",
      fallback: expect.stringMatching(/scripted/),
    });
    expect(JSON.stringify(session.messages())).not.toContain("half");
    expect(of(session.entries(), "assistant_message")[0].continuation).toBeUndefined();
  });

  it("a partial tool call is never continued: Retry, saying the partial output holds a tool call", async () => {
    const model = scriptedModel(
      [
        {
          text: "Let me look",
          toolCalls: [{ id: "c1", name: "read", arguments: '{"path":"a.txt"}' }],
          cutAfter: 3,
        },
        (req) => {
          expect(prefill(req)).toBeUndefined();
          return { text: "done" };
        },
      ],
      { capabilities: { continueFromPartial: true } },
    );
    const session = createAgent({ model, ...fast }).session();
    const events: AgentEvent[] = [];
    session.subscribe((e) => events.push(e));
    expect((await session.prompt("go")).status).toBe("completed");
    expect(events.find((e) => e.type === "retry.scheduled")).toMatchObject({
      mode: "retry",
      fallback: expect.stringMatching(/holds a tool call/),
    });
  });

  it("invariant 9 of docs/architecture.md, precisely: whatever the cut points, a failed attempt's text reaches the projection only as the declared prefix of the message that continued it", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.string({ minLength: 2, maxLength: 30, unit: fc.constantFrom("a", "b", " ", "é") }),
        fc.array(fc.nat(), { minLength: 1, maxLength: 3 }),
        async (answer, cutsRaw) => {
          // Cut points strictly inside what is left, each after at least one char.
          const steps: ((req: ModelRequest) => ScriptStep)[] = [];
          let sent = 0;
          for (const c of cutsRaw) {
            const left = answer.length - sent;
            if (left < 2) break;
            const at = 1 + (c % (left - 1));
            const from = sent;
            steps.push((req) => {
              expect(prefill(req) ?? "").toBe(answer.slice(0, from));
              return { text: answer.slice(from), chunkSize: 1, cutAfter: at };
            });
            sent += at;
          }
          const final = sent;
          steps.push((req) => {
            expect(prefill(req) ?? "").toBe(answer.slice(0, final));
            return { text: answer.slice(final) };
          });
          const model = scriptedModel(steps, { capabilities: { continueFromPartial: true } });
          const session = createAgent({ model, retry: { ...fast.retry, maxRetries: 5 } }).session();
          expect((await session.prompt("go")).status).toBe("completed");
          const entries = session.entries();
          const [message] = of(entries, "assistant_message");
          expect(textOf(message.content)).toBe(answer);
          const partials = of(entries, "attempt_end").filter((e) => e.status !== "completed");
          expect(partials).toHaveLength(steps.length - 1);
          expect(message.continuation?.prefixChars ?? 0).toBe(final);
          // The projection is the prompt and one assistant message, the prefix plus the rest:
          // no partial text anywhere else.
          expect(session.messages()).toEqual([
            { role: "user", content: "go" },
            { role: "assistant", content: answer },
          ]);
        },
      ),
      { numRuns: 60, seed: 17 },
    );
  });
});
