// The telemetry publisher fed events directly: the attributes that come from event fields the
// runtime adds (finish reason, error kind, compaction time), and the model name's parts.
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterEach, describe, expect, it } from "vitest";
import { modelParts, openTelemetry } from "../actors/telemetry.ts";
import type { AgentEvent } from "../contracts/events.ts";

const exporter = new InMemorySpanExporter();
const tracer = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(exporter)],
}).getTracer("t");
afterEach(() => exporter.reset());

const at = 1_700_000_000_000;
const ev = (body: Record<string, unknown>, t = 0): AgentEvent =>
  ({ sessionId: "s1", at: at + t, ...body }) as AgentEvent;

async function publisher() {
  return (await openTelemetry({ tracer })).forAgent({ name: "anthropic.messages:claude-x" });
}

describe("telemetry from session events", () => {
  it("names the provider and model from Keel's model name", () => {
    expect(modelParts("openai:gpt-4o")).toEqual({ provider: "openai", model: "gpt-4o" });
    expect(modelParts("anthropic.messages:claude-x")).toEqual({
      provider: "anthropic",
      model: "claude-x",
    });
    expect(modelParts("scripted")).toEqual({ provider: "scripted", model: "scripted" });
  });

  it("puts the finish reason on the request's span, and the failure's kind as error.type", async () => {
    const p = await publisher();
    p.publish(ev({ type: "turn.started", turnId: "t1", input: "hi" }));
    p.publish(ev({ type: "attempt.started", turnId: "t1", attemptId: "t1.a1", step: 0 }, 1));
    p.publish(
      ev(
        {
          type: "message.committed",
          turnId: "t1",
          attemptId: "t1.a1",
          text: "",
          toolCalls: [],
          finishReason: "length",
        },
        5,
      ),
    );
    p.publish(ev({ type: "attempt.started", turnId: "t1", attemptId: "t1.a2", step: 1 }, 6));
    p.publish(
      ev(
        {
          type: "attempt.ended",
          attemptId: "t1.a2",
          status: "failed",
          error: "quota",
          errorKind: "http",
        },
        9,
      ),
    );
    p.publish(ev({ type: "turn.ended", turnId: "t1", status: "failed", reason: "quota" }, 10));
    const chats = exporter.getFinishedSpans().filter((s) => s.name === "chat claude-x");
    expect(chats).toHaveLength(2);
    expect(chats[0].attributes["gen_ai.response.finish_reasons"]).toEqual(["length"]);
    expect(chats[0].attributes["gen_ai.provider.name"]).toBe("anthropic");
    expect(chats[1].attributes["error.type"]).toBe("http");
    // The failed request ends when its attempt failed, not when the turn ended.
    expect(chats[1].endTime).toEqual([Math.floor((at + 9) / 1000), ((at + 9) % 1000) * 1e6]);
  });

  it("draws a compaction as a span of its duration under the turn", async () => {
    const p = await publisher();
    p.publish(ev({ type: "turn.started", turnId: "t1", input: "hi" }));
    p.publish(
      ev(
        {
          type: "context.compacted",
          mode: "auto",
          ok: true,
          tokensBefore: 9000,
          tokensAfter: 2000,
          durationMs: 40,
        },
        100,
      ),
    );
    p.publish(ev({ type: "turn.ended", turnId: "t1", status: "completed" }, 120));
    const spans = exporter.getFinishedSpans();
    const compaction = spans.find((s) => s.name === "compaction")!;
    const turn = spans.find((s) => s.name === "invoke_agent keel")!;
    expect(compaction.parentSpanContext?.spanId).toBe(turn.spanContext().spanId);
    expect(compaction.attributes).toMatchObject({
      "keel.compaction.mode": "auto",
      "keel.compaction.tokens_before": 9000,
      "keel.compaction.tokens_after": 2000,
    });
    expect(compaction.duration).toEqual([0, 40e6]);
  });

  it("never throws into the runtime, whatever arrives", async () => {
    const p = await publisher();
    expect(() => p.publish({ type: "call.settled" } as never)).not.toThrow();
    expect(() =>
      p.publish(ev({ type: "attempt.ended", attemptId: "nope", status: "failed" })),
    ).not.toThrow();
  });
});
