import { describe, expect, it } from "vitest";
import { createActor, fromPromise, not, setup } from "xstate";
import { createAgent } from "../actors/agent.ts";
import { chartOf, eventLabel, guardLabel } from "../inspector/chart.ts";
import { layoutChart } from "../inspector/chart-layout.ts";
import { createChartSource } from "../inspector/chart-source.ts";
import { createFeed } from "../inspector/feed.ts";
import { activeStates, takenEdge } from "../inspector/page/chart.js";
import { apply, createModel } from "../inspector/page/model.js";
import { replayRecords } from "../inspector/replay.ts";
import { toolCallMachine } from "../machines/tool-call.machine.ts";
import { turnMachine } from "../machines/turn.machine.ts";
import { scriptedModel } from "../providers/scripted-model.ts";

/** A small machine with every kind of transition the chart reads. */
const sample = (extraState = false) =>
  setup({
    types: {} as { events: { type: "go" } | { type: "stop" } | { type: "poke" } },
    guards: { ready: () => true, late: () => false },
    actors: { worker: fromPromise(async () => 1) },
    delays: { patience: 100 },
  }).createMachine({
    id: "sample",
    initial: "idle",
    states: {
      idle: {
        on: {
          go: [{ guard: "ready", target: "busy" }, { target: "busy.inner" }],
          poke: { guard: not("late") },
        },
      },
      busy: {
        invoke: { src: "worker", onDone: "done" },
        initial: "inner",
        states: { inner: { after: { patience: "#sample.idle" } } },
        on: { stop: "idle" },
      },
      ...(extraState ? { checking: { always: "done" } } : {}),
      done: { type: "final" },
    },
  });

describe("a statechart read from its machine's definition", () => {
  it("lists every state with its parent, the initial ones, invoked actors and transitions that stay", () => {
    const chart = chartOf(sample());
    expect(chart.id).toBe("sample");
    expect(chart.states.map((s) => [s.path, s.parent ?? "", s.type, s.initial])).toEqual([
      ["idle", "", "atomic", true],
      ["busy", "", "compound", false],
      ["busy.inner", "busy", "atomic", true],
      ["done", "", "final", false],
    ]);
    expect(chart.states[1].invokes).toEqual(["worker"]);
    expect(chart.states[0].stays).toEqual([
      { event: "poke", label: "poke [not(late)]", guard: "not(late)" },
    ]);
  });

  it("labels transitions by event and named guard, delays as `after`, invoked actors' results as done()", () => {
    const chart = chartOf(sample());
    const edges = Object.fromEntries(
      chart.edges.map((e) => [e.id, e.transitions.map((t) => t.label)]),
    );
    expect(edges).toEqual({
      "idle→busy": ["go [ready]"],
      "idle→busy.inner": ["go"],
      "busy→done": [expect.stringMatching(/^done\(/)],
      "busy→idle": ["stop"],
      "busy.inner→idle": ["after patience"],
    });
  });

  it("follows a change of the machine with no change to the inspector: a new state and its eventless transition appear", () => {
    const before = chartOf(sample(false));
    const after = chartOf(sample(true));
    expect(before.states.map((s) => s.path)).not.toContain("checking");
    expect(after.states.map((s) => s.path)).toContain("checking");
    expect(after.edges.find((e) => e.id === "checking→done")?.transitions).toEqual([
      { event: "", label: "always" },
    ]);
  });

  it("reads Keel's turn chart: its phases, guarded transitions and the retry delay", () => {
    const chart = chartOf(turnMachine);
    const paths = chart.states.map((s) => s.path);
    for (const state of [
      "running.sampling.preparing",
      "running.compacting.summarizing",
      "running.sampling.streaming",
      "running.waiting",
      "running.executing.stopping",
      "finalizing",
      "done",
    ]) {
      expect(paths).toContain(state);
    }
    const labels = (id: string) =>
      chart.edges.find((e) => e.id === id)?.transitions.map((t) => t.label);
    expect(labels("running.sampling→running.waiting")).toEqual(["attempt.failed [canRetry]"]);
    expect(labels("running.waiting→running.sampling")).toEqual(["after retryDelay"]);
    expect(labels("running.refusing→running.committing")).toEqual(["always"]);
  });

  it("names guards and events in short forms", () => {
    expect(guardLabel("ready")).toBe("ready");
    expect(guardLabel({ type: "ready", params: {} })).toBe("ready");
    expect(guardLabel(not("ready"))).toBe("not(ready)");
    expect(guardLabel(undefined)).toBeUndefined();
    expect(eventLabel("xstate.after.stopDeadline.toolCall.stopping")).toBe("after stopDeadline");
    expect(eventLabel("xstate.error.actor.batch")).toBe("error(batch)");
    expect(eventLabel("xstate.done.actor.slot1")).toBe("done(slot1)");
    expect(eventLabel("call.cancel")).toBe("call.cancel");
  });
});

describe("the chart's layout (elkjs, on Node)", () => {
  it("places every state inside its parent and routes every edge from its source to its target", async () => {
    const placed = await layoutChart(chartOf(toolCallMachine));
    const box = new Map(placed.states.map((s) => [s.path, s]));
    expect(placed.states.map((s) => s.path).sort()).toEqual([
      "recording",
      "settled",
      "started",
      "stopping",
      "unknown",
    ]);
    for (const s of placed.states) {
      expect(s.width).toBeGreaterThan(0);
      expect(s.x + s.width).toBeLessThanOrEqual(placed.width + 0.5);
      expect(s.y + s.height).toBeLessThanOrEqual(placed.height + 0.5);
    }
    const near = (
      p: { x: number; y: number },
      s: { x: number; y: number; width: number; height: number },
    ) => p.x >= s.x - 1 && p.x <= s.x + s.width + 1 && p.y >= s.y - 1 && p.y <= s.y + s.height + 1;
    for (const edge of placed.edges) {
      expect(edge.points.length).toBeGreaterThanOrEqual(2);
      expect(near(edge.points[0], box.get(edge.source)!)).toBe(true);
      expect(near(edge.points.at(-1)!, box.get(edge.target)!)).toBe(true);
      expect(edge.label.width).toBeGreaterThan(0);
    }
  }, 60_000);

  it("places nested states inside their compound parent", async () => {
    const placed = await layoutChart(chartOf(sample()));
    const busy = placed.states.find((s) => s.path === "busy")!;
    const inner = placed.states.find((s) => s.path === "busy.inner")!;
    expect(inner.x).toBeGreaterThanOrEqual(busy.x);
    expect(inner.y).toBeGreaterThan(busy.y);
    expect(inner.x + inner.width).toBeLessThanOrEqual(busy.x + busy.width);
    expect(inner.y + inner.height).toBeLessThanOrEqual(busy.y + busy.height);
  }, 60_000);

  it("lays out each of Keel's charts a replay draws: turn, batch, tool call, session, acceptance", async () => {
    const source = createChartSource();
    for (const id of ["turn", "batch", "toolCall", "session", "acceptance"]) {
      const placed = await source.chart(id);
      expect(placed.id).toBe(id);
      expect(placed.states.length).toBeGreaterThan(2);
      for (const s of placed.states) expect(s.width * s.height).toBeGreaterThan(0);
      for (const e of placed.edges) expect(e.points.length).toBeGreaterThanOrEqual(2);
    }
  }, 120_000);

  it("prefers the machine a live actor ran over Keel's chart of the same id, and says when none is known", async () => {
    const layouter = { layout: async (g: object) => ({ ...g, x: 0, y: 0, width: 1, height: 1 }) };
    const source = createChartSource(layouter as never);
    const variant = setup({}).createMachine({
      id: "toolCall",
      initial: "only",
      states: { only: {} },
    });
    expect((await source.chart("toolCall")).states.map((s) => s.path)).toContain("stopping");
    source.register(variant);
    expect((await source.chart("toolCall")).states.map((s) => s.path)).toEqual(["only"]);
    await expect(source.chart("nothing")).rejects.toThrow(
      /no statechart is known for machine "nothing"/,
    );
  });
});

describe("the page's lit states and marked transition", () => {
  const chart = chartOf(turnMachine);

  it("lights a state and its ancestors", () => {
    expect([...activeStates("running.sampling.streaming")]).toEqual([
      "running",
      "running.sampling",
      "running.sampling.streaming",
    ]);
    expect([...activeStates("")]).toEqual([]);
  });

  it("marks the deepest edge that leaves the old state and enters the new one on the event taken", () => {
    expect(
      takenEdge(chart, {
        from: "running.sampling.streaming",
        to: "running.executing.running",
        event: "attempt.done",
      }),
    ).toEqual({ id: "running.sampling→running.executing", index: 0 });
    // Two transitions of one edge: the one on the event is marked.
    expect(
      takenEdge(chart, {
        from: "finalizing",
        to: "done",
        event: "xstate.after.finalizeDeadline.turn.finalizing",
      }),
    ).toEqual({ id: "finalizing→done", index: 2 }); // after finalize.done's two (refused or not)
    expect(
      takenEdge(chart, {
        from: "running.sampling.streaming",
        to: "running.sampling.stopping",
        event: "turn.interrupt",
      }),
    ).toEqual({ id: "running.sampling.streaming→running.sampling.stopping", index: 0 });
    // Eventless steps chained in one macrostep show no single edge.
    expect(
      takenEdge(chart, {
        from: "running.sampling.streaming",
        to: "running.sampling.preparing",
        event: "attempt.done",
      }),
    ).toBeUndefined();
  });

  it("records the transition each actor took: the event its last `ev` record named, or the replay's", () => {
    const model = createModel();
    apply(model, { k: "actor", t: 1, sid: "x:1", id: "t1", machine: "turn" });
    apply(model, {
      k: "snap",
      t: 1,
      sid: "x:1",
      id: "t1",
      state: "running.sampling.preparing",
      status: "active",
    });
    apply(model, { k: "ev", t: 2, sid: "x:1", id: "t1", type: "attempt.recorded" });
    apply(model, {
      k: "snap",
      t: 2,
      sid: "x:1",
      id: "t1",
      state: "running.sampling.streaming",
      status: "active",
    });
    const node = model.nodes.get(model.byId.get("t1")!)!;
    expect(node.last).toEqual({
      from: "running.sampling.preparing",
      to: "running.sampling.streaming",
      event: "attempt.recorded",
    });
    apply(model, {
      k: "snap",
      t: 3,
      sid: "x:1",
      id: "t1",
      state: "running.waiting",
      status: "active",
      ev: "attempt.failed",
    });
    expect(node.last?.event).toBe("attempt.failed");
  });
});

describe("the session chart's name", () => {
  it("is `session` live, as in a replay of the same session, and no coordinator actor is left", async () => {
    const feed = createFeed();
    const agent = createAgent({
      model: scriptedModel([{ text: "hi" }]),
      tools: [],
      inspect: { observe: feed.observe, publish: feed.publish },
    });
    try {
      await agent.session("s_coord").prompt("hello");
      const machines = (records: ReturnType<typeof feed.records>) =>
        records.flatMap((r) => (r.k === "actor" ? [r.machine] : []));
      const live = feed.records().filter((r) => r.k === "actor" && r.machine === "session");
      const entries = await agent.store.load("s_coord");
      const replay = await replayRecords(entries, "s_coord");
      const replayed = replay.records.filter((r) => r.k === "actor" && r.machine === "session");
      expect(new Set(live.map((r) => r.k === "actor" && r.id))).toEqual(new Set(["session"]));
      expect(new Set(replayed.map((r) => r.k === "actor" && r.id))).toEqual(new Set(["session"]));
      expect(machines(feed.records())).not.toContain("coordinator");
    } finally {
      await agent.close();
    }
  });

  it("keeps an actor's own id when it was given one", () => {
    const feed = createFeed();
    const actor = createActor(sample(), { id: "mine", inspect: feed.observe });
    actor.start();
    actor.stop();
    expect(feed.records().find((r) => r.k === "actor")).toMatchObject({ id: "mine" });
  });
});
