import { describe, expect, it, vi } from "vitest";
import { assign, createActor, setup } from "xstate";
import { z } from "zod";
import { createAgent } from "../actors/agent.ts";
import type { AgentEvent } from "../contracts/events.ts";
import { createFeed } from "../inspector/feed.ts";
import { apply, createModel } from "../inspector/page/model.js";
import {
  agentRecord,
  brief,
  type InspectRecord,
  inspectionRecord,
  stateString,
} from "../inspector/records.ts";
import { replayRecords } from "../inspector/replay.ts";
import { scriptedModel } from "../providers/scripted-model.ts";
import type { LogEntry } from "../session/entries.ts";
import { defineTool } from "../tools/define-tool.ts";

const ev = (body: Record<string, unknown>, at = 1): AgentEvent =>
  ({ sessionId: "s1", at, ...body }) as AgentEvent;

const bigContext = setup({
  types: {} as {
    context: { blob: string; pendingWake: { scope: string; seq: number } | null };
    events: { type: "go" } | { type: "noop" } | { type: "wake" };
  },
}).createMachine({
  id: "keel.coordinator",
  context: { blob: "x".repeat(200_000), pendingWake: null },
  initial: "idle",
  states: {
    idle: {
      on: {
        go: "running",
        noop: {},
        wake: { actions: assign({ pendingWake: { scope: "steer", seq: 3 } }) },
      },
    },
    running: { initial: "inner", states: { inner: {} } },
  },
});

describe("inspection records", () => {
  it("never serialise a snapshot's context: records stay small whatever the context holds", () => {
    const feed = createFeed({ clock: { now: () => 5, setTimeout, clearTimeout } });
    const actor = createActor(bigContext, { inspect: feed.observe });
    actor.start();
    actor.send({ type: "wake" });
    actor.send({ type: "go" });
    const records = feed.records();
    for (const r of records) expect(JSON.stringify(r).length).toBeLessThan(300);
    const snaps = records.filter((r) => r.k === "snap");
    expect(snaps.map((r) => r.k === "snap" && [r.state, r.wake])).toEqual([
      ["idle", null],
      ["idle", "steer"],
      ["running.inner", "steer"],
    ]);
  });

  it("drop snapshots that change nothing visible (same state, status and doorbell)", () => {
    const feed = createFeed();
    const actor = createActor(bigContext, { inspect: feed.observe });
    actor.start();
    for (let i = 0; i < 50; i++) actor.send({ type: "noop" });
    expect(feed.records().filter((r) => r.k === "snap")).toHaveLength(1);
    expect(feed.records().filter((r) => r.k === "ev")).toHaveLength(51);
  });

  it("name a tool call's actor by its call id, not its batch slot", () => {
    const record = inspectionRecord(
      {
        type: "@xstate.actor",
        rootId: "x:0",
        actorRef: {
          id: "slot1",
          sessionId: "x:7",
          _parent: { sessionId: "x:3" },
          logic: { id: "toolCall" },
          options: { input: { callId: "call_two", name: "write" } },
        },
      } as never,
      4,
      new Map(),
    );
    expect(record).toMatchObject({ k: "actor", sid: "x:7", id: "call_two", machine: "toolCall" });
  });

  it("name the actor, its parent and its machine", () => {
    const last = new Map<string, string>();
    const record = inspectionRecord(
      {
        type: "@xstate.actor",
        rootId: "x:0",
        actorRef: {
          id: "call_1",
          sessionId: "x:2",
          _parent: { sessionId: "x:1" },
          logic: { id: "keel.toolCall" },
        },
      } as never,
      9,
      last,
    );
    expect(record).toEqual({
      k: "actor",
      t: 9,
      sid: "x:2",
      id: "call_1",
      parent: "x:1",
      machine: "keel.toolCall",
    });
  });

  it("write nested and parallel state values as one dotted string", () => {
    expect(stateString("a")).toBe("a");
    expect(stateString({ running: { sampling: "streaming" } })).toBe("running.sampling.streaming");
    expect(stateString({ a: "x", b: { c: "y" } })).toBe("a.x, b.c.y");
    expect(stateString({})).toBe("");
  });

  it("clip tool arguments and results of AgentEvents", () => {
    const feed = createFeed();
    feed.publish(
      ev({
        type: "call.started",
        turnId: "t",
        callId: "c",
        name: "n",
        args: { text: "y".repeat(10_000) },
      }),
    );
    feed.publish(
      ev({
        type: "call.settled",
        turnId: "t",
        callId: "c",
        name: "n",
        outcome: "completed",
        result: { ok: true, content: "z".repeat(10_000) },
      }),
    );
    for (const r of feed.records()) expect(JSON.stringify(r).length).toBeLessThan(600);
  });
});

describe("previews of live arguments", () => {
  it("a call.previewed record reads only as much of the preview as it shows, not the whole value", () => {
    let reads = 0;
    const items = Array.from({ length: 100_000 }, (_, i) => ({ n: i }));
    const preview = {
      path: "a.txt",
      lines: new Proxy(items, {
        get(target, key, receiver) {
          if (typeof key === "string" && /^\d+$/.test(key)) reads++;
          return Reflect.get(target, key, receiver);
        },
      }),
    };
    const record = agentRecord(
      ev({ type: "call.previewed", attemptId: "a1", index: 0, name: "write", preview }),
    );
    const shown = (record as { e: { preview: string } }).e.preview;
    expect(shown.length).toBeLessThanOrEqual(120);
    expect(shown.startsWith('{"path":"a.txt","lines":[{"n":0},{"n":1}')).toBe(true);
    expect(reads).toBeLessThan(50);
  });

  it("a megabyte string in a preview is shown by its length, never read or encoded, and the rendering stays JSON-shaped", () => {
    const text = brief({ content: "x".repeat(4_000_000), n: 1 }, 40);
    expect(text).toBe('{"content":"[4000000 characters]","n":1}');
    expect(brief({ content: "x".repeat(60_000), n: 1 }, 40)).toBe(`{"content":"${"x".repeat(27)}…`);
    expect(brief({ a: [1, null, true, 2n], b: undefined, c: "é" })).toBe(
      '{"a":[1,null,true,2],"c":"é"}',
    );
  });
});

describe("the feed", () => {
  it("keeps a bounded ring, oldest first, when nobody listens, and arms no timer", () => {
    const spy = vi.spyOn(globalThis, "setTimeout");
    const feed = createFeed({ capacity: 100 });
    for (let i = 0; i < 250; i++)
      feed.publish(ev({ type: "log.written", level: "info", message: `m${i}` }, i));
    const records = feed.records();
    expect(records).toHaveLength(100);
    expect(records[0].t).toBe(150);
    expect(records.at(-1)!.t).toBe(249);
    expect(spy).not.toHaveBeenCalled();
    spy.mockRestore();
  });

  it("sends a full batch at once and a partial one on flush, each record exactly once", () => {
    const feed = createFeed({ flushSize: 10, flushMs: 60_000 });
    const batches: InspectRecord[][] = [];
    feed.publish(ev({ type: "log.written", level: "info", message: "before" }));
    feed.subscribe((b) => batches.push(b));
    for (let i = 0; i < 25; i++)
      feed.publish(ev({ type: "log.written", level: "info", message: `m${i}` }, i));
    expect(batches.map((b) => b.length)).toEqual([10, 10]);
    feed.flush();
    expect(batches.map((b) => b.length)).toEqual([10, 10, 5]);
    const messages = batches
      .flat()
      .map((r) => r.k === "agent" && r.e.type === "log.written" && r.e.message);
    expect(messages).toEqual(Array.from({ length: 25 }, (_, i) => `m${i}`));
    feed.close();
  });

  it("gives a new listener only what comes after the ring it reads: no duplicates", () => {
    const feed = createFeed({ flushSize: 1000, flushMs: 60_000 });
    const first: InspectRecord[] = [];
    feed.subscribe((b) => first.push(...b));
    feed.publish(ev({ type: "text.streamed", attemptId: "a", text: "he" }));
    const second: InspectRecord[] = [];
    feed.subscribe((b) => second.push(...b));
    const ring = feed.records();
    feed.publish(ev({ type: "text.streamed", attemptId: "a", text: "llo" }));
    feed.flush();
    const text = (rs: InspectRecord[]) =>
      rs.map((r) => (r.k === "agent" && r.e.type === "text.streamed" ? r.e.text : "")).join("");
    expect(text(first)).toBe("hello");
    expect(text(ring) + text(second)).toBe("hello");
    feed.close();
  });

  it("merges unsent text deltas of one attempt into one record", () => {
    const feed = createFeed();
    for (const piece of ["a", "b", "c"])
      feed.publish(ev({ type: "text.streamed", attemptId: "x", text: piece }));
    feed.publish(ev({ type: "text.streamed", attemptId: "y", text: "d" }));
    expect(
      feed.records().map((r) => r.k === "agent" && r.e.type === "text.streamed" && r.e.text),
    ).toEqual(["abc", "d"]);
  });

  it("never throws into the runtime, even for malformed events", () => {
    const feed = createFeed();
    expect(() => feed.observe({ type: "@xstate.snapshot", actorRef: null } as never)).not.toThrow();
    expect(() => feed.publish(null as never)).not.toThrow();
  });
});

describe("the page model", () => {
  const fold = (records: InspectRecord[]) => {
    const model = createModel();
    for (const r of records) apply(model, r);
    return model;
  };
  const agent = (body: Record<string, unknown>, t: number): InspectRecord => ({
    k: "agent",
    t,
    e: ev(body, t),
  });

  it("never moves a call backwards, whatever order actor snapshots and events arrive in", () => {
    const model = fold([
      { k: "actor", t: 1, sid: "x:1", id: "call_1", machine: "keel.toolCall" },
      { k: "snap", t: 2, sid: "x:1", id: "call_1", state: "started", status: "active" },
      agent({ type: "call.queued", turnId: "t1", callId: "call_1", name: "read" }, 3),
      { k: "snap", t: 4, sid: "x:1", id: "call_1", state: "settled", status: "done" },
      agent({ type: "call.started", turnId: "t1", callId: "call_1", name: "read", args: "{}" }, 5),
    ]);
    const call = model.calls.get("call_1")!;
    expect(call.state).toBe("settled");
    expect(call.segs.map((s) => s.s)).toEqual(["started", "settled"]);
  });

  it("keeps an earlier call when a later message reuses its id", () => {
    const model = fold([
      agent({ type: "call.queued", turnId: "t1", callId: "c", name: "a" }, 1),
      agent(
        {
          type: "call.settled",
          turnId: "t1",
          callId: "c",
          name: "a",
          outcome: "completed",
          result: { ok: true, content: "" },
        },
        2,
      ),
      agent({ type: "call.queued", turnId: "t2", callId: "c", name: "b" }, 3),
    ]);
    expect([...model.calls.values()].map((c) => `${c.name}:${c.state}`)).toEqual([
      "a:settled",
      "b:queued",
    ]);
  });

  it("hangs a turn actor under its session once turn.started names it", () => {
    const model = fold([
      { k: "actor", t: 1, sid: "x:7", id: "turn_1", machine: "keel.turn" },
      agent({ type: "turn.started", turnId: "turn_1", input: "hi" }, 2),
      agent({ type: "attempt.started", turnId: "turn_1", attemptId: "a1", step: 0 }, 3),
    ]);
    const turn = model.nodes.get(model.byId.get("turn_1")!)!;
    expect(turn.parent).toBe("s:s1");
    expect(model.nodes.get(model.byId.get("a1")!)!.parent).toBe(turn.key);
  });

  it("ends retry waits when the next attempt starts, and tracks inbox lanes", () => {
    const model = fold([
      agent(
        {
          type: "retry.scheduled",
          turnId: "t",
          attemptId: "a1",
          retry: 1,
          delayMs: 100,
          readyAt: 101,
          reason: "429",
          mode: "retry",
        },
        1,
      ),
      agent({ type: "inbox.received", inboxId: "i1", lane: "next-step", source: "user" }, 2),
    ]);
    expect(model.retries[0].done).toBe(false);
    apply(model, agent({ type: "attempt.started", turnId: "t", attemptId: "a2", step: 0 }, 101));
    apply(model, agent({ type: "inbox.consumed", inboxId: "i1", lane: "next-step" }, 102));
    expect(model.retries[0].done).toBe(true);
    expect(model.inbox.get("i1")!.consumedAt).toBe(102);
  });
});

describe("what a session publishes to its inspect sink", () => {
  it("includes the session's own inbox events, not only its turns' (the inbox lanes live)", async () => {
    const published: AgentEvent[] = [];
    const agent = createAgent({
      model: scriptedModel([{ text: "hi" }]),
      inspect: { observe: () => {}, publish: (e) => published.push(e) },
    });
    const session = agent.session("s");
    await session.prompt("hello");
    await agent.close();
    const types = published.map((e) => e.type);
    expect(types).toEqual(
      expect.arrayContaining(["inbox.received", "inbox.consumed", "turn.ended"]),
    );
    expect(types.indexOf("inbox.received")).toBeLessThan(types.indexOf("turn.started"));
    // Each event once, stamped like a listener's.
    expect(types.filter((t) => t === "turn.ended")).toHaveLength(1);
    expect(published.every((e) => e.sessionId === "s" && typeof e.at === "number")).toBe(true);
  });
});

describe("replay", () => {
  it("a turn its step's commit ended (a spent budget) is replayed from executing to finalizing on batch.done, as the live chart went", async () => {
    const model = scriptedModel([
      { toolCalls: [{ id: "c1", name: "echo", arguments: '{"text":"a"}' }] },
    ]);
    const echo1 = defineTool({
      name: "echo",
      description: "Echoes.",
      parameters: z.object({ text: z.string() }),
      traits: { concurrencySafe: true, risk: "low" },
      execute: ({ text }) => text,
    });
    const agent = createAgent({ model, tools: [echo1], limits: { maxSteps: 1 } });
    const session = agent.session("budget-end");
    expect((await session.prompt("go")).status).toBe("budget_exhausted");
    const records = replayRecords(session.entries(), "budget-end");
    await agent.close();
    const moves = records
      .filter((r) => r.k === "snap" && "ev" in r && r.ev !== undefined)
      .map((r) => `${(r as { state: string }).state} on ${(r as { ev: string }).ev}`);
    expect(moves).toContain("finalizing on batch.done");
    expect(moves.some((m) => m.startsWith("running.sampling.preparing on batch.done"))).toBe(false);
  });

  /** Log entries with consecutive seq and `at` = 100 + seq (or the given `at`). */
  function log() {
    let seq = 0;
    return (body: Record<string, unknown>, at?: number) => {
      const entry = {
        id: `e${seq}`,
        parentId: seq ? `e${seq - 1}` : null,
        seq,
        at: at ?? 100 + seq,
      };
      seq++;
      return { ...entry, ...body } as LogEntry;
    };
  }
  const call = (id: string, name: string) => ({ type: "tool-call", id, name, arguments: "{}" });
  const agentTypes = (records: InspectRecord[]) =>
    records.flatMap((r) => (r.k === "agent" ? [r.e.type] : []));
  const modelOf = (records: InspectRecord[]) => {
    const model = createModel();
    for (const r of records) apply(model, r);
    return model;
  };

  it("turns a stored log into the records of a live session, calls queued → started → settled", () => {
    const e = log();
    const records = replayRecords(
      [
        e({ type: "turn_start", turnId: "t" }),
        e({ type: "user_message", text: "list it" }),
        e({
          type: "assistant_message",
          turnId: "t",
          attemptId: "a",
          finishReason: "tool_calls",
          content: [{ type: "tool-call", id: "c", name: "ls", arguments: "{}" }],
        }),
        e({
          type: "call_started",
          callId: "c",
          name: "ls",
          args: {},
          idempotencyKey: "k",
          idempotent: true,
        }),
        e({
          type: "call_result",
          callId: "c",
          name: "ls",
          outcome: "unknown",
          result: { ok: false, code: "OUTCOME_UNKNOWN", message: "?", retryable: false },
        }),
        e({ type: "compaction", summary: "s", firstKeptId: "e1" }),
      ],
      "sess",
    );
    expect(records.find((r) => r.k === "agent")).toMatchObject({
      e: { type: "turn.started", input: "list it" },
    });
    expect(agentTypes(records)).toEqual([
      "turn.started",
      "log.written",
      "message.committed",
      "call.queued",
      "call.started",
      "call.settled",
      "log.written",
    ]);
    const model = modelOf(records);
    expect(model.calls.get("c")!.segs.map((s) => s.s)).toEqual(["queued", "started", "unknown"]);
  });

  it("draws the actor tree a live session draws: the coordinator, the turn with its batch, batched calls under the batch, refused calls and attempts under the turn", () => {
    const e = log();
    const model = modelOf(
      replayRecords(
        [
          e({ type: "inbox", inboxId: "i1", source: "user", lane: "next-turn", body: "go" }),
          e({ type: "turn_start", turnId: "t" }),
          e({ type: "inbox_consumed", inboxId: "i1" }),
          e({ type: "attempt_start", turnId: "t", attemptId: "t.a1", step: 0 }),
          e({
            type: "assistant_message",
            turnId: "t",
            attemptId: "t.a1",
            finishReason: "tool_calls",
            content: [call("ok", "ls"), call("nope", "fetch_url")],
          }),
          e({ type: "attempt_end", attemptId: "t.a1", status: "completed" }),
          e({
            type: "call_result",
            callId: "nope",
            name: "fetch_url",
            outcome: "not_executed",
            result: { ok: false, code: "UNKNOWN_TOOL", message: "?", retryable: false },
          }),
          e({
            type: "call_started",
            callId: "ok",
            name: "ls",
            args: {},
            idempotencyKey: "k",
            idempotent: true,
          }),
          e({
            type: "call_result",
            callId: "ok",
            name: "ls",
            outcome: "completed",
            result: { ok: true, content: "a" },
          }),
          e({ type: "turn_end", turnId: "t", status: "completed" }),
        ],
        "sess",
      ),
    );
    const node = (id: string) => model.nodes.get(model.byId.get(id)!)!;
    const parentId = (id: string) => model.nodes.get(node(id).parent!)?.id;
    expect(node("coordinator")).toMatchObject({ kind: "coordinator", state: "idle" });
    expect(node("coordinator").parent).toBeUndefined();
    expect(parentId("t")).toBe("sess");
    expect(node("t")).toMatchObject({ kind: "turn", state: "done" });
    expect(node("batch")).toMatchObject({ kind: "batch", state: "idle", status: "stopped" });
    expect(parentId("batch")).toBe("t");
    expect(node("ok")).toMatchObject({ kind: "call", state: "settled" });
    expect(parentId("ok")).toBe("batch");
    expect(parentId("nope")).toBe("t");
    expect(parentId("t.a1")).toBe("t");
  });

  it("draws a failed attempt followed by another as a retry wait from the failure to the next attempt", () => {
    const e = log();
    const records = replayRecords(
      [
        e({ type: "turn_start", turnId: "t" }, 1000),
        e({ type: "attempt_start", turnId: "t", attemptId: "t.a1", step: 0 }, 1010),
        e({ type: "attempt_end", attemptId: "t.a1", status: "failed", error: "HTTP 429" }, 1020),
        e({ type: "attempt_start", turnId: "t", attemptId: "t.a2", step: 0 }, 2020),
        e(
          {
            type: "attempt_end",
            attemptId: "t.a2",
            status: "failed",
            error: "stream cut",
            partialText: "Hel",
          },
          2100,
        ),
        e({ type: "attempt_start", turnId: "t", attemptId: "t.a3", step: 0 }, 2600),
        e({ type: "attempt_end", attemptId: "t.a3", status: "failed", error: "HTTP 500" }, 2700),
        e({ type: "turn_end", turnId: "t", status: "failed", reason: "retries exhausted" }, 2701),
      ],
      "sess",
    );
    const waits = records.flatMap((r) =>
      r.k === "agent" && r.e.type === "retry.scheduled" ? [r.e] : [],
    );
    expect(waits).toEqual([
      expect.objectContaining({
        attemptId: "t.a1",
        retry: 1,
        delayMs: 1000,
        readyAt: 2020,
        reason: "HTTP 429",
        mode: "retry",
      }),
      expect.objectContaining({
        attemptId: "t.a2",
        retry: 2,
        delayMs: 500,
        readyAt: 2600,
        mode: "continue",
      }),
    ]);
    // Scrubbed to the first failure, the page shows the wait as live: not done yet.
    const upToFailure = records.filter((r) => r.t <= 1020);
    expect(modelOf(upToFailure).retries).toEqual([expect.objectContaining({ done: false })]);
    expect(modelOf(records).retries.every((w) => w.done)).toBe(true);
  });

  it("rebuilds the doorbell: an input arriving while a turn runs rings it (input outranks steer); the turn's end answers it", () => {
    const e = log();
    const records = replayRecords(
      [
        e({ type: "inbox", inboxId: "i1", source: "user", lane: "next-turn", body: "go" }),
        e({ type: "turn_start", turnId: "t1" }),
        e({ type: "inbox_consumed", inboxId: "i1" }),
        e({ type: "inbox", inboxId: "i2", source: "user", lane: "next-step", body: "steer" }),
        e({ type: "inbox", inboxId: "i3", source: "user", lane: "next-turn", body: "then" }),
        e({ type: "inbox", inboxId: "i4", source: "user", lane: "next-step", body: "more" }),
        e({ type: "inbox_consumed", inboxId: "i2" }),
        e({ type: "inbox_consumed", inboxId: "i4" }),
        e({ type: "turn_end", turnId: "t1", status: "completed" }),
        e({ type: "turn_start", turnId: "t2" }),
        e({ type: "inbox_consumed", inboxId: "i3" }),
        e({ type: "turn_end", turnId: "t2", status: "completed" }),
      ],
      "sess",
    );
    const bell = records.flatMap((r) =>
      r.k === "snap" && r.id === "coordinator" ? [`${r.state}:${r.wake}`] : [],
    );
    expect(bell).toEqual([
      "idle:null",
      "running:null",
      "running:steer",
      "running:input",
      "running:input",
      "running:null", // t1 ended with i3 queued: a successor runs it
      "idle:null",
    ]);
    expect(modelOf(records).wake).toBeNull();
  });
});
