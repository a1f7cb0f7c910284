import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { AgentOptions } from "../actors/agent-options.ts";
import { type ScriptStep, scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { memoryStore } from "../session/stores/memory-store.ts";
import { defineTool } from "../tools/define-tool.ts";
import { deferred } from "./support/harness.ts";

function gatedTool(gate: Promise<void>, onStart?: () => void) {
  return defineTool({
    name: "slow",
    description: "Waits for a gate.",
    parameters: z.object({}),
    traits: { concurrencySafe: true },
    execute: async () => {
      onStart?.();
      await gate;
      return "slow done";
    },
  });
}

/** A session whose `slow` tool waits for `gate`; `started` opens when the tool starts. */
function gatedSession(steps: ScriptStep[], options: Partial<AgentOptions> = {}) {
  const gate = deferred();
  const started = deferred();
  const model = scriptedModel(steps);
  const session = createAgent({
    model,
    tools: [gatedTool(gate.promise, () => started.resolve())],
    ...options,
  }).session();
  return { gate, started, model, session };
}

const types = (entries: readonly LogEntry[]) => entries.map((e) => e.type);

describe("session inbox lanes", () => {
  it("a steer that arrives during a tool batch is read after the batch commits and before the next model call", async () => {
    const { gate, started, model, session } = gatedSession([
      { toolCalls: [{ id: "a", name: "slow", arguments: "{}" }] },
      { text: "noted the steer" },
    ]);
    const done = session.prompt("start");
    await started.promise;
    await session.steer("also check the tests");
    gate.resolve();
    expect((await done).status).toBe("completed");
    const second = model.requests[1].messages.map(
      (m) => `${m.role}:${m.role === "tool" ? "" : (m.content ?? "")}`,
    );
    expect(second).toEqual(["user:start", "assistant:", "tool:", "user:also check the tests"]);
    expect(session.queued()).toHaveLength(0);
  });

  it("a steer at a natural end continues the same turn", async () => {
    const model = scriptedModel([
      { text: "first answer", delayMs: 5 },
      { text: "answer to the steer" },
    ]);
    const session = createAgent({ model }).session();
    session.subscribe((e) => {
      if (e.type === "attempt.started" && e.step === 0) void session.steer("one more thing");
    });
    expect((await session.prompt("hi")).status).toBe("completed");
    expect(types(session.entries()).filter((t) => t === "turn_start")).toHaveLength(1);
    expect(model.requests).toHaveLength(2);
    expect(model.requests[1].messages.at(-1)).toMatchObject({
      role: "user",
      content: "one more thing",
    });
  });

  it("a follow-up is read only when the turn would otherwise end, and starts the next turn", async () => {
    const { gate, started, model, session } = gatedSession([
      { toolCalls: [{ id: "a", name: "slow", arguments: "{}" }] },
      { text: "first turn done" },
      { text: "follow-up done" },
    ]);
    const done = session.prompt("start");
    await started.promise;
    await session.followUp("and then summarise");
    gate.resolve();
    await done;
    await session.awaitIdle();
    expect(JSON.stringify(model.requests[1].messages)).not.toContain("summarise");
    expect(model.requests[2].messages.at(-1)).toMatchObject({
      role: "user",
      content: "and then summarise",
    });
    const e = types(session.entries());
    expect(e.filter((t) => t === "turn_start")).toHaveLength(2);
    expect(e.indexOf("turn_end")).toBeLessThan(e.lastIndexOf("turn_start"));
  });

  it("prompt() while a turn runs is queued and resolves when its own turn ends", async () => {
    const { gate, started, session } = gatedSession([
      { toolCalls: [{ id: "a", name: "slow", arguments: "{}" }] },
      { text: "one" },
      { text: "two" },
    ]);
    const first = session.prompt("first");
    await started.promise;
    const second = session.prompt("second");
    await Promise.resolve();
    gate.resolve();
    expect((await first).status).toBe("completed");
    expect((await second).status).toBe("completed");
    expect(session.messages().at(-1)).toMatchObject({ role: "assistant", content: "two" });
  });

  it("inputs queued before an interrupt survive it: shown by queued(), run on resume()", async () => {
    const { gate, started, session } = gatedSession(
      [{ toolCalls: [{ id: "a", name: "slow", arguments: "{}" }] }, { text: "queued one ran" }],
      { stopDeadlineMs: 20 },
    );
    const first = session.prompt("first");
    await started.promise;
    await session.followUp("queued before interrupt");
    session.interrupt("stop");
    expect((await first).status).toBe("cancelled");
    await session.awaitIdle();
    expect(session.queued().map((q) => q.body)).toEqual(["queued before interrupt"]);
    session.resume();
    await session.awaitIdle();
    expect(session.queued()).toHaveLength(0);
    expect(session.messages().at(-1)).toMatchObject({
      role: "assistant",
      content: "queued one ran",
    });
    gate.resolve();
  });

  it("an interrupt is an inbox event on the interrupt lane: logged before the turn is cancelled, consumed once the turn has ended", async () => {
    const { gate, started, session } = gatedSession(
      [{ toolCalls: [{ id: "a", name: "slow", arguments: "{}" }] }, { text: "never" }],
      { stopDeadlineMs: 20 },
    );
    const done = session.prompt("first");
    await started.promise;
    const acknowledged = session.interrupt("user pressed stop", { id: "int-1" });
    expect((await done).status).toBe("cancelled");
    expect(await acknowledged).toBe("int-1");
    await session.awaitIdle();
    const entries = session.entries();
    const at = (pred: (e: LogEntry) => boolean) => entries.findIndex(pred);
    const received = at((e) => e.type === "inbox" && e.inboxId === "int-1");
    expect(entries[received]).toMatchObject({
      type: "inbox",
      lane: "interrupt",
      source: "user",
      body: "user pressed stop",
    });
    const aborted = at((e) => e.type === "turn_aborted");
    const ended = at((e) => e.type === "turn_end");
    const consumed = at((e) => e.type === "inbox_consumed" && e.inboxId === "int-1");
    expect(received).toBeGreaterThan(-1);
    expect(received).toBeLessThan(aborted);
    expect(consumed).toBeGreaterThan(ended);
    expect(
      entries.filter((e) => e.type === "inbox_consumed" && e.inboxId === "int-1"),
    ).toHaveLength(1);
    expect(session.queued("interrupt")).toEqual([]);
    expect(session.sessionLog.inbox().queue).toEqual([]);
    gate.resolve();
  });

  it("an interrupt with no turn running is recorded and consumed at once; a repeated id cancels nothing", async () => {
    const { gate, started, session } = gatedSession([
      { toolCalls: [{ id: "a", name: "slow", arguments: "{}" }] },
      { text: "finished" },
    ]);
    await session.ready;
    expect(await session.interrupt("nothing runs", { id: "int-idle" })).toBe("int-idle");
    expect(types(session.entries())).toEqual(["inbox", "inbox_consumed"]);
    const done = session.prompt("go");
    await started.promise;
    // A replay of the same interrupt (e.g. a client retrying) must not cancel the new turn.
    await session.interrupt("nothing runs", { id: "int-idle" });
    gate.resolve();
    expect((await done).status).toBe("completed");
  });

  it("queued inputs survive a restart (they are in the log) and a duplicate id is consumed once", async () => {
    const store = memoryStore();
    const gate = deferred();
    const started = deferred();
    const model1 = scriptedModel([
      { toolCalls: [{ id: "a", name: "slow", arguments: "{}" }] },
      { text: "x" },
    ]);
    const a1 = createAgent({
      model: model1,
      store,
      tools: [gatedTool(gate.promise, () => started.resolve())],
    });
    const s1 = a1.session("persist");
    void s1.prompt("first");
    await started.promise;
    await s1.followUp("survives restart", { id: "f1" });
    await s1.followUp("survives restart", { id: "f1" });
    expect(s1.queued()).toHaveLength(1);
    // The process "restarts": a new agent opens the same session from the store. The cut turn
    // is closed (continued turns: test/durable-waits.e2e.test.ts).
    const model2 = scriptedModel([{ text: "ran after restart" }]);
    const s2 = createAgent({ model: model2, store, recovery: "close" }).session("persist");
    await s2.ready;
    expect(s2.queued().map((q) => q.id)).toEqual(["f1"]);
    s2.resume();
    await s2.awaitIdle();
    expect(model2.requests[0].messages.at(-1)).toMatchObject({
      role: "user",
      content: "survives restart",
    });
    gate.resolve();
  });

  it("clearQueue removes queued inputs explicitly and resolves their prompts as cancelled", async () => {
    const { gate, started, session } = gatedSession([
      { toolCalls: [{ id: "a", name: "slow", arguments: "{}" }] },
      { text: "done" },
    ]);
    const first = session.prompt("first");
    await started.promise;
    const queuedPrompt = session.prompt("never mind");
    await new Promise((r) => setImmediate(r));
    expect(session.clearQueue().map((e) => e.body)).toEqual(["never mind"]);
    expect(await queuedPrompt).toEqual({
      status: "cancelled",
      reason: "removed from the queue",
      text: "",
      usage: { inputTokens: 0, outputTokens: 0 },
      steps: 0,
    });
    gate.resolve();
    expect((await first).status).toBe("completed");
  });
});

describe("session branches", () => {
  it("rollback moves the leaf: the model no longer sees later messages, and is told files did not roll back", async () => {
    const model = scriptedModel([
      { text: "first" },
      { text: "second" },
      { text: "after rollback" },
    ]);
    const session = createAgent({ model }).session();
    await session.prompt("one");
    const mark = session.entries().at(-1)!.id;
    await session.prompt("two");
    expect(JSON.stringify(session.messages())).toContain("second");
    const result = await session.rollback(mark);
    expect(result.ok).toBe(true);
    expect(JSON.stringify(session.messages())).not.toContain("second");
    await session.prompt("three");
    const seen = JSON.stringify(model.requests[2].messages);
    expect(seen).not.toContain("second");
    expect(seen).toMatch(/did NOT roll back/);
    expect(session.exportJsonl().split("\n").filter(Boolean)).toHaveLength(
      session.entries().length,
    );
  });
});

describe("session compaction", () => {
  it("compact() asks the model for a summary and the next request starts from it", async () => {
    const model = scriptedModel([
      { text: "a long first answer ".repeat(50) },
      { text: "a long second answer ".repeat(50) },
      { text: "SUMMARY: the user asked twice" },
      { text: "fresh answer" },
    ]);
    const session = createAgent({ model }).session();
    await session.prompt("first question");
    await session.prompt("second question");
    const result = await session.compact({ keepRecentTokens: 10 });
    expect(result.ok).toBe(true);
    await session.prompt("third question");
    const seen = model.requests[3].messages;
    expect(String(seen[0].content)).toContain("SUMMARY: the user asked twice");
    expect(JSON.stringify(seen)).not.toContain("a long first answer");
  });
});

describe("session refusals", () => {
  it("every public method that can refuse answers { ok: false, code, message } and changes nothing", async () => {
    const { gate, started, session } = gatedSession([
      { toolCalls: [{ id: "c1", name: "slow", arguments: "{}" }] },
      { text: "done" },
    ]);
    const done = session.prompt("go");
    await started.promise;
    const before = session.entries().length;
    const turnId = session.currentTurn!.turnId;
    const refusals = [
      await session.compact(),
      await session.rollback(null),
      await session.fork(null),
      await session.switchLeaf(null),
      await session.replyPermission("nope", { type: "allow_once" }),
    ];
    for (const r of refusals) {
      expect(Object.keys(r).filter((k) => k !== "attempts")).toEqual(["ok", "code", "message"]);
    }
    expect(refusals.map((r) => (r.ok ? "ok" : r.code))).toEqual([
      "TURN_OPEN",
      "TURN_OPEN",
      "TURN_OPEN",
      "TURN_OPEN",
      "UNKNOWN_REQUEST",
    ]);
    for (const r of refusals.slice(0, 4)) {
      // What was wrong (which turn) and how to fix it.
      expect(r.ok ? "" : r.message).toContain(turnId);
      expect(r.ok ? "" : r.message).toMatch(/interrupt it or await session\.awaitIdle\(\)/);
    }
    expect(refusals[4].ok ? "" : refusals[4].message).toMatch(/no permission request nope/);
    expect(session.entries().length).toBe(before);
    gate.resolve();
    expect((await done).status).toBe("completed");
    expect(await session.rollback("no-such-entry")).toMatchObject({
      ok: false,
      code: "UNKNOWN_ENTRY",
      message: expect.stringContaining("no-such-entry"),
    });
  });
});
