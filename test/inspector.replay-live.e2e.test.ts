// The live view and the replay of the same session show the same states: a session runs with the
// inspector's feed as its `inspect` sink (XState's inspection events and the session's events),
// then its stored log is replayed (inspector/replay.ts) and every actor's sequence of states is
// compared with the one the feed showed live.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createAgent, defineTool, memoryStore, scriptedModel } from "../index.ts";
import { createFeed } from "../inspector/feed.ts";
import type { InspectRecord } from "../inspector/records.ts";
import { replayRecords } from "../inspector/replay.ts";
import { stopsAfterFirstStepTurnMachine } from "./support/mutants/turn.mutants.ts";

const echo = defineTool({
  name: "echo",
  description: "Echoes.",
  parameters: z.object({ text: z.string() }),
  traits: { concurrencySafe: true, risk: "low" },
  execute: async ({ text }) => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    return text;
  },
});

/**
 * Each actor's states in order, by a name that does not depend on the run: a tool call by its
 * call id, any other actor by its machine and its rank among that machine's actors.
 */
function statesByActor(records: readonly InspectRecord[]): Record<string, string[]> {
  const names = new Map<string, string>();
  const counts = new Map<string, number>();
  const out: Record<string, string[]> = {};
  for (const r of records) {
    if (r.k === "actor") {
      const machine = r.machine ?? "?";
      const n = counts.get(machine) ?? 0;
      counts.set(machine, n + 1);
      names.set(r.sid, machine === "toolCall" ? `toolCall:${r.id}` : `${machine}#${n}`);
    } else if (r.k === "snap") {
      let name = names.get(r.sid) ?? `?${r.sid}`;
      // The session chart: one actor per execution (a session at rest holds none), and whether a
      // turn's successor starts from cleaning or after a rest at idle depends on when an input
      // arrived, which a replay delivers at its recorded time, not to the microtask. Compared
      // as one sequence of its working states: the same turns, started and stopped in order.
      if (name.startsWith("session#")) {
        if (r.status === "stopped" || r.state.includes("work.idle")) continue;
        name = "session";
      }
      out[name] ??= [];
      const list = out[name];
      const state = `${r.state} (${r.status})`;
      if (list.at(-1) !== state) list.push(state);
    }
  }
  return out;
}

async function runLive(turnMachine?: typeof stopsAfterFirstStepTurnMachine) {
  const feed = createFeed();
  const store = memoryStore();
  const model = scriptedModel([
    {
      text: "Two at once.",
      toolCalls: [
        { id: "c1", name: "echo", arguments: '{"text":"a"}' },
        { id: "c2", name: "echo", arguments: '{"text":"b"}' },
      ],
    },
    { error: { status: 503, headers: { "retry-after-ms": "20" }, message: "overloaded" } },
    { toolCalls: [{ id: "c3", name: "echo", arguments: '{"text":"c"}' }] },
    { text: "done" },
    { text: "and the follow-up" },
  ]);
  const agent = createAgent({
    model,
    tools: [echo],
    store,
    instructions: "Be brief.",
    inspect: feed,
    ...(turnMachine ? { turnMachine } : {}),
  });
  const session = await agent.openSession("s_live");
  let steered = false;
  session.subscribe((e) => {
    if (e.type === "call.started" && !steered) {
      steered = true;
      void session.steer("only the first letters");
    }
  });
  const first = session.prompt("echo a and b");
  await session.followUp("then say so");
  await first;
  await session.awaitIdle();
  const records = feed.records();
  await agent.close();
  return { records, entries: await store.load("s_live") };
}

/** A tool that honours its abort, and one that outlives the stop deadline (not cancellable). */
const slow = defineTool({
  name: "slow",
  description: "Slow, stops when asked.",
  parameters: z.object({}),
  traits: { concurrencySafe: true, cancellable: true, risk: "low" },
  execute: (_args, ctx) =>
    new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => resolve("late"), 5_000);
      ctx.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        reject(new Error("aborted"));
      });
    }),
});
const stuck = defineTool({
  name: "stuck",
  description: "Slow, ignores a cancel.",
  parameters: z.object({}),
  traits: { concurrencySafe: true, risk: "low" },
  execute: () => new Promise<string>((resolve) => setTimeout(() => resolve("done anyway"), 400)),
});

describe("the inspector's replay", () => {
  it("replays an interrupt during a batch: the call that stopped is cancelled, the one that did not is unknown, in the same states", async () => {
    const feed = createFeed();
    const store = memoryStore();
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "a", name: "slow", arguments: "{}" },
          { id: "b", name: "stuck", arguments: "{}" },
        ],
      },
      { text: "after the interrupt" },
    ]);
    const agent = createAgent({
      model,
      tools: [slow, stuck],
      store,
      stopDeadlineMs: 100,
      inspect: feed,
    });
    const session = await agent.openSession("s_cut");
    session.subscribe((e) => {
      if (e.type === "call.started" && e.callId === "b")
        setTimeout(() => void session.interrupt("stop"), 20);
    });
    expect((await session.prompt("go")).status).toBe("cancelled");
    expect((await session.prompt("again")).status).toBe("completed");
    await session.awaitIdle();
    const records = feed.records();
    await agent.close();
    const entries = await store.load("s_cut");
    const outcomes = entries.flatMap((e) =>
      e.type === "call_result" ? [`${e.callId}:${e.outcome}`] : [],
    );
    expect(outcomes).toEqual(["a:cancelled", "b:unknown"]);
    const replayed = await replayRecords(entries, "s_cut", {
      tools: [slow, stuck],
      agent: { stopDeadlineMs: 100 },
    });
    expect(replayed.divergence, JSON.stringify(replayed.divergence)).toBeUndefined();
    expect(statesByActor(replayed.records)).toEqual(statesByActor(records));
  }, 30_000);

  it("shows every actor of a session in the states the live view showed, in the same order", async () => {
    const live = await runLive();
    const replayed = await replayRecords(live.entries, "s_live", { tools: [echo] });
    expect(replayed.divergence, JSON.stringify(replayed.divergence)).toBeUndefined();
    const want = statesByActor(live.records);
    // The session's actors are all there: turns, their batch, each call.
    expect(Object.keys(want)).toEqual(
      expect.arrayContaining(["turn#0", "turn#1", "batch#0", "toolCall:c1", "toolCall:c3"]),
    );
    expect(want["turn#0"]).toContain("running.waiting (active)");
    expect(statesByActor(replayed.records)).toEqual(want);
  }, 30_000);

  it("shows different states when the session ran on a different chart than the replay's", async () => {
    const live = await runLive(stopsAfterFirstStepTurnMachine);
    const replayed = await replayRecords(live.entries, "s_live", { tools: [echo] });
    expect(replayed.divergence).toBeDefined();
    expect(statesByActor(replayed.records)).not.toEqual(statesByActor(live.records));
  }, 30_000);
});
