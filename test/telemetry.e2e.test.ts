// OpenTelemetry traces of real sessions, received by the SDK's in-memory exporter: the turn,
// each model request (retries as events on it), each tool call (with the tool's own span nested
// under it), interrupt and crash recovery; content only when asked for.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Telemetry } from "../actors/telemetry.ts";
import {
  createAgent,
  defineTool,
  memoryStore,
  openTelemetry,
  type Script,
  scriptedModel,
} from "../index.ts";
// @ts-expect-error: a plain .mjs script without declarations
import { importsOf } from "../scripts/check-imports.mjs";

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer("keel-test");
const manager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  // The active context follows async work, as the Node SDK sets it up.
  context.setGlobalContextManager(manager.enable());
});
afterAll(() => {
  manager.disable();
  context.disable();
});
afterEach(() => exporter.reset());

const spans = () => exporter.getFinishedSpans();
const named = (prefix: string) => spans().filter((s) => s.name.startsWith(prefix));
const one = (name: string) => {
  const found = spans().filter((s) => s.name === name);
  expect(found, `one span named ${name}`).toHaveLength(1);
  return found[0];
};
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;
const idOf = (span: ReadableSpan) => span.spanContext().spanId;

/** A tool that records its own span under whatever context Keel gives it. */
const lookup = defineTool({
  name: "lookup",
  description: "looks a word up",
  parameters: z.object({ word: z.string() }),
  traits: { readOnly: true, concurrencySafe: true },
  execute: async ({ word }, ctx) => {
    const own = tracer.startSpan("lookup.db", {}, ctx.traceContext as never);
    await new Promise((resolve) => setTimeout(resolve, 5));
    own.setAttribute("active.is.call", trace.getActiveSpan() !== undefined);
    own.setAttribute(
      "active.span",
      (trace.getActiveSpan() as unknown as { name?: string })?.name ?? "",
    );
    own.end();
    return `${word}: a small word`;
  },
});

async function run(script: Script, telemetry: Telemetry, prompt = "look up cat") {
  const agent = createAgent({
    model: scriptedModel(script, { name: "openai:gpt-test" }),
    tools: [lookup],
    telemetry,
    retry: { baseDelayMs: 5, maxDelayMs: 10 },
  });
  try {
    return await agent.session("sess_otel").prompt(prompt);
  } finally {
    await agent.close();
  }
}

describe("OpenTelemetry spans of a session", () => {
  it("a turn, a chat span per model request and an execute_tool span per call, with the GenAI attributes", async () => {
    const telemetry = await openTelemetry({ tracer });
    const result = await run(
      [
        {
          toolCalls: [{ id: "call_1", name: "lookup", arguments: '{"word":"cat"}' }],
          usage: { inputTokens: 120, outputTokens: 12 },
        },
        { text: "a cat is small", usage: { inputTokens: 150, outputTokens: 6 } },
      ],
      telemetry,
    );
    expect(result.status).toBe("completed");
    const turn = one("invoke_agent keel");
    expect(turn.attributes).toMatchObject({
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.conversation.id": "sess_otel",
      "keel.turn.status": "completed",
      "gen_ai.usage.input_tokens": 270,
      "gen_ai.usage.output_tokens": 18,
    });
    expect(parentOf(turn)).toBeUndefined();
    const chats = named("chat ");
    expect(chats.map((s) => s.name)).toEqual(["chat gpt-test", "chat gpt-test"]);
    for (const chat of chats) {
      expect(parentOf(chat)).toBe(idOf(turn));
      expect(chat.kind).toBe(2); // CLIENT
      expect(chat.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
      });
    }
    expect(chats[0].attributes).toMatchObject({
      "gen_ai.usage.input_tokens": 120,
      "gen_ai.usage.output_tokens": 12,
    });
    const call = one("execute_tool lookup");
    expect(parentOf(call)).toBe(idOf(turn));
    expect(call.attributes).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "lookup",
      "gen_ai.tool.call.id": "call_1",
      "keel.call.outcome": "completed",
    });
    expect(call.status.code).toBe(0);
    // Off by default: no content anywhere.
    for (const span of spans()) {
      for (const key of [
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
      ]) {
        expect(span.attributes[key]).toBeUndefined();
      }
    }
  });

  it("nests a tool's own span under its execute_tool span, through ctx.traceContext and the active context", async () => {
    const telemetry = await openTelemetry({ tracer });
    await run(
      [
        { toolCalls: [{ id: "call_1", name: "lookup", arguments: '{"word":"dog"}' }] },
        { text: "ok" },
      ],
      telemetry,
    );
    const call = one("execute_tool lookup");
    const own = one("lookup.db");
    expect(parentOf(own)).toBe(idOf(call));
    expect(own.attributes["active.span"]).toBe("execute_tool lookup");
  });

  it("a retried request is one chat span with the failure and the retry as its events", async () => {
    const telemetry = await openTelemetry({ tracer });
    const result = await run([{ error: { status: 503 } }, { text: "fine" }], telemetry, "hi");
    expect(result.status).toBe("completed");
    const chat = one("chat gpt-test");
    expect(chat.events.map((e) => e.name)).toEqual([
      "keel.attempt.failed",
      "keel.retry",
      "keel.attempt.started",
    ]);
    expect(chat.events[1].attributes).toMatchObject({
      "keel.retry.number": 1,
      "keel.retry.mode": "retry",
    });
    expect(chat.status.code).toBe(0);
    expect(chat.attributes["error.type"]).toBeUndefined();
  });

  it("a request that fails for good ends its span with error.type and an error status, and the turn failed", async () => {
    const telemetry = await openTelemetry({ tracer });
    const result = await run([{ error: { status: 400, message: "bad request" } }], telemetry, "hi");
    expect(result.status).toBe("failed");
    const chat = one("chat gpt-test");
    expect(chat.status.code).toBe(2);
    expect(chat.attributes["error.type"]).toEqual(expect.any(String));
    const turn = one("invoke_agent keel");
    expect(turn.attributes["keel.turn.status"]).toBe("failed");
    expect(turn.status.code).toBe(2);
  });

  it("an interrupt: the running call's span says cancelled, the turn's says cancelled and when the cancel was acknowledged", async () => {
    const telemetry = await openTelemetry({ tracer });
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const wait = defineTool({
      name: "wait",
      description: "waits until cancelled",
      parameters: z.object({}),
      traits: { readOnly: true, cancellable: true },
      execute: (_args, ctx) =>
        new Promise<string>((_resolve, reject) => {
          started();
          ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason));
        }),
    });
    const agent = createAgent({
      model: scriptedModel([{ toolCalls: [{ id: "call_w", name: "wait", arguments: "{}" }] }], {
        name: "openai:gpt-test",
      }),
      tools: [wait],
      telemetry,
    });
    try {
      const session = agent.session("sess_int");
      const done = session.prompt("wait");
      await running;
      await session.interrupt("stop now");
      expect((await done).status).toBe("cancelled");
    } finally {
      await agent.close();
    }
    const call = one("execute_tool wait");
    expect(call.attributes).toMatchObject({
      "keel.call.outcome": "cancelled",
      "error.type": "CANCELLED",
    });
    expect(call.events.map((e) => e.name)).toEqual(["keel.call.stop_requested"]);
    const turn = one("invoke_agent keel");
    expect(turn.attributes["keel.turn.status"]).toBe("cancelled");
    expect(turn.events.map((e) => e.name)).toContain("keel.turn.cancel_acknowledged");
  });

  it("crash recovery: a call that started and has no result gets a span that says unknown", async () => {
    const store = memoryStore();
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const charge = defineTool({
      name: "charge",
      description: "charges a card (never finishes here: the process 'crashes')",
      parameters: z.object({}),
      traits: { concurrencySafe: false },
      execute: () =>
        new Promise<string>(() => {
          started();
        }),
    });
    const crashed = createAgent({
      model: scriptedModel([{ toolCalls: [{ id: "call_c", name: "charge", arguments: "{}" }] }]),
      tools: [charge],
      store,
      lease: false,
    });
    void crashed.session("sess_crash").prompt("charge it");
    await running; // its start record is durable (write-ahead); then the process is gone
    const telemetry = await openTelemetry({ tracer });
    const reopened = createAgent({
      model: scriptedModel([]),
      tools: [charge],
      store,
      lease: false,
      telemetry,
    });
    try {
      await reopened.session("sess_crash").ready;
    } finally {
      await reopened.close();
    }
    const call = one("execute_tool charge");
    expect(call.attributes).toMatchObject({
      "gen_ai.tool.call.id": "call_c",
      "keel.call.outcome": "unknown",
      "keel.call.recovered": true,
      "error.type": "OUTCOME_UNKNOWN",
    });
    expect(call.status.code).toBe(2);
  });

  it("records content only when asked: the prompt, the answer, the tool's arguments and result", async () => {
    const telemetry = await openTelemetry({ tracer, captureContent: true });
    await run(
      [
        { toolCalls: [{ id: "call_1", name: "lookup", arguments: '{"word":"owl"}' }] },
        { text: "owls hoot" },
      ],
      telemetry,
      "what is an owl",
    );
    expect(
      JSON.parse(String(one("invoke_agent keel").attributes["gen_ai.input.messages"])),
    ).toEqual([{ role: "user", parts: [{ type: "text", content: "what is an owl" }] }]);
    const chats = named("chat ");
    expect(JSON.parse(String(chats[1].attributes["gen_ai.output.messages"]))).toEqual([
      { role: "assistant", parts: [{ type: "text", content: "owls hoot" }], finish_reason: "stop" },
    ]);
    const call = one("execute_tool lookup");
    expect(JSON.parse(String(call.attributes["gen_ai.tool.call.arguments"]))).toEqual({
      word: "owl",
    });
    expect(call.attributes["gen_ai.tool.call.result"]).toBe("owl: a small word");
  });

  it("with no tracer provider registered, the default tracer records nothing and the session runs as without telemetry", async () => {
    const telemetry = await openTelemetry(); // the global provider: none is registered here
    const result = await run(
      [
        { toolCalls: [{ id: "call_1", name: "lookup", arguments: '{"word":"ant"}' }] },
        { text: "ok" },
      ],
      telemetry,
    );
    expect(result.status).toBe("completed");
    expect(spans().filter((s) => s.name !== "lookup.db")).toEqual([]);
  });

  it("the global provider, once registered, receives the spans", async () => {
    trace.setGlobalTracerProvider(provider);
    try {
      const telemetry = await openTelemetry();
      await run([{ text: "hello" }], telemetry, "hi");
      expect(one("invoke_agent keel").instrumentationScope.name).toBe("keel");
    } finally {
      trace.disable();
    }
  });
});

describe("the optional peer", () => {
  it("no module imports @opentelemetry/api; actors/telemetry.ts loads it on first use, as an optional peer: nothing loads it without telemetry", () => {
    const root = join(import.meta.dirname, "..");
    const found: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        if (["node_modules", "dist", "test", "bench", ".git", ".stryker-tmp"].includes(name))
          continue;
        const full = join(dir, name);
        if (statSync(full).isDirectory()) walk(full);
        else if (/\.(ts|js|mjs)$/.test(name) && !name.endsWith(".d.ts")) {
          const specs: string[] = importsOf(readFileSync(full, "utf8"));
          if (specs.some((spec) => spec.startsWith("@opentelemetry/")))
            found.push(relative(root, full));
        }
      }
    };
    walk(root);
    expect(found).toEqual([]);
    const code = readFileSync(join(root, "actors/telemetry.ts"), "utf8");
    // Loaded inside openTelemetry(), through the optional-peer loader (a MissingPeerError with
    // the install command when it is absent), never at module load.
    expect(code).toMatch(
      /export async function openTelemetry[\s\S]*?loadPeer<OtelApi>\(\s*require,\s*"@opentelemetry\/api"/,
    );
  });
});
