// Issue 41, "Traces leak with content capture off": with capture off no span holds content on
// any path, errors included (a failed tool's message echoing its arguments, a secret in a thrown
// error or a URL, a provider's error text, an interrupt's reason); with capture on, a content
// attribute is bounded (a 5 MB prompt is not a 5 MB attribute). Real sessions, received by the
// SDK's in-memory exporter.
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { MAX_CONTENT_ATTRIBUTE_CHARS } from "../actors/telemetry-spans.ts";
import { createAgent, defineTool, openTelemetry, type Script, scriptedModel } from "../index.ts";

const exporter = new InMemorySpanExporter();
const tracer = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(exporter)],
}).getTracer("keel-test");
afterEach(() => exporter.reset());

const SECRET = "sk-SECRET-4242";

/** Every text a span carries: attributes, events' attributes, status message. */
function textsOf(span: ReadableSpan): string[] {
  const values = [
    ...Object.values(span.attributes),
    ...span.events.flatMap((e) => Object.values(e.attributes ?? {})),
    span.status.message ?? "",
    span.name,
  ];
  return values.map((v) => (Array.isArray(v) ? v.join(" ") : String(v)));
}

/** Fails with the span's secret-bearing text (as of the code before the fix). */
const leaks = () =>
  exporter.getFinishedSpans().flatMap((s) =>
    textsOf(s)
      .filter((t) => t.includes(SECRET))
      .map((t) => `${s.name}: ${t}`),
  );

const deploy = defineTool({
  name: "deploy",
  description: "deploys",
  parameters: z.object({ target: z.string() }),
  execute: async ({ target }) => {
    throw new Error(
      `could not reach https://user:${SECRET}@deploy.example/${target}?key=${SECRET}`,
    );
  },
});
const hang = defineTool({
  name: "hang",
  description: "waits until cancelled",
  parameters: z.object({}),
  traits: { readOnly: true, cancellable: true },
  execute: (_args, ctx) =>
    new Promise<string>((_resolve, reject) =>
      ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason)),
    ),
});

async function run(script: Script, capture: boolean, prompt: string) {
  const telemetry = await openTelemetry({ tracer, captureContent: capture });
  const agent = createAgent({
    model: scriptedModel(script, { name: "openai:gpt-test" }),
    tools: [deploy, hang],
    telemetry,
    retry: { baseDelayMs: 5, maxDelayMs: 10, maxRetries: 1 },
  });
  try {
    return await agent.session("sess_leak").prompt(prompt);
  } finally {
    await agent.close();
  }
}

describe("span content (issue 41)", () => {
  it("with capture off, a failed tool's message, its arguments, and the secrets in its error are in no span", async () => {
    await run(
      [
        { toolCalls: [{ id: "c1", name: "deploy", arguments: `{"target":"${SECRET}"}` }] },
        { toolCalls: [{ id: "c2", name: "deploy", arguments: `{"target":5,"x":"${SECRET}"}` }] },
        { toolCalls: [{ id: "c3", name: `nope_${SECRET}`, arguments: `{"a":"${SECRET}"}` }] },
        { text: "done" },
      ],
      false,
      "deploy it",
    );
    const call = exporter.getFinishedSpans().find((s) => s.name === "execute_tool deploy")!;
    expect(call.attributes["error.type"]).toBe("EXECUTION_FAILED");
    expect(call.status).toMatchObject({ code: 2, message: "EXECUTION_FAILED" });
    expect(leaks()).toEqual([]);
  });

  it("with capture off, a provider's error text (retried and final) is in no span, only its kind", async () => {
    const result = await run(
      [
        { error: { status: 503, message: `overloaded, see https://x.example/?key=${SECRET}` } },
        { error: { status: 400, message: `bad request: ${SECRET}` } },
      ],
      false,
      "hi",
    );
    expect(result.status).toBe("failed");
    const chat = exporter.getFinishedSpans().find((s) => s.name === "chat gpt-test")!;
    expect(chat.status.code).toBe(2);
    expect(chat.status.message).toBe(chat.attributes["error.type"]);
    expect(leaks()).toEqual([]);
  });

  it("with capture off, an interrupt's reason is in no span", async () => {
    const telemetry = await openTelemetry({ tracer });
    const agent = createAgent({
      model: scriptedModel([{ toolCalls: [{ id: "h", name: "hang", arguments: "{}" }] }], {
        name: "openai:gpt-test",
      }),
      tools: [hang],
      telemetry,
    });
    const session = agent.session("sess_int");
    const done = session.prompt("wait");
    await new Promise((r) => setTimeout(r, 50));
    await session.interrupt(`stop: ${SECRET}`);
    expect((await done).status).toBe("cancelled");
    await agent.close();
    expect(exporter.getFinishedSpans().length).toBeGreaterThan(0);
    expect(leaks()).toEqual([]);
  });

  it("with capture on, the error text is there but every content attribute is bounded: a 5 MB prompt is not a 5 MB attribute", async () => {
    const prompt = `${SECRET} ${"p".repeat(5 * 1024 * 1024)}`;
    await run(
      [
        {
          toolCalls: [
            { id: "c1", name: "deploy", arguments: `{"target":"${"t".repeat(100_000)}"}` },
          ],
        },
        { text: "a".repeat(1_000_000) },
      ],
      true,
      prompt,
    );
    const all = exporter.getFinishedSpans();
    // The bound: 16 KiB and its note (MAX_CONTENT_ATTRIBUTE_CHARS).
    const bound = 16 * 1024 + 64;
    for (const span of all) {
      for (const text of textsOf(span)) expect(text.length, span.name).toBeLessThan(bound);
    }
    const turn = all.find((s) => s.name === "invoke_agent keel")!;
    expect(String(turn.attributes["gen_ai.input.messages"])).toContain(SECRET);
    const call = all.find((s) => s.name === "execute_tool deploy")!;
    expect(call.status.message).toContain("could not reach");
    expect(MAX_CONTENT_ATTRIBUTE_CHARS).toBe(16 * 1024);
  });
});
