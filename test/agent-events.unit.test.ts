import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import { AGENT_EVENT_TYPES, type InspectSink } from "../actors/events.ts";
import { createTrace } from "../cli/trace.ts";
import { systemClock } from "../contracts/clock.ts";
import type { AgentEvent, AgentEventOf, AgentEventType } from "../contracts/events.ts";
import { apply, createModel } from "../inspector/page/model.js";
import { agentRecord } from "../inspector/records.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { sqliteStore } from "../session/stores/sqlite-store.ts";
import { defineTool } from "../tools/define-tool.ts";

const echo = defineTool({
  name: "echo",
  description: "Echoes.",
  parameters: z.object({ text: z.string() }),
  traits: { concurrencySafe: true, risk: "low" },
  execute: ({ text }) => text,
});

describe("event stamping", () => {
  it("every event is stamped once: the inspector's sink and every listener get the same object, with sessionId and at", async () => {
    const published: AgentEvent[] = [];
    const sink: InspectSink = { observe: () => {}, publish: (e) => published.push(e) };
    let now = 1000;
    const clock = { ...systemClock, now: () => now++ };
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"hi"}' }] },
      { text: "done" },
    ]);
    const session = createAgent({ model, tools: [echo], inspect: sink, clock }).session("s1");
    const heard: AgentEvent[] = [];
    session.subscribe((e) => heard.push(e));
    await session.prompt("go");
    expect(heard.length).toBeGreaterThan(5);
    expect(published).toHaveLength(heard.length);
    heard.forEach((e, i) => {
      expect(published[i]).toBe(e);
      expect(e.sessionId).toBe("s1");
      expect(typeof e.at).toBe("number");
    });
    // The session's own events (the inbox) reach the inspector too.
    expect(published.map((e) => e.type)).toContain("inbox.received");
    // Stamped in emission order on one clock: never re-stamped later.
    const ats = heard.map((e) => e.at);
    expect(ats).toEqual([...ats].sort((a, b) => a - b));
  });

  it("a step's events come in the order the log holds them: its results committed, then the next attempt started", async () => {
    for (const store of [memoryStore(), sqliteStore(":memory:")]) {
      const model = scriptedModel([
        { toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"a"}' }] },
        { toolCalls: [{ id: "c2", name: "echo", arguments: '{"text":"b"}' }] },
        { text: "done" },
      ]);
      const agent = createAgent({ model, tools: [echo], store });
      const session = agent.session();
      const order: string[] = [];
      session.subscribe((e) => {
        if (e.type === "attempt.started" || e.type === "batch.committed") order.push(e.type);
      });
      expect((await session.prompt("go")).status).toBe("completed");
      await agent.close();
      expect(order).toEqual([
        "attempt.started",
        "batch.committed",
        "attempt.started",
        "batch.committed",
        "attempt.started",
      ]);
    }
  });

  it("a step that ends the turn (its budget spent) says its batch committed before the turn ended", async () => {
    for (const store of [memoryStore(), sqliteStore(":memory:")]) {
      const model = scriptedModel([
        { toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"a"}' }] },
      ]);
      const agent = createAgent({ model, tools: [echo], store, limits: { maxSteps: 1 } });
      const session = agent.session();
      const order: string[] = [];
      session.subscribe((e) => {
        if (e.type === "batch.committed" || e.type === "turn.ended") order.push(e.type);
      });
      const result = await session.prompt("go");
      order.push("prompt resolved");
      await agent.close();
      expect(result.status).toBe("budget_exhausted");
      expect(order).toEqual(["batch.committed", "turn.ended", "prompt resolved"]);
    }
  });

  it("the inspector alone (no listener) still gets every event, stamped", async () => {
    const published: AgentEvent[] = [];
    const sink: InspectSink = { observe: () => {}, publish: (e) => published.push(e) };
    const session = createAgent({
      model: scriptedModel([{ text: "hi" }]),
      inspect: sink,
    }).session();
    await session.prompt("go");
    expect(published.map((e) => e.type)).toEqual(
      expect.arrayContaining(["inbox.received", "turn.started", "turn.ended"]),
    );
    for (const e of published) expect(typeof e.at).toBe("number");
  });
});

const LONG = "x".repeat(50_000);
const base = { sessionId: "s", at: 1 };
const failed = { ok: false as const, code: "CANCELLED" as const, message: LONG, retryable: false };

/** One event of every type; the mapped type makes a missing one a compile error. */
const SAMPLES: { [K in AgentEventType]: AgentEventOf<K> } = {
  "inbox.received": {
    ...base,
    type: "inbox.received",
    inboxId: "i",
    lane: "next-step",
    source: "user",
  },
  "inbox.consumed": { ...base, type: "inbox.consumed", inboxId: "i", lane: "next-step" },
  "turn.started": { ...base, type: "turn.started", turnId: "t", input: LONG },
  "attempt.started": { ...base, type: "attempt.started", turnId: "t", attemptId: "a", step: 1 },
  "attempt.queued": {
    ...base,
    type: "attempt.queued",
    turnId: "t",
    attemptId: "a",
    provider: "openai",
    position: 3,
    limit: 2,
  },
  "attempt.admitted": {
    ...base,
    type: "attempt.admitted",
    turnId: "t",
    attemptId: "a",
    provider: "openai",
    waitedMs: 40,
  },
  "text.streamed": { ...base, type: "text.streamed", attemptId: "a", text: LONG },
  "call.previewed": {
    ...base,
    type: "call.previewed",
    attemptId: "a",
    index: 0,
    name: "n",
    preview: { big: LONG },
  },
  "attempt.ended": {
    ...base,
    type: "attempt.ended",
    attemptId: "a",
    status: "failed",
    error: LONG,
  },
  "message.committed": {
    ...base,
    type: "message.committed",
    turnId: "t",
    attemptId: "a",
    text: LONG,
    toolCalls: [{ type: "tool-call", id: "c", name: "n", arguments: LONG }],
  },
  "permission.requested": {
    ...base,
    type: "permission.requested",
    request: {
      requestId: "r",
      sessionId: "s",
      callId: "c",
      tool: "n",
      args: { big: LONG },
      risk: "high",
    },
  },
  "loop.detected": {
    ...base,
    type: "loop.detected",
    turnId: "t",
    tool: "n",
    repeats: 6,
    action: "stopped",
  },
  "permission.decided": {
    ...base,
    type: "permission.decided",
    requestId: "r",
    callId: "c",
    tool: "n",
    decision: { type: "corrected", feedback: LONG },
    source: { type: "reply", reply: "deny_with_feedback" },
  },
  "call.queued": { ...base, type: "call.queued", turnId: "t", callId: "c", name: "n" },
  "call.started": {
    ...base,
    type: "call.started",
    turnId: "t",
    callId: "c",
    name: "n",
    args: { big: LONG },
  },
  "call.updated": { ...base, type: "call.updated", callId: "c", progress: { big: LONG } },
  "call.stop-requested": {
    ...base,
    type: "call.stop-requested",
    turnId: "t",
    callId: "c",
    name: "n",
  },
  "call.settled": {
    ...base,
    type: "call.settled",
    turnId: "t",
    callId: "c",
    name: "n",
    outcome: "cancelled",
    result: failed,
  },
  "batch.committed": {
    ...base,
    type: "batch.committed",
    turnId: "t",
    calls: [{ callId: "c", name: "n", outcome: "cancelled", result: failed }],
  },
  "retry.scheduled": {
    ...base,
    type: "retry.scheduled",
    turnId: "t",
    attemptId: "a",
    retry: 1,
    delayMs: 10,
    readyAt: 11,
    reason: LONG,
    mode: "retry",
  },
  "turn.cancel-acknowledged": {
    ...base,
    type: "turn.cancel-acknowledged",
    turnId: "t",
    reason: LONG,
  },
  "turn.execution-stopped": { ...base, type: "turn.execution-stopped", turnId: "t" },
  "turn.ended": { ...base, type: "turn.ended", turnId: "t", status: "failed", reason: LONG },
  "log.written": { ...base, type: "log.written", level: "warn", message: LONG },
  "context.measured": {
    ...base,
    type: "context.measured",
    used: 3100,
    window: 4000,
    reserve: 500,
    trusted: true,
  },
  "context.compacted": {
    ...base,
    type: "context.compacted",
    mode: "overflow",
    ok: false,
    reason: LONG,
  },
  "acceptance.started": { ...base, type: "acceptance.started", round: 1, checks: ["tests"] },
  "check.started": {
    ...base,
    type: "check.started",
    name: "tests",
    round: 1,
    artifactVersion: "git:abc",
  },
  "check.ended": {
    ...base,
    type: "check.ended",
    name: "tests",
    kind: "check",
    passed: false,
    durationMs: 12,
    round: 1,
  },
  "follow-up.sent": {
    ...base,
    type: "follow-up.sent",
    round: 1,
    failing: ["tests"],
  },
  "acceptance.checked": {
    ...base,
    type: "acceptance.checked",
    acceptance: "failed",
    rounds: 1,
    reason: "turn",
    specVersion: 1,
    evidence: {
      artifactVersion: "git:abc",
      checks: [
        {
          name: "tests",
          kind: "check",
          passed: false,
          output: LONG,
          startedAt: 1,
          durationMs: 12,
          artifactVersion: "git:abc",
        },
      ],
    },
  },
};

/** The `case "…":` labels of a plain-JS file of the inspector page. */
function caseLabels(file: string): string[] {
  const text = readFileSync(new URL(`../inspector/page/${file}`, import.meta.url), "utf8");
  return [...text.matchAll(/case "([a-z.-]+)":/g)].map((m) => m[1]);
}

describe("event names and their consumers", () => {
  it("every event type is noun.past-participle, lower case, words joined by '-', listed once", () => {
    expect(new Set(AGENT_EVENT_TYPES).size).toBe(AGENT_EVENT_TYPES.length);
    expect(Object.keys(SAMPLES).sort()).toEqual([...AGENT_EVENT_TYPES].sort());
    for (const type of AGENT_EVENT_TYPES) {
      expect(type).toMatch(/^[a-z]+(-[a-z]+)*\.[a-z]+(-[a-z]+)*(ed|en|nt)$/);
    }
  });

  it("the inspector's records clip every event type to a bounded size and keep its type", () => {
    for (const type of AGENT_EVENT_TYPES) {
      const record = agentRecord(SAMPLES[type]);
      expect(record.k === "agent" && record.e.type).toBe(type);
      expect(JSON.stringify(record).length, type).toBeLessThan(3000);
    }
  });

  it("the inspector page names every event type in a case of its event log and of its model, and no other", async () => {
    const types = [...AGENT_EVENT_TYPES].sort();
    expect([...new Set(caseLabels("event-log.js"))].sort()).toEqual(types);
    expect([...new Set(caseLabels("model.js"))].sort()).toEqual(types);
    const page = "../inspector/page/event-log.js";
    const { describe: describeRecord } = (await import(page)) as {
      describe: (r: unknown, model: unknown) => string;
    };
    const model = createModel();
    for (const type of AGENT_EVENT_TYPES) {
      const record = agentRecord(SAMPLES[type]);
      expect(() => apply(model, record)).not.toThrow();
      expect(describeRecord(record, model), type).not.toBe("");
    }
  });

  it("the trace prints every event type as one JSON line, and its human mode takes each", () => {
    const json: string[] = [];
    const trace = createTrace({ out: { write: (c) => json.push(c) }, json: true });
    for (const type of AGENT_EVENT_TYPES) trace.onEvent(SAMPLES[type]);
    expect(json.map((l) => JSON.parse(l).type)).toEqual([...AGENT_EVENT_TYPES]);
    const human: string[] = [];
    const people = createTrace({ out: { write: (c) => human.push(c) }, color: false });
    for (const type of AGENT_EVENT_TYPES) people.onEvent(SAMPLES[type]);
    expect(human.join("")).toContain("cancelling");
  });
});
