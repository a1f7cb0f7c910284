import { describe, expect, it, vi } from "vitest";
import { assign, createActor, setup } from "xstate";
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
import { scriptedModel } from "../providers/scripted-model.ts";

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
